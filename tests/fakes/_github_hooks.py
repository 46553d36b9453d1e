"""The fake GitHub's webhook deliveries: what it sent the app, and redelivering one.

GitHub keeps every attempt to deliver an event to the App's webhook URL; the App lists them
with `GET /app/hook/deliveries` (App JWT, newest first, `per_page` up to 100, the next page's
`cursor` in the `Link` header) and asks for one again with
`POST /app/hook/deliveries/{id}/attempts` (202; 404 for an id it does not have). A
redelivery is a new attempt of the same event: the same GUID and body, `redelivery: true`.

    fake.webhook_url = f"{bot_url}/webhooks/github"
    sent = fake.hooks.send("issues", payload)              # POSTs it, keeps the answer's status
    lost = fake.hooks.record("issues", payload, status_code=502)  # an attempt that failed

`send` signs the body with the App's webhook secret as GitHub does (`X-Hub-Signature-256`)
and records the status the app answered (502 when it could not be reached). The fake
redelivers before it answers 202, so a test sees the new attempt at once.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
from starlette.responses import Response

from tests.fakes._github_ctx import Ctx, Handler, ok
from tests.fakes._github_state import FakeError, iso

if TYPE_CHECKING:
    from tests.fakes.github import FakeGitHub

HOOK_ID = 109948940
"""The App's webhook id, as GitHub sends it in `X-GitHub-Hook-ID`."""


@dataclass
class Attempt:
    """One try at delivering an event: the listing's fields plus the body that was sent."""

    id: int
    guid: str
    event: str
    action: str | None
    body: bytes
    delivered_at: float
    status_code: int
    redelivery: bool = False
    installation_id: int | None = None
    repository_id: int | None = None
    answer: str = ""

    def item(self) -> dict[str, Any]:
        """The attempt as `GET /app/hook/deliveries` lists it."""
        return {
            "id": self.id,
            "guid": self.guid,
            "delivered_at": iso(self.delivered_at),
            "redelivery": self.redelivery,
            "duration": 0.05,
            "status": _status_text(self.status_code),
            "status_code": self.status_code,
            "event": self.event,
            "action": self.action,
            "installation_id": self.installation_id,
            "repository_id": self.repository_id,
            "throttled_at": None,
        }


def _status_text(code: int) -> str:
    if 200 <= code < 300:
        return "OK"
    return "failed to connect" if code == 502 else f"Invalid HTTP Response: {code}"


@dataclass
class HookLog:
    """Every attempt the fake made to deliver to `fake.webhook_url`, oldest first."""

    fake: FakeGitHub
    attempts: list[Attempt] = field(default_factory=list)
    clock: Callable[[], float] = time.time
    """When an attempt is made (a test moves it to drive passes hours apart)."""

    def _new(
        self,
        event: str,
        body: bytes,
        *,
        guid: str | None,
        status_code: int,
        delivered_at: float | None,
        redelivery: bool = False,
    ) -> Attempt:
        data = json.loads(body) if body else {}
        installation = data.get("installation") if isinstance(data, dict) else None
        repository = data.get("repository") if isinstance(data, dict) else None
        attempt = Attempt(
            id=self.fake._id(),
            guid=guid or str(uuid.uuid4()),
            event=event,
            action=data.get("action") if isinstance(data, dict) else None,
            body=body,
            delivered_at=self.clock() if delivered_at is None else delivered_at,
            status_code=status_code,
            redelivery=redelivery,
            installation_id=installation.get("id") if isinstance(installation, dict) else None,
            repository_id=repository.get("id") if isinstance(repository, dict) else None,
        )
        self.attempts.append(attempt)
        return attempt

    def record(
        self,
        event: str,
        payload: dict[str, Any],
        *,
        status_code: int,
        guid: str | None = None,
        delivered_at: float | None = None,
    ) -> Attempt:
        """An attempt that GitHub made and that got `status_code`, without sending anything
        (a delivery lost while the app was down: 502)."""
        body = json.dumps(payload).encode()
        return self._new(event, body, guid=guid, status_code=status_code, delivered_at=delivered_at)

    def headers(self, attempt: Attempt) -> dict[str, str]:
        """The headers GitHub sends with a delivery, signed with the App's webhook secret."""
        digest = hmac.new(self.fake.webhook_secret.encode(), attempt.body, hashlib.sha256)
        return {
            "User-Agent": "GitHub-Hookshot/fake",
            "Content-Type": "application/json",
            "X-GitHub-Event": attempt.event,
            "X-GitHub-Delivery": attempt.guid,
            "X-GitHub-Hook-ID": str(HOOK_ID),
            "X-GitHub-Hook-Installation-Target-Type": "integration",
            "X-GitHub-Hook-Installation-Target-ID": str(self.fake.app_id),
            "X-Hub-Signature-256": "sha256=" + digest.hexdigest(),
        }

    def _url(self) -> str:
        if not self.fake.webhook_url:
            raise FakeError(422, "The App has no webhook URL")
        return self.fake.webhook_url

    def send(self, event: str, payload: dict[str, Any], *, guid: str | None = None) -> Attempt:
        """POST the event to the webhook URL now and keep the attempt with its answer."""
        url = self._url()
        attempt = self._new(
            event, json.dumps(payload).encode(), guid=guid, status_code=0, delivered_at=None
        )
        try:
            answer = httpx.post(url, content=attempt.body, headers=self.headers(attempt))
        except httpx.HTTPError:
            attempt.status_code = 502
        else:
            attempt.status_code, attempt.answer = answer.status_code, answer.text
        return attempt

    async def resend(self, original: Attempt) -> Attempt:
        """Deliver `original` again: a new attempt with its GUID and body."""
        url = self._url()
        attempt = self._new(
            original.event,
            original.body,
            guid=original.guid,
            status_code=0,
            delivered_at=None,
            redelivery=True,
        )
        try:
            async with httpx.AsyncClient() as client:
                answer = await client.post(url, content=attempt.body, headers=self.headers(attempt))
        except httpx.HTTPError:
            attempt.status_code = 502
        else:
            attempt.status_code, attempt.answer = answer.status_code, answer.text
        return attempt

    def by_guid(self, guid: str) -> list[Attempt]:
        return [a for a in self.attempts if a.guid == guid]


def _per_page(ctx: Ctx) -> int:
    raw = ctx.request.query_params.get("per_page", "30")
    try:
        value = int(raw)
    except ValueError:
        raise FakeError(422, f"per_page '{raw}' is not a number") from None
    return max(1, min(value, 100))


def hook_routes(fake: FakeGitHub) -> list[tuple[str, str, str, Handler]]:
    """The App's webhook delivery endpoints, all behind the App JWT."""

    def attempt_of(ctx: Ctx) -> Attempt:
        wanted = ctx.number("delivery_id")
        for attempt in fake.hooks.attempts:
            if attempt.id == wanted:
                return attempt
        raise FakeError(404, "Not Found")

    async def list_deliveries(ctx: Ctx) -> Response:
        newest_first = sorted(fake.hooks.attempts, key=lambda a: (a.delivered_at, a.id))[::-1]
        cursor = ctx.request.query_params.get("cursor")
        if cursor:
            ids = [f"v1_{a.id}" for a in newest_first]
            if cursor not in ids:
                raise FakeError(422, "Validation Failed: cursor is invalid")
            newest_first = newest_first[ids.index(cursor) + 1 :]
        per_page = _per_page(ctx)
        page = newest_first[:per_page]
        headers = {}
        if len(newest_first) > per_page:
            nxt = ctx.request.url.remove_query_params("cursor").include_query_params(
                per_page=per_page, cursor=f"v1_{page[-1].id}"
            )
            headers["link"] = f'<{nxt}>; rel="next"'
        response = ok([a.item() for a in page])
        response.headers.update(headers)
        return response

    async def get_delivery(ctx: Ctx) -> Response:
        attempt = attempt_of(ctx)
        return ok(
            {
                **attempt.item(),
                "url": fake.webhook_url or "",
                "request": {
                    "headers": fake.hooks.headers(attempt),
                    "payload": json.loads(attempt.body),
                },
                "response": {"headers": {}, "payload": attempt.answer},
            }
        )

    async def redeliver(ctx: Ctx) -> Response:
        await fake.hooks.resend(attempt_of(ctx))
        return ok({}, 202)

    return [
        ("GET", "/app/hook/deliveries", "jwt", list_deliveries),
        ("GET", "/app/hook/deliveries/{delivery_id:int}", "jwt", get_delivery),
        ("POST", "/app/hook/deliveries/{delivery_id:int}/attempts", "jwt", redeliver),
    ]
