"""The worker pool on Postgres: jobs run by procrastinate's worker (bot/runs/procrastinate_pool.py).

Each test runs a real pool (procrastinate's `Worker` over the test database) on jobs that
a receiver's pool commits, and waits for what the database then says; the waits are upper
bounds for a slow machine, never measured.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager

import anyio
import anyio.to_thread
import pytest

from bot.runs.procrastinate_pool import ProcrastinatePool
from bot.runs.worker import Worker, WorkerHooks
from bot.store.contract import RunRecord
from bot.store.postgres.store import PostgresStore
from bot.store.queue.base import Deferred, GiveUp, Job, JobStatus
from bot.store.queue.postgres import PostgresJobQueue
from policies.event import Trigger
from tests.backends import insert_delivery, query
from tests.scripted import issues_opened

pytestmark = pytest.mark.anyio

WAIT = 30.0
LEASE = 3.0


@pytest.fixture
def store(postgres_dsn: str) -> Iterator[PostgresStore]:
    opened = PostgresStore.open(postgres_dsn)
    yield opened
    opened.close()


@pytest.fixture
def receiver(postgres_dsn: str) -> Iterator[PostgresJobQueue]:
    """The queue through another pool, as a receiver on another machine has it."""
    other = PostgresStore.open(postgres_dsn)
    yield PostgresJobQueue(other)
    other.close()


def opened_issue(store: PostgresStore, guid: str, number: int = 1) -> None:
    issue = {"number": number, "title": "t", "body": "b", "user": {"login": "someone"}}
    body = json.dumps(issues_opened(issue, "octo/hello", 42)).encode()
    insert_delivery(store, guid, event="issues", action="opened", body=body)


def pool(store: PostgresStore, executor: Callable[..., object] | None = None) -> Worker:
    hooks = WorkerHooks(executor=executor)  # type: ignore[arg-type]
    return Worker(
        store,
        PostgresJobQueue(store),
        hooks,
        app_slug="repo-agent",
        concurrency=2,
        lease_seconds=LEASE,
        runner=ProcrastinatePool(store, stalled_after=LEASE),
    )


@asynccontextmanager
async def running(worker: Worker) -> AsyncIterator[None]:
    async with anyio.create_task_group() as tasks:
        await tasks.start(worker.run)
        yield
        tasks.cancel_scope.cancel()


async def job_of(queue: PostgresJobQueue, guid: str) -> Job:
    (job,) = await anyio.to_thread.run_sync(queue.jobs_for_delivery, guid)
    return job


async def until(queue: PostgresJobQueue, guid: str, *statuses: JobStatus) -> Job:
    with anyio.fail_after(WAIT):
        while True:
            job = await job_of(queue, guid)
            if job.status in statuses:
                return job
            await anyio.sleep(0.05)


async def test_a_job_committed_elsewhere_is_run_once_by_procrastinates_worker(
    store: PostgresStore, receiver: PostgresJobQueue
) -> None:
    runs: list[str] = []

    async def executor(trigger: Trigger, run: RunRecord) -> None:
        runs.append(run.delivery_id)

    async with running(pool(store, executor)):
        opened_issue(store, "d-1")
        await anyio.to_thread.run_sync(receiver.enqueue_sync, "d-1")
        job = await until(receiver, "d-1", JobStatus.DONE, JobStatus.DEAD)
    assert (job.status, job.attempts) == (JobStatus.DONE, 1)
    assert runs == ["d-1"]
    (decision,) = query(store, "SELECT decision FROM deliveries WHERE guid = ?", "d-1")
    assert decision == ("trigger",)
    # procrastinate's worker ran it: its row names the worker, which has unregistered.
    ((worker_id,),) = query(store, "SELECT worker_id FROM procrastinate_jobs")
    assert worker_id is None or query(store, "SELECT 1 FROM procrastinate_workers") == []


async def test_a_failed_attempt_is_retried_after_the_backoff_and_counted(
    store: PostgresStore, receiver: PostgresJobQueue
) -> None:
    tries: list[int] = []

    async def executor(trigger: Trigger, run: RunRecord) -> None:
        tries.append(1)
        if len(tries) == 1:
            raise RuntimeError("GitHub answered 502")

    async with running(pool(store, executor)):
        opened_issue(store, "d-1")
        await anyio.to_thread.run_sync(receiver.enqueue_sync, "d-1")
        job = await until(receiver, "d-1", JobStatus.DONE, JobStatus.DEAD)
    assert (job.status, job.attempts, len(tries)) == (JobStatus.DONE, 2, 2)
    assert job.last_error == "RuntimeError: GitHub answered 502"


async def test_giving_up_ends_the_job_dead_at_once_and_says_so(
    store: PostgresStore, receiver: PostgresJobQueue
) -> None:
    async def executor(trigger: Trigger, run: RunRecord) -> None:
        raise GiveUp("the run keeps killing its worker")

    async with running(pool(store, executor)):
        opened_issue(store, "d-1")
        await anyio.to_thread.run_sync(receiver.enqueue_sync, "d-1")
        job = await until(receiver, "d-1", JobStatus.DONE, JobStatus.DEAD)
    assert (job.status, job.attempts) == (JobStatus.DEAD, 1)
    ((decision, reason),) = query(
        store, "SELECT decision, reason FROM deliveries WHERE guid = ?", "d-1"
    )
    assert decision == "error" and "gave up after 1 attempts" in str(reason)
    ((status,),) = query(store, "SELECT status FROM runs")
    assert status == "failed"


async def test_a_deferred_job_comes_back_and_its_deferral_is_not_an_attempt(
    store: PostgresStore, receiver: PostgresJobQueue
) -> None:
    tries: list[int] = []

    async def executor(trigger: Trigger, run: RunRecord) -> None:
        tries.append(1)
        if len(tries) == 1:
            raise Deferred("waiting for run wf_other", store.clock())

    async with running(pool(store, executor)):
        opened_issue(store, "d-1")
        await anyio.to_thread.run_sync(receiver.enqueue_sync, "d-1")
        job = await until(receiver, "d-1", JobStatus.DONE, JobStatus.DEAD)
    assert (job.status, job.attempts, len(tries)) == (JobStatus.DONE, 1, 2)


async def test_cancelling_a_running_job_aborts_its_task_through_procrastinate(
    store: PostgresStore, receiver: PostgresJobQueue
) -> None:
    started = anyio.Event()
    ended: list[str] = []

    async def executor(trigger: Trigger, run: RunRecord) -> None:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            ended.append("cancelled")

    async with running(pool(store, executor)):
        opened_issue(store, "d-1")
        await anyio.to_thread.run_sync(receiver.enqueue_sync, "d-1")
        with anyio.fail_after(WAIT):
            await started.wait()
        (cancelled,) = await receiver.cancel(["d-1"], "installation deleted")
        assert cancelled.status is JobStatus.RUNNING  # its abort is requested
        job = await until(receiver, "d-1", JobStatus.CANCELLED, JobStatus.DONE, JobStatus.DEAD)
    assert job.status is JobStatus.CANCELLED
    assert ended == ["cancelled"]


async def test_a_dead_workers_job_is_recovered_and_run_again(
    store: PostgresStore, receiver: PostgresJobQueue
) -> None:
    runs: list[str] = []

    async def executor(trigger: Trigger, run: RunRecord) -> None:
        runs.append(run.id)

    opened_issue(store, "d-1")
    job_id = await anyio.to_thread.run_sync(receiver.enqueue_sync, "d-1")
    # A worker fetched it and died: its heartbeat stopped a minute ago.
    with store.pool.connection() as conn:
        row = conn.execute(
            "INSERT INTO procrastinate_workers (last_heartbeat) VALUES (now() - interval '60 s')"
            " RETURNING id"
        ).fetchone()
        assert row is not None
        conn.execute(
            "UPDATE procrastinate_jobs SET status = 'doing', worker_id = %s WHERE id = %s",
            (row[0], job_id),
        )
    async with running(pool(store, executor)):
        job = await until(receiver, "d-1", JobStatus.DONE, JobStatus.DEAD)
    assert (job.status, job.attempts) == (JobStatus.DONE, 2)
    assert len(runs) == 1
