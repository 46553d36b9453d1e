"""Run lifecycle: background start, status, stop (cancelling agents), settle, stale recovery."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from bot.engine import Engine, RunDetails, RunNotFound, WorkflowMeta, build_result_message
from bot.engine.artifacts import RunStore
from bot.engine.details import AgentDetails
from bot.engine.workflow import Workflow
from tests.engine.scripted import POLICY, Script, ScriptedRunner, make_repo

META = WorkflowMeta("life", phases=("Work",))


async def fan_out(wf: Workflow, args: Any) -> Any:
    wf.phase("Work")
    results = await wf.parallel(
        [lambda i=i: wf.agent(f"slow {i}", label=f"s{i}") for i in range(4)]
    )
    return [r.ok for r in results]


@pytest.mark.anyio
async def test_stop_cancels_agents_in_flight_and_aborts(data_dir: Path) -> None:
    runner = ScriptedRunner(default=Script(latency=30))
    async with Engine(runner, data_dir=data_dir, concurrency=2) as engine:
        rid = engine.start(META, fan_out, None, interaction=POLICY, repo=None)
        await runner.wait_for_in_flight(2)
        running = engine.status(rid)
        assert running.status == "running"
        assert [d.run_id for d in engine.status()] == [rid]
        details = await engine.stop(rid[-6:])
    assert details.status == "aborted" and details.error == "Stopped by user"
    assert sorted(runner.cancelled) == ["s0", "s1"]  # the two in flight saw cancellation
    assert len(runner.calls) == 2 and len(details.agents) == 2  # queued thunks never started
    assert all(a.state == "error" for a in details.agents)
    assert all(a.ledger == "settled" for a in details.agents)
    saved = RunStore(data_dir).read_details(rid)
    assert saved.status == "aborted" and saved.finished_at is not None
    message = build_result_message(saved, data_dir / "runs" / rid)
    assert message.startswith('Workflow "life" aborted - 0/2 agents ok, 2 failed across 1 phase(s)')
    assert "Error: Stopped by user" in message


@pytest.mark.anyio
async def test_settle_is_bounded_for_agents_that_ignore_cancellation(data_dir: Path) -> None:
    release = anyio.Event()
    runner = ScriptedRunner(default=Script(hold=release, shielded=True))
    async with Engine(runner, data_dir=data_dir, settle_seconds=0.1) as engine:
        rid = engine.start(META, fan_out, None, interaction=POLICY, repo=None)
        await runner.started.wait()
        details = await engine.stop(rid)
        # The run is final before the stubborn agents end.
        assert runner.in_flight > 0
        assert details.status == "aborted"
        stuck = [a for a in details.agents if a.ledger == "uncertain"]
        assert stuck and all(a.error == "did not settle" for a in stuck)
        assert RunStore(data_dir).read_details(rid).status == "aborted"
        release.set()


@pytest.mark.anyio
async def test_stop_and_status_reject_unknown_or_ambiguous_ids(data_dir: Path) -> None:
    async with Engine(ScriptedRunner(), data_dir=data_dir) as engine:
        done = await engine.run(META, fan_out, None, interaction=POLICY, repo=None)
        with pytest.raises(RunNotFound):
            await engine.stop(done.run_id)  # not running
        with pytest.raises(RunNotFound, match="not a run id"):
            engine.status("../etc")
        assert engine.status(done.run_id[-4:]).status == "completed"
    with pytest.raises(RuntimeError, match="background runs need"):
        Engine(ScriptedRunner(), data_dir=data_dir).start(
            META, fan_out, None, interaction=POLICY, repo=None
        )


def test_stale_running_runs_are_recovered_as_aborted(data_dir: Path) -> None:
    store = RunStore(data_dir)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    stale = RunDetails(run_id="wf_00000000aaaa", name="old", pid=int(dead.stdout))
    stale.agents.append(AgentDetails(1, "a", None, "explorer", state="running", ledger="running"))
    live = RunDetails(run_id="wf_00000000bbbb", name="live", pid=os.getppid())
    finished = RunDetails(run_id="wf_00000000cccc", name="done", status="completed")
    for d in (stale, live, finished):
        store.write_details(d)
    engine = Engine(ScriptedRunner(), data_dir=data_dir)
    assert engine.recover_stale() == ["wf_00000000aaaa"]
    recovered = store.read_details("wf_00000000aaaa")
    assert recovered.status == "aborted" and "Recovered at start-up" in (recovered.error or "")
    assert recovered.agents[0].ledger == "uncertain" and recovered.agents[0].state == "error"
    assert store.read_details("wf_00000000bbbb").status == "running"
    assert engine.recover_stale() == []


@pytest.mark.anyio
async def test_background_run_finishes_and_reports(data_dir: Path) -> None:
    async with Engine(ScriptedRunner(), data_dir=data_dir) as engine:
        rid = engine.start(META, fan_out, None, interaction=POLICY, repo=None)
        assert rid.startswith("wf_") and len(rid) == 15
        finished = await engine.wait(rid)
        assert finished.status == "completed"
        assert engine.status(rid).result == [True] * 4
    saved = json.loads((data_dir / "runs" / rid / "result.json").read_text())
    assert saved == {"status": "completed", "result": [True] * 4, "error": None}


@pytest.mark.anyio
async def test_cancelling_a_blocking_run_leaves_it_aborted(data_dir: Path) -> None:
    runner = ScriptedRunner(default=Script(latency=30))
    engine = Engine(runner, data_dir=data_dir)
    seen: list[str] = []

    async def blocking() -> None:
        await engine.run(
            META,
            fan_out,
            None,
            interaction=POLICY,
            repo=None,
            on_update=lambda d: seen.append(d.run_id),
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(blocking)
        await runner.started.wait()
        tg.cancel_scope.cancel()
    saved = RunStore(data_dir).read_details(seen[0])
    assert saved.status == "aborted" and saved.error == "Run interrupted"
    assert runner.cancelled


@pytest.mark.anyio
async def test_stop_right_after_start_aborts_before_any_agent(data_dir: Path) -> None:
    runner = ScriptedRunner(default=Script(latency=30))
    async with Engine(runner, data_dir=data_dir) as engine:
        rid = engine.start(META, fan_out, None, interaction=POLICY, repo=None)
        details = await engine.stop(rid)
    assert details.status == "aborted" and details.error == "Stopped by user"
    assert runner.calls == []


@pytest.mark.anyio
async def test_recovery_leaves_runs_of_another_engine_in_this_process_alone(
    data_dir: Path,
) -> None:
    runner = ScriptedRunner(default=Script(latency=30))
    async with Engine(runner, data_dir=data_dir) as first:
        rid = first.start(META, fan_out, None, interaction=POLICY, repo=None)
        await runner.started.wait()
        assert Engine(ScriptedRunner(), data_dir=data_dir).recover_stale() == []
        assert (await first.stop(rid)).error == "Stopped by user"


@pytest.mark.anyio
async def test_a_blocking_run_can_be_stopped_while_it_prepares(
    data_dir: Path, tmp_path: Path
) -> None:
    # Preparing resolves the repository in worker threads; a stop in that window is kept.
    repo = make_repo(tmp_path / "repo")
    runner = ScriptedRunner(default=Script(latency=30))
    engine = Engine(runner, data_dir=data_dir)
    rid = "wf_00000000abcd"
    results: list[RunDetails] = []

    async def blocking() -> None:
        results.append(
            await engine.run(META, fan_out, None, interaction=POLICY, repo=repo, run_id=rid)
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(blocking)
        await anyio.lowlevel.checkpoint()  # the run registered and awaits its first git call
        assert engine.status(rid).status == "running"
        stopped = await engine.stop(rid)
    assert stopped.status == "aborted" and stopped.error == "Stopped by user"
    assert results[0].status == "aborted" and runner.calls == []


@pytest.mark.anyio
async def test_leaving_the_engine_stops_runs_still_preparing(
    data_dir: Path, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    runner = ScriptedRunner(default=Script(latency=30))
    with anyio.fail_after(20):  # without the stop, leaving would wait for 30 s agents
        async with Engine(runner, data_dir=data_dir) as engine:
            rid = engine.start(META, fan_out, None, interaction=POLICY, repo=repo)
    saved = RunStore(data_dir).read_details(rid)
    assert saved.status == "aborted" and saved.error == "Engine shut down"
    assert runner.calls == []


@pytest.mark.anyio
async def test_a_run_id_already_running_is_refused(data_dir: Path) -> None:
    runner = ScriptedRunner(default=Script(latency=30))
    async with Engine(runner, data_dir=data_dir) as engine:
        rid = engine.start(META, fan_out, None, interaction=POLICY, repo=None)
        with pytest.raises(ValueError, match="already running"):
            engine.start(META, fan_out, None, interaction=POLICY, repo=None, run_id=rid)
        await runner.started.wait()
        with pytest.raises(ValueError, match="already running"):
            await engine.run(META, fan_out, None, interaction=POLICY, repo=None, run_id=rid)
        assert (await engine.stop(rid)).error == "Stopped by user"


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("[]", id="a-list"),
        pytest.param('{"run_id": "wf_00000000dddd", "name": "x", "agents": [7]}', id="bad-agent"),
        pytest.param("{not json", id="not-json"),
    ],
)
def test_a_malformed_workflow_json_is_skipped_not_a_crash(data_dir: Path, content: str) -> None:
    store = RunStore(data_dir)
    good = RunDetails(run_id="wf_00000000cccc", name="done", status="completed")
    store.write_details(good)
    bad = data_dir / "runs" / "wf_00000000dddd"
    bad.mkdir(parents=True)
    (bad / "workflow.json").write_text(content)
    engine = Engine(ScriptedRunner(), data_dir=data_dir)
    assert engine.recover_stale() == []
    assert [d.run_id for d in engine.status()] == ["wf_00000000cccc"]
    with pytest.raises(RunNotFound, match=r"no readable workflow\.json"):
        engine.status("wf_00000000dddd")
