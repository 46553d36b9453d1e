"""The job queue contracts: `JobQueue` on every backend (SQLite, and Postgres on
procrastinate), `LeasedQueue` (the claim loop's) on SQLite; and how the Postgres jobs sit on
procrastinate's worker (bot/store/queue/procrastinate_app.py)."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread
import procrastinate.jobs
import pytest
from procrastinate.exceptions import JobAborted

from bot.store.postgres.store import PostgresStore
from bot.store.queue.base import Deferred, Job, JobQueue, JobStatus, LeaseLost, backoff_seconds
from bot.store.queue.postgres import PostgresJobQueue
from bot.store.queue.procrastinate_app import (
    AttemptFailed,
    ClaimLost,
    DeliveryRetry,
    GaveUp,
    holds,
    recover_stalled,
)
from bot.store.queue.sqlite import SqliteJobQueue
from bot.store.sqlite import Store


class FakeClock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Backend:
    queue: SqliteJobQueue
    clock: FakeClock


@pytest.fixture
def backend(data_dir: Path) -> Iterator[Backend]:
    """The LeasedQueue: SQLite's, whose jobs the pool's own loop claims."""
    clock = FakeClock()
    store = Store.open(data_dir / "bot.sqlite3", clock=clock)
    yield Backend(SqliteJobQueue(store), clock)
    store.close()


@dataclass
class AnyBackend:
    """A JobQueue, and how a worker of its backend takes a job and ends it."""

    queue: JobQueue
    take: Callable[[], Awaitable[Job | None]]
    end: Callable[[Job, bool], Awaitable[None]]
    """Ends a taken job: done (True) or dead (False)."""


@pytest.fixture(params=["sqlite", "postgres"])
def any_backend(request: pytest.FixtureRequest, data_dir: Path) -> Iterator[AnyBackend]:
    if request.param == "sqlite":
        store = Store.open(data_dir / "bot.sqlite3")
        q = SqliteJobQueue(store)

        async def end(job: Job, done: bool) -> None:
            if done:
                await q.complete(job.id, "w")
            else:
                await q.fail(job.id, "w", "bad payload", retry=False)

        yield AnyBackend(q, lambda: q.claim("w", 30), end)
        store.close()
        return
    pg = PostgresStore.open(request.getfixturevalue("postgres_dsn"))
    pq = PostgresJobQueue(pg)
    worker = register_worker(pg)

    async def take() -> Job | None:
        job_id = await anyio.to_thread.run_sync(fetch, pg, worker)
        return None if job_id is None else await pq.get(job_id)

    async def pg_end(job: Job, done: bool) -> None:
        await anyio.to_thread.run_sync(finish, pg, job.id, "succeeded" if done else "failed")

    yield AnyBackend(pq, take, pg_end)
    pg.close()


# procrastinate's own procedures, as its worker calls them.


def register_worker(store: PostgresStore, heartbeat_age: float = 0.0) -> int:
    with store.pool.connection() as conn:
        row = conn.execute(
            "INSERT INTO procrastinate_workers (last_heartbeat)"
            " VALUES (now() - make_interval(secs => %s)) RETURNING id",
            (heartbeat_age,),
        ).fetchone()
    assert row is not None
    return int(row[0])


def fetch(store: PostgresStore, worker_id: int) -> int | None:
    with store.pool.connection() as conn:
        row = conn.execute(
            "SELECT id FROM procrastinate_fetch_job_v2(ARRAY['bot']::varchar[], %s)", (worker_id,)
        ).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def finish(store: PostgresStore, job_id: int, status: str) -> None:
    with store.pool.connection() as conn:
        conn.execute("SELECT procrastinate_finish_job_v1(%s, %s, false)", (job_id, status))


pytestmark = pytest.mark.anyio


async def test_enqueued_job_is_claimed_once(backend: Backend) -> None:
    q = backend.queue
    job_id = await q.enqueue("d-1")
    assert job_id is not None
    job = await q.claim("w1", 30)
    assert job is not None
    assert (job.id, job.delivery_id, job.status, job.attempts) == (
        job_id,
        "d-1",
        JobStatus.RUNNING,
        1,
    )
    assert job.lease_owner == "w1"
    assert job.lease_until == backend.clock.now + 30
    assert await q.claim("w2", 30) is None


async def test_enqueue_is_idempotent_per_delivery(any_backend: AnyBackend) -> None:
    q = any_backend.queue
    assert await q.enqueue("d-1") is not None
    assert await q.enqueue("d-1") is None
    counts = await q.counts()
    assert counts[JobStatus.QUEUED] == 1


async def test_concurrent_enqueues_of_one_delivery_make_one_job(any_backend: AnyBackend) -> None:
    q = any_backend.queue
    made: list[int | None] = []

    async def enqueue() -> None:
        made.append(await q.enqueue("d-1"))

    async with anyio.create_task_group() as tasks:
        for _ in range(8):
            tasks.start_soon(enqueue)
    assert len([job_id for job_id in made if job_id is not None]) == 1
    assert made.count(None) == 7
    assert (await q.counts())[JobStatus.QUEUED] == 1
    job = await any_backend.take()
    assert job is not None and job.delivery_id == "d-1"
    assert await any_backend.take() is None


async def test_a_delivery_keeps_its_one_job_after_it_is_done(any_backend: AnyBackend) -> None:
    q = any_backend.queue
    await q.enqueue("d-1")
    job = await any_backend.take()
    assert job is not None
    await any_backend.end(job, True)
    assert await q.enqueue("d-1") is None
    assert await any_backend.take() is None


async def test_claims_oldest_first(backend: Backend) -> None:
    q = backend.queue
    for n in range(3):
        await q.enqueue(f"d-{n}")
        backend.clock.advance(1)
    claimed = [await q.claim("w", 30) for _ in range(3)]
    assert [job.delivery_id for job in claimed if job] == ["d-0", "d-1", "d-2"]


async def test_completed_job_is_not_claimed_again(backend: Backend) -> None:
    q = backend.queue
    await q.enqueue("d-1")
    job = await q.claim("w1", 30)
    assert job is not None
    await q.complete(job.id, "w1")
    backend.clock.advance(3600)
    assert await q.claim("w1", 30) is None
    done = await q.get(job.id)
    assert done is not None and done.status is JobStatus.DONE
    assert (await q.counts())[JobStatus.DONE] == 1


async def test_expired_lease_lets_another_worker_claim(backend: Backend) -> None:
    q = backend.queue
    await q.enqueue("d-1")
    first = await q.claim("crashed", 30)
    assert first is not None
    backend.clock.advance(29)
    assert await q.claim("w2", 30) is None
    backend.clock.advance(2)
    second = await q.claim("w2", 30)
    assert second is not None
    assert (second.id, second.lease_owner, second.attempts) == (first.id, "w2", 2)
    # The worker that lost its lease may no longer touch the job.
    with pytest.raises(LeaseLost):
        await q.complete(first.id, "crashed")
    with pytest.raises(LeaseLost):
        await q.heartbeat(first.id, "crashed", 30)
    await q.complete(second.id, "w2")


async def test_heartbeat_extends_the_lease(backend: Backend) -> None:
    q = backend.queue
    await q.enqueue("d-1")
    job = await q.claim("w1", 30)
    assert job is not None
    for _ in range(4):
        backend.clock.advance(20)
        await q.heartbeat(job.id, "w1", 30)
        assert await q.claim("w2", 30) is None
    current = await q.get(job.id)
    assert current is not None and current.lease_until == backend.clock.now + 30


async def test_failed_job_is_retried_after_backoff(backend: Backend) -> None:
    q = backend.queue
    await q.enqueue("d-1")
    job = await q.claim("w1", 30)
    assert job is not None
    after = await q.fail(job.id, "w1", "RuntimeError: boom")
    assert after.status is JobStatus.QUEUED
    assert after.last_error == "RuntimeError: boom"
    assert after.run_after == backend.clock.now + backoff_seconds(1)
    assert await q.claim("w1", 30) is None
    backend.clock.advance(backoff_seconds(1))
    again = await q.claim("w1", 30)
    assert again is not None and again.attempts == 2


async def test_a_failed_job_waits_until_not_before_when_that_is_later(backend: Backend) -> None:
    q = backend.queue
    await q.enqueue("d-1")
    job = await q.claim("w1", 30)
    assert job is not None
    reset = backend.clock.now + 3600
    after = await q.fail(job.id, "w1", "RateLimited: quota spent", not_before=reset)
    assert after.status is JobStatus.QUEUED and after.run_after == reset
    backend.clock.advance(backoff_seconds(1))
    assert await q.claim("w1", 30) is None
    backend.clock.advance(3600)
    again = await q.claim("w1", 30)
    assert again is not None and again.attempts == 2
    # An earlier `not_before` does not shorten the backoff.
    after = await q.fail(again.id, "w1", "boom", not_before=backend.clock.now)
    assert after.run_after == backend.clock.now + backoff_seconds(2)


async def test_job_dies_after_max_attempts(backend: Backend) -> None:
    q = backend.queue
    await q.enqueue("d-1", max_attempts=2)
    for attempt in (1, 2):
        job = await q.claim("w", 30)
        assert job is not None and job.attempts == attempt
        after = await q.fail(job.id, "w", f"failure {attempt}")
        backend.clock.advance(3600)
    assert after.status is JobStatus.DEAD
    assert await q.claim("w", 30) is None
    assert (await q.counts())[JobStatus.DEAD] == 1


async def test_a_deferred_job_waits_and_its_attempt_does_not_count(backend: Backend) -> None:
    q = backend.queue
    await q.enqueue("d-1", max_attempts=2)
    # Deferred many more times than it may fail: a job waiting its turn never dies of it.
    for _ in range(5):
        job = await q.claim("w1", 30)
        assert job is not None and job.attempts == 1
        later = backend.clock.now + 10
        after = await q.defer(job.id, "w1", "waiting for wf_0000000000aa", later)
        assert after.status is JobStatus.QUEUED and after.attempts == 0
        assert after.run_after == later and after.lease_owner is None
        assert after.last_error == "waiting for wf_0000000000aa"
        assert await q.claim("w1", 30) is None  # not before its time
        backend.clock.advance(10)
    job = await q.claim("w2", 30)
    assert job is not None and job.attempts == 1
    with pytest.raises(LeaseLost):
        await q.defer(job.id, "w1", "not mine", backend.clock.now)
    await q.complete(job.id, "w2")
    done = await q.get(job.id)
    assert done is not None and done.status is JobStatus.DONE and done.attempts == 1


async def test_fail_without_retry_is_dead_at_once(backend: Backend) -> None:
    q = backend.queue
    await q.enqueue("d-1")
    job = await q.claim("w", 30)
    assert job is not None
    after = await q.fail(job.id, "w", "bad payload", retry=False)
    assert after.status is JobStatus.DEAD and after.attempts == 1


async def test_an_error_or_reason_with_a_nul_is_kept_as_u_fffd(backend: Backend) -> None:
    """An exception's text can hold a NUL (it may quote a payload); Postgres refuses one in a
    text column, which would leave the job's failure unrecorded and the job stuck."""
    q = backend.queue
    await q.enqueue("d-1")
    await q.enqueue("d-2")
    job = await q.claim("w", 30)
    assert job is not None
    failed = await q.fail(job.id, "w", "ValueError: bad \x00 byte", retry=False)
    assert failed.status is JobStatus.DEAD and failed.last_error == "ValueError: bad \ufffd byte"
    second = await q.claim("w", 30)
    assert second is not None
    deferred = await q.defer(second.id, "w", "held \x00", not_before=backend.clock.now + 10)
    assert deferred.last_error == "held \ufffd"
    (cancelled,) = await q.cancel(["d-2"], "removed \x00")
    assert cancelled.last_error == "removed \ufffd"


async def test_expired_lease_on_last_attempt_is_dead(backend: Backend) -> None:
    q = backend.queue
    await q.enqueue("d-1", max_attempts=1)
    job = await q.claim("crashed", 30)
    assert job is not None
    backend.clock.advance(31)
    assert await q.claim("w2", 30) is None
    dead = await q.get(job.id)
    assert dead is not None and dead.status is JobStatus.DEAD
    assert dead.last_error == "lease expired"


async def test_concurrent_claims_never_share_a_job(backend: Backend) -> None:
    q = backend.queue
    for n in range(20):
        await q.enqueue(f"d-{n}")
    claimed: list[str] = []

    async def claimer(name: str) -> None:
        while (job := await q.claim(name, 30)) is not None:
            claimed.append(job.delivery_id)

    async with anyio.create_task_group() as tasks:
        for n in range(6):
            tasks.start_soon(claimer, f"w{n}")
    assert sorted(claimed) == sorted(f"d-{n}" for n in range(20))


async def test_cancelled_queued_jobs_are_never_claimed(any_backend: AnyBackend) -> None:
    q = any_backend.queue
    for name in ("d-1", "d-2", "d-3"):
        await q.enqueue(name)
    cancelled = await q.cancel(["d-1", "d-3", "d-unknown"], "installation_suspended")
    assert [(j.delivery_id, j.status, j.last_error) for j in cancelled] == [
        ("d-1", JobStatus.CANCELLED, "installation_suspended"),
        ("d-3", JobStatus.CANCELLED, "installation_suspended"),
    ]
    claimed = await any_backend.take()
    assert claimed is not None and claimed.delivery_id == "d-2"
    assert await any_backend.take() is None
    counts = await q.counts()
    assert (counts[JobStatus.CANCELLED], counts[JobStatus.RUNNING]) == (2, 1)


async def test_cancelling_a_running_job_takes_the_lease_from_its_holder(backend: Backend) -> None:
    q = backend.queue
    await q.enqueue("d-1")
    job = await q.claim("w1", 30)
    assert job is not None
    (cancelled,) = await q.cancel(["d-1"], "repositories_removed")
    assert (cancelled.id, cancelled.status, cancelled.lease_owner) == (
        job.id,
        JobStatus.CANCELLED,
        None,
    )
    with pytest.raises(LeaseLost):
        await q.heartbeat(job.id, "w1", 30)
    with pytest.raises(LeaseLost):
        await q.complete(job.id, "w1")
    with pytest.raises(LeaseLost):
        await q.fail(job.id, "w1", "boom")
    backend.clock.advance(3600)  # long past the lease: still not claimable
    assert await q.claim("w2", 30) is None
    after = await q.get(job.id)
    assert after is not None and after.status is JobStatus.CANCELLED


async def test_cancel_leaves_finished_jobs_alone(any_backend: AnyBackend) -> None:
    q = any_backend.queue
    await q.enqueue("d-done")
    await q.enqueue("d-dead")
    done = await any_backend.take()
    dead = await any_backend.take()
    assert done is not None and dead is not None
    await any_backend.end(done, True)
    await any_backend.end(dead, False)
    assert await q.cancel(["d-done", "d-dead"], "installation_deleted") == []
    assert await q.cancel([], "installation_deleted") == []
    again = await q.get(done.id)
    assert again is not None and again.status is JobStatus.DONE
    # Cancelling twice cancels once.
    await q.enqueue("d-1")
    assert len(await q.cancel(["d-1"], "first")) == 1
    assert await q.cancel(["d-1"], "second") == []
    assert (await q.counts())[JobStatus.CANCELLED] == 1


async def test_cancel_handles_many_deliveries_at_once(any_backend: AnyBackend) -> None:
    q = any_backend.queue
    names = [f"d-{n}" for n in range(1200)]
    for name in names:
        await q.enqueue(name)
    assert len(await q.cancel(names, "installation_deleted")) == 1200
    assert await any_backend.take() is None


def test_backoff_doubles_up_to_a_cap() -> None:
    assert [backoff_seconds(n) for n in (1, 2, 3, 4)] == [2.0, 4.0, 8.0, 16.0]
    assert backoff_seconds(30) == 300.0


# -- Postgres: how the jobs sit on procrastinate's worker -------------------------------------


@pytest.fixture
def pg(postgres_dsn: str) -> Iterator[tuple[PostgresStore, PostgresJobQueue]]:
    store = PostgresStore.open(postgres_dsn)
    yield store, PostgresJobQueue(store)
    store.close()


def test_the_retry_strategy_retries_a_failed_attempt_and_a_deferral_at_their_times() -> None:
    attempt = procrastinate.jobs.Job(
        id=1, queue="bot", lock=None, queueing_lock=None, task_name="delivery", attempts=1
    )
    strategy = DeliveryRetry()
    at = 2_000_000.0
    for retried in (AttemptFailed("boom", at), Deferred("held", at)):
        decision = strategy.get_retry_decision(exception=retried, job=attempt)
        assert decision is not None
        assert decision.retry_at == datetime.datetime.fromtimestamp(at, tz=datetime.UTC)
    # Left to procrastinate, any exception is retried, an aborted job's included.
    for other in (
        JobAborted(),
        asyncio.CancelledError(),
        GaveUp("bad payload"),
        ClaimLost("recovered"),
        KeyError("x"),
    ):
        assert strategy.get_retry_decision(exception=other, job=attempt) is None


async def test_a_running_jobs_cancel_requests_its_abort_from_procrastinates_worker(
    pg: tuple[PostgresStore, PostgresJobQueue],
) -> None:
    store, q = pg
    await q.enqueue("d-1")
    worker = register_worker(store)
    job_id = fetch(store, worker)
    assert job_id is not None
    (cancelled,) = await q.cancel(["d-1"], "repositories_removed")
    assert (cancelled.status, cancelled.last_error) == (JobStatus.RUNNING, "repositories_removed")
    with store.pool.connection() as conn:
        assert not holds(conn, job_id, worker, 0, 30)  # the run stops at its next check
        row = conn.execute(
            "SELECT abort_requested FROM procrastinate_jobs WHERE id = %s", (job_id,)
        ).fetchone()
    assert row == (True,)
    finish(store, job_id, "aborted")  # the worker cancelled the task
    after = await q.get(job_id)
    assert after is not None and after.status is JobStatus.CANCELLED


async def test_a_claim_holds_while_its_worker_heartbeats_and_the_attempt_is_its_own(
    pg: tuple[PostgresStore, PostgresJobQueue],
) -> None:
    store, q = pg
    await q.enqueue("d-1")
    worker, other = register_worker(store), register_worker(store)
    job_id = fetch(store, worker)
    assert job_id is not None
    with store.pool.connection() as conn:
        assert holds(conn, job_id, worker, 0, 30)
        assert not holds(conn, job_id, other, 0, 30)
        assert not holds(conn, job_id, worker, 1, 30)  # another attempt's token
        conn.execute(
            "UPDATE procrastinate_workers SET last_heartbeat = now() - interval '31 s'"
            " WHERE id = %s",
            (worker,),
        )
        assert not holds(conn, job_id, worker, 0, 30)  # stalled: anyone may recover it


async def test_a_stalled_workers_jobs_are_recovered_once_with_one_more_attempt(
    pg: tuple[PostgresStore, PostgresJobQueue],
) -> None:
    store, q = pg
    await q.enqueue("d-dead")
    await q.enqueue("d-alive")
    dead, alive = register_worker(store, heartbeat_age=60), register_worker(store)
    stalled, running = fetch(store, dead), fetch(store, alive)
    assert stalled is not None and running is not None
    with store.pool.connection() as conn:
        assert recover_stalled(conn, 30) == [stalled]
        assert recover_stalled(conn, 30) == []  # a second pass finds nothing more
    again = await q.get(stalled)
    assert again is not None and (again.status, again.attempts) == (JobStatus.QUEUED, 1)
    still = await q.get(running)
    assert still is not None and still.status is JobStatus.RUNNING


async def test_a_stale_workers_finish_leaves_the_new_holders_job_alone(
    pg: tuple[PostgresStore, PostgresJobQueue],
) -> None:
    from bot.store.queue.procrastinate_app import procrastinate_app

    store, q = pg
    job_id = await q.enqueue("d-1")
    assert job_id is not None
    paused = register_worker(store, heartbeat_age=60)
    assert fetch(store, paused) == job_id
    with store.pool.connection() as conn:
        recover_stalled(conn, 30)
    fresh = register_worker(store)
    assert fetch(store, fresh) == job_id
    stale = procrastinate.jobs.Job(
        id=job_id,
        queue="bot",
        lock=None,
        queueing_lock=None,
        task_name="delivery",
        attempts=0,
        worker_id=paused,
    )
    conninfo = store.pool.conninfo
    app = procrastinate_app(str(conninfo() if callable(conninfo) else conninfo))
    async with app.open_async():
        await app.job_manager.finish_job(stale, procrastinate.jobs.Status.FAILED, False)
        await app.job_manager.retry_job(stale)
        now = await q.get(job_id)
        assert now is not None and now.status is JobStatus.RUNNING  # the fresh worker's still
        await app.job_manager.finish_job(
            stale.evolve(worker_id=fresh, attempts=1), procrastinate.jobs.Status.SUCCEEDED, False
        )
    done = await q.get(job_id)
    assert done is not None and (done.status, done.attempts) == (JobStatus.DONE, 2)


async def test_jobs_are_procrastinate_jobs_of_one_task(
    pg: tuple[PostgresStore, PostgresJobQueue],
) -> None:
    _, q = pg
    job_id = await q.enqueue("d-1")
    replay = await q.enqueue("d-1", kind="replay-1")
    assert job_id is not None and replay is not None
    for one in (job_id, replay):
        (pjob,) = q.manager.list_jobs(id=one)
        assert (pjob.task_name, pjob.queue, pjob.task_kwargs) == (
            "delivery",
            "bot",
            {"delivery_id": "d-1"},
        )
    assert [j.kind for j in q.jobs_for_delivery("d-1")] == ["delivery", "replay-1"]
