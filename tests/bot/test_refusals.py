"""Refused delivery attempts: counted on /metrics, kept in the store (never a body or a
signature), on both backends; bounded under a flood of unsigned requests."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import anyio
import anyio.lowlevel
import httpx
import pytest
from starlette.applications import Starlette

from bot.intake.refusals import RefusalLog
from bot.intake.web import create_app
from bot.settings import Settings
from bot.store.contract import Storage
from bot.store.postgres.store import PostgresStore
from bot.store.refusals import REFUSALS_KEPT, Refusal
from bot.store.sqlite import Store
from tests.backends import BACKENDS, query
from tests.bot.test_web import OCTOKIT_SECRET, headers, sign

pytestmark = pytest.mark.anyio

GUID = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
BODY = b'{"action":"opened","secret-looking":"do-not-keep-me"}'

Serve = Callable[[], AbstractAsyncContextManager[tuple[httpx.AsyncClient, Storage, Starlette]]]


@pytest.fixture(params=BACKENDS)
def serve(request: pytest.FixtureRequest, data_dir: Path) -> Serve:
    dsn = request.getfixturevalue("postgres_dsn") if request.param == "postgres" else None

    @asynccontextmanager
    async def run() -> AsyncIterator[tuple[httpx.AsyncClient, Storage, Starlette]]:
        store: Storage = (
            Store.open(data_dir / "bot.sqlite3") if dsn is None else PostgresStore.open(dsn)
        )
        app = create_app(Settings(webhook_secret=OCTOKIT_SECRET), store)
        transport = httpx.ASGITransport(app=app, client=("203.0.113.7", 4711))
        try:
            async with (
                app.router.lifespan_context(app),
                httpx.AsyncClient(transport=transport, base_url="http://testserver") as client,
            ):
                yield client, store, app
        finally:
            store.close()

    return run


async def _raw_post(app: Starlette, guid: bytes) -> int:
    """An unsigned POST to the webhook route through the raw ASGI interface; its status."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/webhooks/github",
        "raw_path": b"/webhooks/github",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"x-github-event", b"issues"), (b"x-github-delivery", guid)],
        "client": ("198.51.100.9", 1),
        "server": ("testserver", 80),
    }
    statuses: list[int] = []

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: dict[str, object]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(int(message["status"]))  # type: ignore[call-overload]

    await app(scope, receive, send)  # type: ignore[arg-type]
    return statuses[0]


def _flush(app: Starlette) -> None:
    log = app.state.refusals
    assert isinstance(log, RefusalLog)
    log.flush()


async def test_each_refusal_is_kept_without_body_or_signature(serve: Serve) -> None:
    wrong = sign("not-the-secret", BODY)
    async with serve() as (client, store, app):
        sent = [
            (headers(guid=GUID), 401),  # unsigned
            (headers(guid="not-a-guid", signature=wrong), 401),  # wrong secret
            (headers(guid=GUID, event="made_up", signature=sign(OCTOKIT_SECRET, BODY)), 400),
            ({**headers(guid=GUID, signature=wrong), "X-GitHub-Event": "iss\tues"}, 400),
        ]
        for hdrs, status in sent:
            answer = await client.post("/webhooks/github", content=BODY, headers=hdrs)
            assert answer.status_code == status
        valid = await client.post(
            "/webhooks/github",
            content=BODY,
            headers=headers(guid="fine", signature=sign(OCTOKIT_SECRET, BODY)),
        )
        assert valid.status_code == 202
        _flush(app)
        kept = store.recent_refusals()
        assert [(r.status, r.reason, r.event, r.guid) for r in kept] == [
            (400, "bad_headers", "iss?ues", GUID),
            (400, "unknown_event", "made_up", GUID),
            (401, "bad_signature", "issues", None),  # not a GUID's shape: not kept
            (401, "unsigned", "issues", GUID),
        ]
        assert {r.source for r in kept} == {"203.0.113.7"}
        assert store.recent_refusals(status=400, limit=1)[0].reason == "bad_headers"
        every_cell = repr(query(store, "SELECT * FROM refusals"))
        assert "do-not-keep-me" not in every_cell and wrong[7:] not in every_cell
        page = (await client.get("/metrics")).text
        assert 'bot_deliveries_refused_total{reason="unsigned",status="401"}' in page
        assert 'bot_deliveries_refused_total{reason="bad_signature",status="401"}' in page


async def test_a_flood_of_unsigned_requests_stays_bounded_and_valid_ones_go_through(
    serve: Serve,
) -> None:
    flood = REFUSALS_KEPT + 2_000  # past what the table keeps
    async with serve() as (client, store, app):
        log = app.state.refusals
        assert isinstance(log, RefusalLog)
        accepted = 0
        most_pending = 0

        async def unsigned(n: int) -> None:
            # Straight to the ASGI app: twenty thousand requests through a client take long.
            nonlocal most_pending
            for i in range(n):
                assert await _raw_post(app, f"flood-{i}".encode()) == 401
                most_pending = max(most_pending, log.pending)

        async def valid() -> None:
            nonlocal accepted
            for i in range(20):
                answer = await client.post(
                    "/webhooks/github",
                    content=BODY,
                    headers=headers(guid=f"valid-{i}", signature=sign(OCTOKIT_SECRET, BODY)),
                )
                accepted += answer.status_code == 202
                await anyio.lowlevel.checkpoint()

        async with anyio.create_task_group() as tasks:
            for _ in range(8):
                tasks.start_soon(unsigned, flood // 8)
            tasks.start_soon(valid)
        _flush(app)
        assert accepted == 20
        assert most_pending <= REFUSALS_KEPT
        assert store.count_refusals() <= REFUSALS_KEPT
        assert log.written + log.given_way == flood
        # The newest are those kept.
        assert store.recent_refusals(limit=1)[0].reason == "unsigned"
        assert store.count_deliveries() == 20


def test_the_table_keeps_the_newest_ten_thousand(open_store: Callable[..., Storage]) -> None:
    store = open_store()
    rows = [Refusal(float(i), "::1", "issues", None, 401, "unsigned") for i in range(12_000)]
    store.record_refusals(rows[:7_000])
    store.record_refusals(rows[7_000:])
    assert store.count_refusals() <= REFUSALS_KEPT
    newest = store.recent_refusals(limit=REFUSALS_KEPT)
    assert newest[0].at == 11_999.0
    if isinstance(store, Store):  # ids without gaps: exactly the newest 10,000
        assert len(newest) == REFUSALS_KEPT and newest[-1].at == 2_000.0


def test_the_log_in_memory_keeps_the_newest_and_counts_what_gave_way() -> None:
    written: list[list[Refusal]] = []
    log = RefusalLog(written.append, capacity=3)
    for i in range(5):
        log.note(Refusal(float(i), "", "issues", None, 401, "unsigned"))
    assert (log.pending, log.given_way) == (3, 2)
    log.flush()
    assert [r.at for r in written[0]] == [2.0, 3.0, 4.0]
    assert log.pending == 0


def test_a_flush_returns_only_once_a_batch_being_written_is_written() -> None:
    started, release = threading.Event(), threading.Event()

    def slow(rows: list[Refusal]) -> None:
        started.set()
        release.wait(5)

    log = RefusalLog(slow, capacity=10)
    log.note(Refusal(0.0, "", "issues", None, 401, "unsigned"))
    writer = threading.Thread(target=log.flush)
    writer.start()
    assert started.wait(5)  # the thread took the batch and is writing it
    second = threading.Thread(target=log.flush)
    second.start()
    second.join(0.2)
    assert second.is_alive()  # waits for the batch in flight, not past it on an empty deque
    release.set()
    second.join(5)
    writer.join(5)
    assert log.written == 1
