"""A retry on Postgres: procrastinate's worker runs a dead delivery's `retry-1` job once, on
the run the dead job left failed, under the same run id."""

from __future__ import annotations

import anyio
import anyio.to_thread
import pytest

from bot.store.contract import RunRecord
from bot.store.postgres.store import PostgresStore
from bot.store.queue.base import GiveUp, JobStatus
from bot.store.queue.postgres import PostgresJobQueue
from policies.event import Trigger
from tests.bot.test_procrastinate_pool import WAIT, opened_issue, pool, receiver, running, store

__all__ = ["receiver", "store"]  # fixtures

pytestmark = pytest.mark.anyio


async def _statuses(queue: PostgresJobQueue, guid: str) -> list[tuple[str, JobStatus]]:
    jobs = await anyio.to_thread.run_sync(queue.jobs_for_delivery, guid)
    return [(job.kind, job.status) for job in jobs]


async def _until(queue: PostgresJobQueue, guid: str, wanted: list[tuple[str, JobStatus]]) -> None:
    with anyio.fail_after(WAIT):
        while True:  # polling the database: nothing else reports it
            if await _statuses(queue, guid) == wanted:
                return
            await anyio.sleep(0.05)


async def test_a_dead_job_retried_runs_once_more_through_procrastinate(
    store: PostgresStore, receiver: PostgresJobQueue
) -> None:
    calls: list[str] = []

    async def executor(trigger: Trigger, run: RunRecord) -> None:
        calls.append(f"{run.id}:{run.status}")
        if len(calls) == 1:
            raise GiveUp("the model endpoint is gone")

    async with running(pool(store, executor)):
        opened_issue(store, "d-1")
        await anyio.to_thread.run_sync(receiver.enqueue_sync, "d-1")
        await _until(receiver, "d-1", [("delivery", JobStatus.DEAD)])
        (run,) = store.runs_for_delivery("d-1")
        assert run.status == "failed"
        [done] = await anyio.to_thread.run_sync(lambda: receiver.retry_sync(["d-1"], source="cli"))
        assert done.kind == "retry-1" and done.runs == (run.id,)
        await _until(receiver, "d-1", [("delivery", JobStatus.DEAD), ("retry-1", JobStatus.DONE)])
    assert calls == [f"{run.id}:queued", f"{run.id}:queued"]
