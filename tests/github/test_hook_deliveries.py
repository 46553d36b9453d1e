"""The App's webhook deliveries through the client: listing by cursor pages, redelivering."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bot.github.client import AuthError, GitHubApp, NotFound
from tests.fakes.github import FakeGitHub, new_private_key_pem, serve_app
from tests.github._client_world import API, hello_world, make_app

pytestmark = pytest.mark.anyio

DAY = 86400.0


@pytest.fixture
def fake(tmp_path: Path) -> FakeGitHub:
    return hello_world(tmp_path)


class Receiver:
    """A webhook endpoint on 127.0.0.1 that keeps what it gets and answers `status`."""

    def __init__(self) -> None:
        self.got: list[tuple[dict[str, str], bytes]] = []
        self.status = 202

    async def receive(self, request: Request) -> Response:
        self.got.append((dict(request.headers), await request.body()))
        return Response("", self.status)


@pytest.fixture
def receiver(fake: FakeGitHub) -> Iterator[Receiver]:
    got = Receiver()
    app = Starlette(routes=[Route("/webhooks/github", got.receive, methods=["POST"])])
    with serve_app(app) as url:
        fake.webhook_url = f"{url}/webhooks/github"
        yield got


def payload(n: int) -> dict[str, object]:
    return {"action": "opened", "installation": {"id": 42}, "issue": {"number": n}}


async def test_deliveries_come_newest_first_over_cursor_pages_until_since(
    fake: FakeGitHub,
) -> None:
    now = time.time()
    for n in range(250):  # one a minute, the newest now
        fake.hooks.record("issues", payload(n), status_code=200, delivered_at=now - 60 * (249 - n))
    old = fake.hooks.record("issues", payload(999), status_code=502, delivered_at=now - 4 * DAY)
    app = make_app(fake)

    everything = await app.hook_deliveries(since=now - 3 * DAY)
    assert len(everything) == 250 and old.guid not in {d.guid for d in everything}
    assert [d.delivered_at for d in everything] == sorted(
        (d.delivered_at for d in everything), reverse=True
    )
    assert everything[0].status_code == 200 and everything[0].event == "issues"
    assert everything[0].installation_id == 42 and everything[0].action == "opened"
    pages = fake.calls_to("GET", "/app/hook/deliveries")
    assert [c.query.get("per_page") for c in pages] == ["100", "100", "100"]
    assert "cursor" not in pages[0].query and pages[1].query["cursor"].startswith("v1_")
    assert all(c.auth == "jwt" for c in pages)

    fake.calls.clear()
    recent = await app.hook_deliveries(since=now - 150 * 60 + 30)  # the last 150 minutes
    assert len(recent) == 150
    assert len(fake.calls_to("GET", "/app/hook/deliveries")) == 2  # stopped at the old one


async def test_redelivery_posts_the_same_event_again_with_its_guid(
    fake: FakeGitHub, receiver: Receiver
) -> None:
    lost = fake.hooks.record("issues", payload(1), status_code=502)
    app = make_app(fake)
    await app.redeliver(lost.id)
    (headers, body) = receiver.got[0]
    assert headers["x-github-delivery"] == lost.guid and body == lost.body
    assert headers["x-github-event"] == "issues"
    assert headers["x-hub-signature-256"].startswith("sha256=")
    listed = await app.hook_deliveries(since=time.time() - DAY)
    assert [(d.guid, d.redelivery, d.status_code) for d in listed] == [
        (lost.guid, True, 202),
        (lost.guid, False, 502),
    ]
    assert fake.calls_to("POST", f"/app/hook/deliveries/{lost.id}/attempts")[0].status == 202


async def test_an_unknown_delivery_is_github_s_404(fake: FakeGitHub, receiver: Receiver) -> None:
    with pytest.raises(NotFound):
        await make_app(fake).redeliver(123456)
    assert receiver.got == []


async def test_delivery_endpoints_need_the_app_jwt(fake: FakeGitHub) -> None:
    transport = httpx.ASGITransport(fake.app)
    wrong = GitHubApp(fake.app_id, new_private_key_pem(), api_url=API, transport=transport)
    with pytest.raises(AuthError):
        await wrong.hook_deliveries(since=0)
    token = await make_app(fake).installation_token(42)
    async with httpx.AsyncClient(transport=transport, base_url=API) as client:
        for method, path in [
            ("GET", "/app/hook/deliveries"),
            ("POST", "/app/hook/deliveries/1/attempts"),
        ]:
            for auth in ({"Authorization": f"token {token}"}, {}):
                answer = await client.request(method, path, headers=auth)
                assert answer.status_code == 401, (path, auth)
