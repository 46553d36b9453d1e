"""Both worker pools beat (`bot.runs.heartbeat`): the SQLite pool's claim loop and the Postgres
pool run by procrastinate's worker each keep a row in `worker_beats` naming the run they hold
while they hold it, and delete it when they stop."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from bot.runs.procrastinate_pool import ProcrastinatePool
from bot.runs.worker import Worker, WorkerHooks
from bot.store.backend import job_queue
from bot.store.contract import RunRecord, Storage
from bot.store.postgres.store import PostgresStore
from bot.store.queue.postgres import PostgresJobQueue
from bot.store.queue.sqlite import SqliteJobQueue
from bot.store.sqlite import Store
from policies.event import Trigger
from policies.ui_queue import BEAT_S
from tests.backends import BACKENDS, backend_store, insert_delivery
from tests.scripted import issues_opened

pytestmark = pytest.mark.anyio

WAIT = 4 * BEAT_S + 30.0
"""An upper bound on a slow machine for a beat to name the run (the pool beats every BEAT_S)."""


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, data_dir: Path) -> Iterator[Storage]:
    yield from backend_store(request, data_dir)


def pool(store: Storage, hooks: WorkerHooks) -> Worker:
    if isinstance(store, Store):
        return Worker(store, SqliteJobQueue(store), hooks, app_slug="repo-agent", concurrency=1)
    assert isinstance(store, PostgresStore)
    return Worker(
        store,
        PostgresJobQueue(store),
        hooks,
        app_slug="repo-agent",
        concurrency=1,
        lease_seconds=30.0,
        runner=ProcrastinatePool(store, stalled_after=30.0),
    )


async def test_the_pool_names_the_run_it_holds_and_its_row_goes_when_it_stops(
    store: Storage,
) -> None:
    started, release = anyio.Event(), anyio.Event()
    held: list[str] = []

    async def executor(trigger: Trigger, run: RunRecord) -> None:
        held.append(run.id)
        started.set()
        await release.wait()

    issue = {"number": 1, "title": "t", "body": "b", "user": {"login": "someone"}}
    body = json.dumps(issues_opened(issue, "octo/hello", 42)).encode()
    insert_delivery(store, "d-1", store.clock(), event="issues", action="opened", body=body)
    worker = pool(store, WorkerHooks(executor=executor))
    async with anyio.create_task_group() as tasks:
        await tasks.start(worker.run)
        await anyio.to_thread.run_sync(job_queue(store).enqueue_sync, "d-1")
        with anyio.fail_after(WAIT):
            await started.wait()
            while True:
                beats = await anyio.to_thread.run_sync(store.worker_beats)
                if beats and beats[0].runs:
                    break
                await anyio.sleep(0.1)
        (beat,) = beats
        assert beat.id == worker.worker_id and beat.runs == tuple(held)
        assert (beat.host, beat.pid) == (socket.gethostname(), os.getpid())
        release.set()
        tasks.cancel_scope.cancel()
    assert store.worker_beats() == []
