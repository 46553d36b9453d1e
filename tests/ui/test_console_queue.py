"""The queue page and the workers' heartbeats, on both backends: jobs per workflow by state
with the oldest wait, the workers, and a run held by a worker that stopped beating."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from starlette.applications import Starlette

from bot.runs.heartbeat import beat_forever
from bot.store.backend import job_queue
from bot.store.contract import Storage
from bot.store.postgres.store import PostgresStore
from bot.store.queue.sqlite import SqliteJobQueue
from bot.store.sqlite import Store
from bot.store.workers import FORGET_AFTER_S
from bot.ui import queries
from bot.ui.app import operator_page
from policies.ui_queue import SILENT_AFTER_S
from tests.backends import BACKENDS, backend_store, end_job, insert_delivery, take_job
from tests.ui.conftest import sign_in, ui_settings
from tests.ui.seed import add_run
from tests.ui.server import serve


@pytest.fixture
def t0() -> float:
    """The store's clock: now, read when the test starts (not when the module was collected,
    perhaps minutes before), so that Postgres's own clock (procrastinate's) agrees with it."""
    return float(int(time.time()))


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, data_dir: Path, t0: float) -> Iterator[Storage]:
    for opened in backend_store(request, data_dir):
        opened.clock = lambda: t0
        yield opened


def job(store: Storage, guid: str, workflow: str | None, at: float) -> None:
    """A delivery received and its job enqueued at `at` (the store's clock is put back)."""
    insert_delivery(store, guid, at)
    if workflow is not None:
        store.record_decision(guid, "trigger", workflow=workflow)
    clock = store.clock
    store.clock = lambda: at
    try:
        job_queue(store).enqueue_sync(guid)
    finally:
        store.clock = clock


def defer(store: Storage, until: float) -> None:
    taken = take_job(store)
    if isinstance(store, Store):
        SqliteJobQueue(store).defer_sync(taken.id, "w", "target held", until)
        return
    assert isinstance(store, PostgresStore)
    with store.pool.connection() as conn:
        conn.execute("UPDATE bot_jobs SET deferrals = deferrals + 1 WHERE job_id = %s", (taken.id,))
        conn.execute(
            "SELECT procrastinate_retry_job_v2(%s, to_timestamp(%s), NULL, NULL, NULL)",
            (taken.id, until),
        )


def test_jobs_per_workflow_by_state_with_the_oldest_wait(store: Storage, t0: float) -> None:
    # Each job is taken right after it is enqueued, while it is the only one ready.
    job(store, "r-run", "fix", t0 - 120)
    take_job(store)  # stays running
    job(store, "r-defer", "fix", t0 - 60)
    defer(store, t0 + 600)  # waits for its time
    job(store, "q-new", "review", t0 - 10)
    end_job(store, take_job(store), "dead")  # given up
    job(store, "q-undecided", None, t0 - 5)
    take_job(store)  # running, its delivery not decided yet
    job(store, "q-old", "review", t0 - 300)
    end_job(store, take_job(store), "retry")  # failed once: waits to be tried again
    job(store, "r-ready", "fix", t0 - 30)

    view = queries.queue_view(store)
    lines = {line.workflow: line for line in view.lines}
    assert lines["review"].counts == {
        "queued": 0,
        "deferred": 0,
        "failed": 1,
        "running": 0,
        "dead": 1,
    }
    assert lines["review"].oldest_wait == pytest.approx(300.0)  # q-old, failed and waiting
    assert lines[""].counts["running"] == 1 and lines[""].oldest_wait is None
    assert lines["fix"].counts == {"queued": 1, "deferred": 1, "failed": 0, "running": 1, "dead": 0}
    assert lines["fix"].oldest_wait == pytest.approx(60.0)  # r-defer; r-run runs
    assert view.totals["running"] == 2


def test_heartbeats_rows_silence_and_the_runs_held(store: Storage, t0: float) -> None:
    insert_delivery(store, "d-1", t0)
    held = add_run(store, "d-1", status="running", created_at=t0)
    store.beat("w-1", host="box-a", pid=11, started_at=t0 - 50, runs=[held])
    store.beat("w-2", host="box-b", pid=22, started_at=t0 - 40, runs=[])
    beats = {w.id: w for w in store.worker_beats()}
    assert beats["w-1"].runs == (held,) and beats["w-1"].host == "box-a"
    assert beats["w-1"].pid == 11 and beats["w-1"].beat_at == t0
    run = store.get_run(held)
    assert run is not None
    assert queries.runs_context(store, [run])[held].silent_worker is None

    store.clock = lambda: t0 + SILENT_AFTER_S + 1  # w-1 stops beating; w-2 goes on
    store.beat("w-2", host="box-b", pid=22, started_at=t0 - 40, runs=[])
    silent = queries.runs_context(store, [run])[held].silent_worker
    assert silent is not None and silent.id == "w-1"
    view = queries.queue_view(store)
    assert [(w.id, s) for w, s in view.workers] == [("w-2", False), ("w-1", True)]

    store.worker_stopped("w-2")
    assert [w.id for w in store.worker_beats()] == ["w-1"]
    store.clock = lambda: t0 + FORGET_AFTER_S + 1
    store.beat("w-3", host="box-c", pid=33, started_at=t0, runs=[])
    assert [w.id for w in store.worker_beats()] == ["w-3"]  # the long-silent row is forgotten


async def until(condition: Callable[[], bool]) -> None:
    """Wait (ten seconds at most) until `condition` holds."""
    for _ in range(1000):
        if condition():
            return
        await anyio.sleep(0.01)
    raise AssertionError("the condition never held")


@pytest.mark.anyio
async def test_a_pool_beats_with_the_runs_it_holds_and_its_row_goes_when_it_stops(
    store: Storage,
) -> None:
    held: list[str] = ["wf_000000000001"]
    store.clock = time.time
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(lambda: beat_forever(store, "pool-1", lambda: list(held), interval=0.05))
        await until(lambda: bool(store.worker_beats()))
        assert store.worker_beats()[0].runs == ("wf_000000000001",)
        held.clear()
        await until(lambda: not store.worker_beats()[0].runs)
        tasks.cancel_scope.cancel()
    assert store.worker_beats() == []


def test_the_queue_page(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "bot.db")
    try:
        job(store, "d-wait", "review", store.clock() - 75)
        store.beat("w-live", host="box-a", pid=7, started_at=store.clock(), runs=[])
        store.beat("w-dead", host="box-b", pid=8, started_at=store.clock() - 99, runs=["wf_x"])
        store.conn().execute("UPDATE worker_beats SET beat_at = beat_at - 600 WHERE id = 'w-dead'")
        app = Starlette(routes=[operator_page(ui_settings(tmp_path), store)])
        with serve(app) as url, httpx.Client(base_url=url, timeout=10) as client:
            assert client.get("/ui/queue", follow_redirects=False).status_code == 303
            assert client.get("/ui/live/queue").status_code == 401
            sign_in(client)
            html = client.get("/ui/queue").text
            assert 'data-refresh="/ui/live/queue"' in html
            assert '<td class="num c-queued">1</td>' in html
            assert "1 min 15 s" in html
            assert 'class="worker silent" data-worker="w-dead"' in html
            assert 'class="worker" data-worker="w-live"' in html
            assert "held by a silent worker" in html
            live = client.get("/ui/live/queue").json()["html"]
            assert "w-dead" in live and "<html" not in live
    finally:
        store.close()
