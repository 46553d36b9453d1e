"""The webhook route, in process: signatures, size cap, headers, dedupe, health and logs."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import anyio
import httpx
import pytest
from starlette.applications import Starlette

from bot.intake.delivery_writer import DeliveryWriter
from bot.intake.web import MAX_BODY, WebhookReceiver, create_app, signature_matches
from bot.runs.runner import job_runner
from bot.runs.worker import Worker, WorkerHooks
from bot.settings import Settings
from bot.store.backend import job_queue
from bot.store.contract import Storage
from bot.store.postgres.store import PostgresStore
from bot.store.queue.base import JobStatus
from bot.store.sqlite import Store
from tests.backends import BACKENDS, execute

pytestmark = pytest.mark.anyio

GITHUB_SECRET = "It's a Secret to Everybody"
GITHUB_BODY = b"Hello, World!"
GITHUB_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
OCTOKIT_SECRET = "mysecret"
OCTOKIT_BODY = b'{"foo":"bar"}'
OCTOKIT_SIGNATURE = "sha256=4864d2759938a15468b5df9ade20bf161da9b4f737ea61794142f3484236bda3"


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def headers(
    guid: str = "guid-1", event: str = "issues", signature: str | None = None
) -> dict[str, str]:
    out = {"X-GitHub-Event": event, "X-GitHub-Delivery": guid, "Content-Type": "application/json"}
    if signature is not None:
        out["X-Hub-Signature-256"] = signature
    return out


class Harness:
    def __init__(self, app: Starlette, store: Storage, client: httpx.AsyncClient) -> None:
        self.app = app
        self.store = store
        self.client = client
        self.queue = job_queue(store)

    async def post(
        self, body: bytes, secret: str | None = OCTOKIT_SECRET, **kw: str
    ) -> httpx.Response:
        signature = None if secret is None else sign(secret, body)
        return await self.client.post(
            "/webhooks/github", content=body, headers=headers(signature=signature, **kw)
        )

    def jobs(self) -> int:
        return sum(self.queue.counts_sync().values())


Serve = Callable[..., AbstractAsyncContextManager[Harness]]


@pytest.fixture(params=BACKENDS)
def serve(request: pytest.FixtureRequest, data_dir: Path) -> Serve:
    """The app on either backend: the route answers the same on both."""
    dsn = request.getfixturevalue("postgres_dsn") if request.param == "postgres" else None

    @asynccontextmanager
    async def run(
        secret: str | None = OCTOKIT_SECRET, *, insecure: bool = False, max_body: int = MAX_BODY
    ) -> AsyncIterator[Harness]:
        settings = Settings(webhook_secret=secret, insecure_no_signature=insecure)
        store: Storage = (
            Store.open(data_dir / "bot.sqlite3") if dsn is None else PostgresStore.open(dsn)
        )
        app = create_app(settings, store, max_body=max_body)
        transport = httpx.ASGITransport(app=app)
        try:
            async with (
                app.router.lifespan_context(app),
                httpx.AsyncClient(transport=transport, base_url="http://testserver") as client,
            ):
                yield Harness(app, store, client)
        finally:
            store.close()

    return run


def test_documented_signature_vectors_verify() -> None:
    assert signature_matches(GITHUB_BODY, GITHUB_SIGNATURE.encode(), [GITHUB_SECRET.encode()])
    assert signature_matches(OCTOKIT_BODY, OCTOKIT_SIGNATURE.encode(), [OCTOKIT_SECRET.encode()])
    assert not signature_matches(OCTOKIT_BODY, GITHUB_SIGNATURE.encode(), [b"mysecret"])
    assert sign(OCTOKIT_SECRET, OCTOKIT_BODY) == OCTOKIT_SIGNATURE


async def test_octokit_vector_is_accepted_and_stored(serve: Serve) -> None:
    async with serve(OCTOKIT_SECRET) as h:
        response = await h.client.post(
            "/webhooks/github",
            content=OCTOKIT_BODY,
            headers=headers(signature=OCTOKIT_SIGNATURE, event="ping"),
        )
        assert (response.status_code, response.json()) == (202, {"status": "accepted"})
        row = h.store.get_delivery("guid-1")
        assert row is not None and row.body == OCTOKIT_BODY and row.event == "ping"
        assert "x-hub-signature-256" not in row.headers
        assert h.jobs() == 1


async def test_github_vector_verifies_but_is_not_json(serve: Serve) -> None:
    async with serve(GITHUB_SECRET) as h:
        response = await h.client.post(
            "/webhooks/github", content=GITHUB_BODY, headers=headers(signature=GITHUB_SIGNATURE)
        )
        assert response.status_code == 400
        assert "JSON object" in response.json()["error"]
        assert h.store.count_deliveries() == 0


@pytest.mark.parametrize(
    "signature",
    [
        pytest.param(
            OCTOKIT_SIGNATURE[:-1] + ("4" if OCTOKIT_SIGNATURE[-1] != "4" else "5"), id="flipped"
        ),
        pytest.param(sign("wrong secret", OCTOKIT_BODY), id="wrong-secret"),
        pytest.param(
            "sha1=" + hmac.new(b"mysecret", OCTOKIT_BODY, hashlib.sha1).hexdigest(), id="sha1-only"
        ),
        pytest.param("", id="empty"),
        pytest.param(None, id="missing"),
    ],
)
async def test_bad_signatures_are_refused_and_nothing_stored(
    serve: Serve, signature: str | None
) -> None:
    async with serve(OCTOKIT_SECRET) as h:
        response = await h.client.post(
            "/webhooks/github", content=OCTOKIT_BODY, headers=headers(signature=signature)
        )
        assert response.status_code == 401
        assert h.store.count_deliveries() == 0
        assert h.jobs() == 0


async def test_a_flipped_body_byte_is_refused(serve: Serve) -> None:
    async with serve(OCTOKIT_SECRET) as h:
        response = await h.client.post(
            "/webhooks/github",
            content=b'{"foo":"bas"}',
            headers=headers(signature=OCTOKIT_SIGNATURE),
        )
        assert response.status_code == 401
        assert h.store.count_deliveries() == 0


async def test_mismatch_log_points_at_the_secret_setting(
    serve: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    async with serve(OCTOKIT_SECRET) as h:
        with caplog.at_level(logging.INFO, logger="bot.intake.web"):
            await h.post(OCTOKIT_BODY, secret="not it", guid="g-bad")
    (record,) = [r for r in caplog.records if r.name == "bot.intake.web"]
    assert "BOT_WEBHOOK_SECRET" in record.getMessage()
    assert (record.delivery_id, record.outcome) == ("g-bad", "bad_signature")  # type: ignore[attr-defined]
    assert "sha256=" not in record.getMessage() and "foo" not in record.getMessage()


async def test_either_of_two_secrets_is_accepted(serve: Serve) -> None:
    async with serve("old-secret, new-secret") as h:
        assert (await h.post(b"{}", secret="old-secret", guid="a")).status_code == 202
        assert (await h.post(b"{}", secret="new-secret", guid="b")).status_code == 202
        assert (await h.post(b"{}", secret="other", guid="c")).status_code == 401
        assert h.store.count_deliveries() == 2


@pytest.mark.parametrize("missing", ["X-GitHub-Event", "X-GitHub-Delivery"])
async def test_missing_github_headers_are_a_bad_request(serve: Serve, missing: str) -> None:
    async with serve() as h:
        sent = headers(signature=sign(OCTOKIT_SECRET, b"{}"))
        del sent[missing]
        response = await h.client.post("/webhooks/github", content=b"{}", headers=sent)
        assert response.status_code == 400
        assert h.store.count_deliveries() == 0


async def test_a_delivery_id_far_longer_than_a_guid_is_a_bad_request(serve: Serve) -> None:
    async with serve() as h:
        response = await h.post(b"{}", guid="0f2c6a9e-1d4b-11ef-8c3a-2f1e4c5b6a7d" * 100)
        assert response.status_code == 400
        assert "X-GitHub-Delivery" in response.json()["error"]
        assert h.store.count_deliveries() == 0 and h.jobs() == 0


async def test_an_event_name_github_never_sends_is_refused_and_nothing_stored(
    serve: Serve,
) -> None:
    async with serve() as h:
        body = b'{"action":"opened"}'
        for name in ("issues_v2", "Issues", "deploy-approved", "x"):
            response = await h.post(body, event=name, guid=f"g-{name}")
            assert response.status_code == 400
            assert "X-GitHub-Event" in response.json()["error"]
        assert h.store.count_deliveries() == 0 and h.jobs() == 0
        assert (await h.post(body, event="pull_request_review_thread")).status_code == 202


async def test_a_nul_in_a_signed_action_is_stored_escaped_and_decided_on_both_backends(
    serve: Serve,
) -> None:
    async with serve() as h:
        unsupported = json.dumps({"action": "op\u0000ened", "repository": {"full_name": "o/r"}})
        assert (await h.post(unsupported.encode(), guid="g-action")).status_code == 202
        issue = {"number": 7, "id": 70, "title": "t\u0000", "user": {"login": "alice"}}
        opened = {
            "action": "opened",
            "repository": {"id": 1, "full_name": "o/r\u0000x"},
            "issue": issue,
            "sender": {"login": "alice", "type": "User"},
        }
        body = json.dumps(opened).encode()
        assert (await h.post(body, guid="g-repo")).status_code == 202
        row = h.store.get_delivery("g-action")
        assert row is not None and row.action == "op\ufffdened"
        assert row.body == unsupported.encode()  # the body is kept as it came
        runner = job_runner(h.store)
        worker = Worker(h.store, h.queue, WorkerHooks(), app_slug="repo-agent", runner=runner)
        assert await worker.run_until_idle() == 2
        decided = h.store.get_delivery("g-action")
        assert decided is not None and decided.decision == "skip"
        assert decided.reason == "unsupported_action: issues.op\ufffdened"
        (run,) = h.store.runs_for_delivery("g-repo")
        assert (run.workflow, run.repo) == ("triage", "o/r\ufffdx")
        assert h.queue.counts_sync()[JobStatus.DONE] == 2


@pytest.mark.parametrize(
    "body",
    [b"[1, 2]", b'"text"', b"{not json", b"\xff\xfe{", b"", b'{"a":' * 2000 + b"1" + b"}" * 2000],
)
async def test_signed_bodies_that_are_not_json_objects_are_a_bad_request(
    serve: Serve, body: bytes
) -> None:
    async with serve() as h:
        assert (await h.post(body)).status_code == 400
        assert h.store.count_deliveries() == 0


async def test_without_a_secret_deliveries_are_refused_with_advice(serve: Serve) -> None:
    async with serve(None) as h:
        response = await h.post(b"{}", secret=None)
        assert response.status_code == 503
        assert "BOT_WEBHOOK_SECRET" in response.json()["error"]
        assert h.store.count_deliveries() == 0


async def test_insecure_mode_accepts_unsigned_deliveries(serve: Serve) -> None:
    async with serve(None, insecure=True) as h:
        assert (await h.post(b'{"action": "opened"}', secret=None)).status_code == 202
        row = h.store.get_delivery("guid-1")
        assert row is not None and row.action == "opened"


async def test_a_repeated_guid_is_a_duplicate_and_enqueued_once(serve: Serve) -> None:
    async with serve() as h:
        first = await h.post(b'{"action":"opened"}')
        second = await h.post(b'{"action":"opened"}')
        assert (first.status_code, first.json()) == (202, {"status": "accepted"})
        assert (second.status_code, second.json()) == (200, {"status": "duplicate"})
        assert h.jobs() == 1


async def test_concurrent_duplicates_give_one_202_and_one_job(serve: Serve) -> None:
    async with serve() as h:
        statuses: list[int] = []

        async def post() -> None:
            statuses.append((await h.post(b'{"action":"opened"}', guid="same")).status_code)

        async with anyio.create_task_group() as tasks:
            for _ in range(20):
                tasks.start_soon(post)
        assert sorted(statuses) == [200] * 19 + [202]
        assert h.jobs() == 1
        assert h.store.count_deliveries() == 1


async def test_body_over_the_cap_is_413_and_not_stored(serve: Serve) -> None:
    async with serve(max_body=1024) as h:
        fits = b'{"pad": "' + b"x" * (1024 - 11) + b'"}'
        assert len(fits) == 1024
        assert (await h.post(fits, guid="fits")).status_code == 202
        over = b'{"pad": "' + b"x" * 2000 + b'"}'
        assert (await h.post(over, guid="over")).status_code == 413
        assert [d.guid for d in h.store.list_deliveries()] == ["fits"]


def _scope(extra: list[tuple[bytes, bytes]]) -> dict[str, object]:
    # A well-formed (if wrong) signature: without one the request is refused before the size.
    signature = (b"x-hub-signature-256", b"sha256=" + b"0" * 64)
    return {
        "type": "http",
        "method": "POST",
        "path": "/webhooks/github",
        "headers": [
            (b"x-github-event", b"issues"),
            (b"x-github-delivery", b"g"),
            signature,
            *extra,
        ],
    }


async def _call(
    receiver: WebhookReceiver, scope: dict[str, object], chunks: list[bytes]
) -> tuple[int, int]:
    """Run the raw ASGI handler; returns (status, how many body chunks it read)."""
    reads = 0
    sent: list[dict[str, object]] = []

    async def receive() -> dict[str, object]:
        nonlocal reads
        reads += 1
        chunk = chunks[reads - 1]
        return {"type": "http.request", "body": chunk, "more_body": reads < len(chunks)}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    await receiver(scope, receive, send)  # type: ignore[arg-type]
    return int(sent[0]["status"]), reads  # type: ignore[call-overload]


async def test_content_length_over_25_mb_is_refused_before_reading(data_dir: Path) -> None:
    receiver = WebhookReceiver(
        secrets=[b"s"], insecure_no_signature=False, writer=DeliveryWriter(data_dir / "x.db")
    )
    too_big = str(MAX_BODY + 1).encode()
    status, reads = await _call(receiver, _scope([(b"content-length", too_big)]), [b"{}"])
    assert (status, reads) == (413, 0)


async def test_streamed_body_is_cut_off_once_it_passes_the_cap(data_dir: Path) -> None:
    receiver = WebhookReceiver(
        secrets=[b"s"],
        insecure_no_signature=False,
        writer=DeliveryWriter(data_dir / "x.db"),
        max_body=1000,
    )
    chunks = [b"x" * 400] * 10  # no Content-Length: chunked upload
    status, reads = await _call(receiver, _scope([]), chunks)
    assert (status, reads) == (413, 3)


async def test_ping_is_acknowledged_and_stored(serve: Serve) -> None:
    async with serve() as h:
        body = json.dumps({"zen": "Keep it logically awesome.", "hook_id": 1}).encode()
        assert (await h.post(body, event="ping")).status_code == 202
        row = h.store.get_delivery("guid-1")
        assert row is not None and row.event == "ping"
        assert h.jobs() == 1


async def test_get_on_the_webhook_path_is_not_allowed(serve: Serve) -> None:
    async with serve() as h:
        assert (await h.client.get("/webhooks/github")).status_code == 405


async def test_health_and_readiness(serve: Serve) -> None:
    async with serve() as h:
        assert (await h.client.get("/healthz")).status_code == 200
        ready = await h.client.get("/readyz")
        assert (ready.status_code, ready.json()) == (200, {"status": "ready"})
        execute(h.store, "DROP TABLE deliveries")
        assert (await h.client.get("/readyz")).status_code == 503
        assert (await h.client.get("/healthz")).status_code == 200


async def test_one_log_line_per_delivery_without_body_or_signature(
    serve: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    async with serve() as h:
        with caplog.at_level(logging.INFO, logger="bot.intake.web"):
            await h.post(b'{"secret_field": "payload text"}', guid="g-1")
            await h.post(b'{"secret_field": "payload text"}', guid="g-1")
    lines = [r for r in caplog.records if r.name == "bot.intake.web"]
    assert [(r.delivery_id, r.event, r.outcome) for r in lines] == [  # type: ignore[attr-defined]
        ("g-1", "issues", "accepted"),
        ("g-1", "issues", "duplicate"),
    ]
    for record in lines:
        text = json.dumps(vars(record), default=str)
        assert "payload text" not in text and "sha256=" not in text
