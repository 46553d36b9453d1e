"""Postgres wakes the worker pool when a job is committed anywhere (bot/store/postgres/listen.py).

The bounds are generous on purpose: a pool woken by a notification claims within a round
trip, and one that is not waits its 30 s poll, so 5 s tells the two apart on any machine.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from functools import partial

import anyio
import anyio.abc
import anyio.to_thread
import psycopg
import pytest

from bot.runs.worker import WATCHED_POLL_INTERVAL, Worker, WorkerHooks
from bot.store.postgres.listen import APPLICATION_NAME, channel, listen
from bot.store.postgres.store import PostgresStore
from bot.store.queue.base import Job, Watch
from bot.store.queue.postgres import QUEUE, PostgresJobQueue

pytestmark = pytest.mark.anyio

BOUND = 5.0  # seconds; see the module's docstring


class Wakes:
    """Counts the listener's wake-ups; `wait_for(n)` returns once there were n."""

    def __init__(self) -> None:
        self.count = 0
        self._changed = anyio.Event()

    def __call__(self) -> None:
        self.count += 1
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_for(self, count: int) -> None:
        with anyio.fail_after(BOUND):
            while self.count < count:
                await self._changed.wait()


class Recorded(PostgresJobQueue):
    """The queue, noting when a claim found nothing and when one got a job."""

    def __init__(self, store: PostgresStore) -> None:
        super().__init__(store)
        self.idle = anyio.Event()
        self.claimed = anyio.Event()
        self.jobs: list[tuple[float, Job]] = []

    async def claim(self, worker_id: str, lease_seconds: float) -> Job | None:
        job = await super().claim(worker_id, lease_seconds)
        if job is None:
            self.idle.set()
        else:
            self.jobs.append((time.monotonic(), job))
            self.claimed.set()
        return job


@pytest.fixture
def store(postgres_dsn: str) -> Iterator[PostgresStore]:
    opened = PostgresStore.open(postgres_dsn)
    yield opened
    opened.close()


@pytest.fixture
def elsewhere(postgres_dsn: str) -> Iterator[PostgresJobQueue]:
    """The queue through another pool, as a receiver on another machine has it."""
    other = PostgresStore.open(postgres_dsn)
    yield PostgresJobQueue(other)
    other.close()


def listeners(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
            (APPLICATION_NAME,),
        ).fetchone()
    return int(row[0]) if row else 0


@asynccontextmanager
async def running(worker: Worker) -> AsyncIterator[None]:
    async with anyio.create_task_group() as tasks:
        await tasks.start(worker.run)
        yield
        tasks.cancel_scope.cancel()


async def claimed_after_enqueue(
    queue: Recorded, elsewhere: PostgresJobQueue, worker: Worker
) -> float:
    """Seconds from a job's commit elsewhere to its claim by the idle `worker`."""
    async with running(worker):
        with anyio.fail_after(BOUND):
            await queue.idle.wait()  # the pool claimed, found nothing and now waits
        start = time.monotonic()
        job_id = await anyio.to_thread.run_sync(elsewhere.enqueue_sync, "d-1")
        with anyio.fail_after(BOUND):
            await queue.claimed.wait()
    (at, job), *_ = queue.jobs
    assert job.id == job_id
    return at - start


async def test_a_job_committed_elsewhere_wakes_the_listener(
    postgres_dsn: str, elsewhere: PostgresJobQueue
) -> None:
    wakes = Wakes()
    async with anyio.create_task_group() as tasks:
        await tasks.start(partial(listen, postgres_dsn, channel(QUEUE), wakes))
        await anyio.to_thread.run_sync(elsewhere.enqueue_sync, "d-1")
        await wakes.wait_for(1)
        tasks.cancel_scope.cancel()


async def test_an_idle_pool_claims_a_job_from_another_machine_long_before_its_poll(
    store: PostgresStore, elsewhere: PostgresJobQueue, postgres_dsn: str
) -> None:
    queue = Recorded(store)
    worker = Worker(
        store,
        queue,
        WorkerHooks(),
        app_slug="repo-agent",
        concurrency=1,
        poll_interval=30.0,
        watch=queue.watch,
    )
    assert await claimed_after_enqueue(queue, elsewhere, worker) < BOUND
    # Stopping the pool closed its listening connection; the server drops it soon after.
    with anyio.fail_after(BOUND):
        while await anyio.to_thread.run_sync(listeners, postgres_dsn):  # noqa: ASYNC110 (polled)
            await anyio.sleep(0.05)


def test_a_watched_pool_polls_less_often() -> None:
    async def watch(
        wake: Callable[[], None],
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        task_status.started()

    class NoQueue:  # the constructor keeps the queue; it never calls it
        pass

    worker = Worker(None, NoQueue(), WorkerHooks(), app_slug="a", watch=watch)  # type: ignore[arg-type]
    assert worker.poll_interval == WATCHED_POLL_INTERVAL
    assert Worker(None, NoQueue(), WorkerHooks(), app_slug="a").poll_interval == 1.0  # type: ignore[arg-type]


@pytest.mark.parametrize("notifications", ["none", "unreachable"])
async def test_the_poll_still_picks_a_job_up_without_notifications(
    store: PostgresStore, elsewhere: PostgresJobQueue, tmp_path: object, notifications: str
) -> None:
    queue = Recorded(store)
    watch: Watch | None = None
    if notifications == "unreachable":
        # A listener that cannot connect: the pool starts anyway and polls.
        nowhere = f"postgresql://bot@/bot?host={tmp_path}"
        watch = partial(listen, nowhere, channel(QUEUE), retry_min=60.0)
    worker = Worker(
        store,
        queue,
        WorkerHooks(),
        app_slug="repo-agent",
        concurrency=1,
        poll_interval=0.2,
        watch=watch,
    )
    assert await claimed_after_enqueue(queue, elsewhere, worker) < BOUND


async def test_the_listener_reconnects_after_its_connection_is_dropped(
    postgres_dsn: str, elsewhere: PostgresJobQueue
) -> None:
    wakes = Wakes()
    async with anyio.create_task_group() as tasks:
        await tasks.start(
            partial(listen, postgres_dsn, channel(QUEUE), wakes, idle_check=0.2, retry_min=0.05)
        )
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            killed = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE application_name = %s",
                (APPLICATION_NAME,),
            ).fetchone()
        assert killed == (1,)
        await wakes.wait_for(1)  # back, and woke the pool once for what it may have missed
        with anyio.fail_after(BOUND):
            while await anyio.to_thread.run_sync(listeners, postgres_dsn) != 1:  # noqa: ASYNC110
                await anyio.sleep(0.05)
        await anyio.to_thread.run_sync(elsewhere.enqueue_sync, "d-1")
        await wakes.wait_for(2)
        tasks.cancel_scope.cancel()
