"""Running a stored delivery again, on both backends: through the queue (`bot retry`, the
operator page) and through the webhook route, when GitHub sends a GUID it sent before."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import httpx
import pytest

from bot.intake.web import create_app
from bot.settings import Settings
from bot.store.backend import job_queue
from bot.store.contract import Storage
from bot.store.postgres.store import PostgresStore
from bot.store.queue.base import JobStatus
from bot.store.sqlite import Store
from tests.backends import BACKENDS, end_job, insert_delivery, query, take_job
from tests.bot.test_web import OCTOKIT_SECRET, headers, sign

BODY = b'{"action":"opened"}'


def _fail_job(store: Storage, guid: str, how: str = "dead") -> None:
    """Take the delivery's waiting job and end it `how` (done or dead)."""
    job = take_job(store)
    assert job.delivery_id == guid
    end_job(store, job, how)


def _statuses(store: Storage, guid: str) -> list[tuple[str, JobStatus]]:
    return [(job.kind, job.status) for job in job_queue(store).jobs_for_delivery(guid)]


def _stored(store: Storage, guid: str) -> None:
    insert_delivery(store, guid)
    assert job_queue(store).enqueue_sync(guid) is not None


def test_a_dead_job_is_retried_once_with_a_new_job_and_recorded(
    open_store: Callable[..., Storage],
) -> None:
    store = open_store(clock=lambda: 100.0)
    _stored(store, "g1")
    _fail_job(store, "g1")
    queue = job_queue(store)
    [done] = queue.retry_sync(["g1"], source="cli")
    assert (done.verdict.retry, done.kind) == (True, "retry-1")
    assert done.verdict.reason == "its delivery job is dead"
    assert _statuses(store, "g1") == [("delivery", JobStatus.DEAD), ("retry-1", JobStatus.QUEUED)]
    # Queued now: asked again, it is refused, and nothing more is added.
    [again] = queue.retry_sync(["g1"], source="ui")
    assert not again.verdict.retry and again.verdict.reason == "its retry-1 job is queued"
    assert len(_statuses(store, "g1")) == 2
    assert query(store, "SELECT delivery_id, kind, source, at FROM retries") == [
        ("g1", "retry-1", "cli", 100.0)
    ]


def test_a_failed_run_is_set_back_to_queued_and_a_finished_one_is_not_retried(
    open_store: Callable[..., Storage],
) -> None:
    store = open_store()
    for guid in ("failed", "fine"):
        _stored(store, guid)
        _fail_job(store, guid, "done")
    failed = store.create_run(
        delivery_id="failed",
        repo="o/r",
        target_kind="issue",
        number=1,
        workflow="triage",
        mode="webhook",
    )
    store.update_run(failed.id, status="failed", outcome={"status": "failed"})
    store.request_stop(failed.id, "stopped by octocat")
    fine = store.create_run(
        delivery_id="fine",
        repo="o/r",
        target_kind="issue",
        number=2,
        workflow="triage",
        mode="webhook",
    )
    store.update_run(fine.id, status="succeeded")
    queue = job_queue(store)
    results = {r.guid: r for r in queue.retry_sync(["failed", "fine"], source="cli")}
    assert results["failed"].verdict.retry and results["failed"].runs == (failed.id,)
    again = store.get_run(failed.id)
    assert again is not None and (again.status, again.outcome) == ("queued", None)
    assert store.stop_requested(failed.id) is None
    assert not results["fine"].verdict.retry
    assert results["fine"].verdict.reason == f"nothing failed (job done, run {fine.id} succeeded)"
    assert _statuses(store, "fine") == [("delivery", JobStatus.DONE)]


def test_a_run_that_is_running_is_not_retried(open_store: Callable[..., Storage]) -> None:
    store = open_store()
    _stored(store, "g")
    _fail_job(store, "g", "done")
    run = store.create_run(
        delivery_id="g", repo="o/r", target_kind="issue", number=1, workflow="ask", mode="webhook"
    )
    store.update_run(run.id, status="running")
    [result] = job_queue(store).retry_sync(["g"], source="ui")
    assert not result.verdict.retry and result.verdict.reason == f"run {run.id} is running"
    assert _statuses(store, "g") == [("delivery", JobStatus.DONE)]


def test_a_dry_run_adds_nothing(open_store: Callable[..., Storage]) -> None:
    store = open_store()
    _stored(store, "g")
    _fail_job(store, "g")
    [result] = job_queue(store).retry_sync(["g"], source="cli", dry_run=True)
    assert result.verdict.retry and result.kind is None
    assert _statuses(store, "g") == [("delivery", JobStatus.DEAD)]
    assert query(store, "SELECT count(*) FROM retries") == [(0,)]


# -- GitHub sends a GUID again -------------------------------------------------------------

Serve = Callable[[], AbstractAsyncContextManager[tuple[httpx.AsyncClient, Storage]]]


@pytest.fixture(params=BACKENDS)
def serve(request: pytest.FixtureRequest, data_dir: Path) -> Serve:
    dsn = request.getfixturevalue("postgres_dsn") if request.param == "postgres" else None

    @asynccontextmanager
    async def run() -> AsyncIterator[tuple[httpx.AsyncClient, Storage]]:
        store: Storage = (
            Store.open(data_dir / "bot.sqlite3") if dsn is None else PostgresStore.open(dsn)
        )
        app = create_app(Settings(webhook_secret=OCTOKIT_SECRET), store)
        transport = httpx.ASGITransport(app=app)
        try:
            async with (
                app.router.lifespan_context(app),
                httpx.AsyncClient(transport=transport, base_url="http://testserver") as client,
            ):
                yield client, store
        finally:
            store.close()

    return run


async def _send(client: httpx.AsyncClient, guid: str) -> httpx.Response:
    return await client.post(
        "/webhooks/github",
        content=BODY,
        headers=headers(guid=guid, signature=sign(OCTOKIT_SECRET, BODY)),
    )


@pytest.mark.anyio
async def test_github_redelivering_a_dead_guid_runs_it_again(serve: Serve) -> None:
    async with serve() as (client, store):
        assert (await _send(client, "dead-guid")).status_code == 202
        _fail_job(store, "dead-guid")
        again = await _send(client, "dead-guid")
        assert (again.status_code, again.json()) == (202, {"status": "accepted"})
        assert _statuses(store, "dead-guid") == [
            ("delivery", JobStatus.DEAD),
            ("retry-1", JobStatus.QUEUED),
        ]
        assert query(store, "SELECT source FROM retries") == [("redelivery",)]
        # While that retry waits, the same GUID again is a duplicate.
        third = await _send(client, "dead-guid")
        assert (third.status_code, third.json()) == (200, {"status": "duplicate"})
        assert len(_statuses(store, "dead-guid")) == 2


@pytest.mark.anyio
async def test_github_redelivering_a_guid_whose_job_is_done_is_a_duplicate(serve: Serve) -> None:
    async with serve() as (client, store):
        assert (await _send(client, "done-guid")).status_code == 202
        _fail_job(store, "done-guid", "done")
        again = await _send(client, "done-guid")
        assert (again.status_code, again.json()) == (200, {"status": "duplicate"})
        assert _statuses(store, "done-guid") == [("delivery", JobStatus.DONE)]
