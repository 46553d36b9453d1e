"""Resume: exactly the read-only calls replay, keyed on content and workspace identity."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from bot.engine import Engine, RunDetails, RunNotFound, WorkflowMeta, build_result_message
from bot.engine.types import AgentInvocation
from bot.engine.workflow import Workflow
from tests.engine.scripted import POLICY, Script, ScriptedRunner, git, make_repo

META = WorkflowMeta("resume", phases=("Read", "Write"))


def counting_runner() -> ScriptedRunner:
    counter = itertools.count(1)

    def rule(call: AgentInvocation) -> Script:
        if call.label == "flaky":
            return Script(error="model timed out")
        return Script(output=f"{call.label}#{next(counter)}")

    return ScriptedRunner(rule=rule)


async def mixed(wf: Workflow, args: Any) -> Any:
    wf.phase("Read")
    a = await wf.agent("same question", agent_type="explorer", label="q")
    b = await wf.agent("same question", agent_type="explorer", label="q")
    c = await wf.agent("look elsewhere", agent_type="reviewer", label="r")
    d = await wf.agent("untyped agents always run", label="untyped")
    e = await wf.agent("fails", agent_type="explorer", label="flaky")
    wf.phase("Write")
    f = await wf.agent("change it", agent_type="implementer", isolation="worktree", label="w")
    return [x.output for x in (a, b, c, d, e, f)]


async def go(engine: Engine, repo: Path | None, fn: Any = mixed, **kw: Any) -> RunDetails:
    return await engine.run(META, fn, None, interaction=POLICY, repo=repo, **kw)


@pytest.mark.anyio
async def test_resume_replays_exactly_the_read_only_calls(tmp_path: Path, data_dir: Path) -> None:
    repo = make_repo(tmp_path, bare=True)
    runner = counting_runner()
    engine = Engine(runner, data_dir=data_dir)
    first = await go(engine, repo)
    assert first.result[:3] == ["q#1", "q#2", "r#3"]
    calls_before = len(runner.calls)

    second = await go(engine, repo, resume_from=first.run_id[-7:])
    assert second.resumed_from == first.run_id
    # The Nth identical call replays the Nth recorded result.
    assert second.result[:3] == ["q#1", "q#2", "r#3"]
    assert [a.replayed for a in second.agents] == [True, True, True, False, False, False]
    assert [a.ledger for a in second.agents[:3]] == ["replayed"] * 3
    ran = [c.label for c in runner.calls[calls_before:]]
    assert ran == ["untyped", "flaky", "w"]
    message = build_result_message(second, data_dir / "runs" / second.run_id)
    assert f"Resumed from {first.run_id}: replayed 3/6 agent call(s), ran 3 for real." in message
    assert "- [q] (Read) ok (replayed)" in message

    # A resume of the resume replays the same calls again (replayed results are journaled).
    third = await go(engine, repo, resume_from=second.run_id)
    assert sum(a.replayed for a in third.agents) == 3


@pytest.mark.anyio
async def test_changed_commit_replays_nothing(tmp_path: Path, data_dir: Path) -> None:
    repo = make_repo(tmp_path)
    engine = Engine(counting_runner(), data_dir=data_dir)
    first = await go(engine, repo)
    (repo / "README.md").write_text("# changed\n")
    git(repo, "commit", "-qam", "change")
    second = await go(engine, repo, resume_from=first.run_id)
    assert not any(a.replayed for a in second.agents)
    message = build_result_message(second, data_dir / "runs" / second.run_id)
    assert "replayed 0/6 agent call(s), ran 6 for real." in message


async def readers(wf: Workflow, args: Any) -> Any:
    return [
        (await wf.agent(f"read {i}", agent_type="explorer", label=f"r{i}")).output for i in range(2)
    ]


@pytest.mark.anyio
async def test_local_tree_changes_replay_nothing(tmp_path: Path, data_dir: Path) -> None:
    repo = make_repo(tmp_path)
    engine = Engine(counting_runner(), data_dir=data_dir)
    first = await go(engine, repo, readers, local_root=repo)
    same = await go(engine, repo, readers, local_root=repo, resume_from=first.run_id)
    assert [a.replayed for a in same.agents] == [True, True]
    (repo / "pkg0" / "mod0.py").write_text("VALUE = 'edited'\n")
    edited = await go(engine, repo, readers, local_root=repo, resume_from=first.run_id)
    assert [a.replayed for a in edited.agents] == [False, False]
    (repo / "pkg0" / "mod0.py").write_text("VALUE = 0\n")
    (repo / "notes.txt").write_text("untracked\n")
    untracked = await go(engine, repo, readers, local_root=repo, resume_from=first.run_id)
    assert [a.replayed for a in untracked.agents] == [False, False]


@pytest.mark.anyio
async def test_read_only_call_overlapping_a_writer_is_not_journaled(
    tmp_path: Path, data_dir: Path
) -> None:
    repo = make_repo(tmp_path)
    runner = ScriptedRunner(by_label={"reader": Script(latency=0.2)})
    engine = Engine(runner, data_dir=data_dir)

    async def overlap(wf: Workflow, args: Any) -> Any:
        return await wf.parallel(
            [
                lambda: wf.agent("read", agent_type="explorer", label="reader"),
                lambda: wf.agent("write", agent_type="implementer", isolation="worktree"),
            ]
        )

    first = await go(engine, repo, overlap)
    assert all(a.state == "done" for a in first.agents)
    second = await go(engine, repo, overlap, resume_from=first.run_id)
    assert not any(a.replayed for a in second.agents)


@pytest.mark.anyio
async def test_unreadable_journal_means_a_full_run_with_a_note(data_dir: Path) -> None:
    engine = Engine(counting_runner(), data_dir=data_dir)
    first = await go(engine, None, readers)
    (data_dir / "runs" / first.run_id / "journal.json").write_text("{not json")
    second = await go(engine, None, readers, resume_from=first.run_id)
    assert not any(a.replayed for a in second.agents)
    assert second.resume_note is not None and "unreadable" in second.resume_note
    message = build_result_message(second, data_dir / "runs" / second.run_id)
    assert "Resume: journal unreadable" in message


@pytest.mark.anyio
@pytest.mark.parametrize("ref", ["../../etc", "wf_zz", "/tmp/x", "wf_123456789abc0"])
async def test_resume_from_accepts_only_ids_and_suffixes(data_dir: Path, ref: str) -> None:
    engine = Engine(counting_runner(), data_dir=data_dir)
    await go(engine, None, readers)
    with pytest.raises(RunNotFound):
        await go(engine, None, readers, resume_from=ref)


def test_journal_is_capped_oldest_first(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from bot.engine import journal as journal_module

    monkeypatch.setattr(journal_module, "JOURNAL_CAP", 10 * 1024)
    journal = journal_module.Journal()
    for i in range(40):
        journal.record(f"key{i}", {"output": f"{i}:" + "x" * 1000})
    data = journal.to_json()
    kept = [e["key"] for e in data["entries"]]
    assert data["dropped"] == 40 - len(kept) and 5 <= len(kept) < 10
    assert kept == [f"key{i}" for i in range(40 - len(kept), 40)]
    path = tmp_path / "journal.json"
    path.write_text(json.dumps(data))
    replay = journal_module.Journal.resuming(path)
    assert replay.claim("key39") is not None and replay.claim("key39") is None
    assert replay.claim("key0") is None
    path.write_text('{"version": 99, "entries": []}')
    with pytest.raises(journal_module.JournalError, match="unknown format"):
        journal_module.Journal.resuming(path)


@pytest.mark.anyio
async def test_resuming_a_stopped_run_replays_what_finished(data_dir: Path) -> None:
    runner = ScriptedRunner(by_label={"slow": Script(latency=30)})

    async def steps(wf: Workflow, args: Any) -> Any:
        done = [await wf.agent(f"step {i}", agent_type="explorer", label=f"s{i}") for i in range(2)]
        slow = await wf.agent("the long one", agent_type="explorer", label="slow")
        return [r.ok for r in [*done, slow]]

    async with Engine(runner, data_dir=data_dir) as engine:
        rid = engine.start(META, steps, None, interaction=POLICY, repo=None)
        await runner.wait_for_call("slow")
        stopped = await engine.stop(rid)
    assert stopped.status == "aborted"
    runner.by_label = {}
    engine = Engine(runner, data_dir=data_dir)
    resumed = await engine.run(META, steps, None, interaction=POLICY, repo=None, resume_from=rid)
    assert resumed.result == [True, True, True]
    assert [a.replayed for a in resumed.agents] == [True, True, False]


async def interrupted(wf: Workflow, args: Any) -> Any:
    """Two read-only calls, then (while `args["crash"]`) an error that ends the attempt."""
    first = await wf.agent("read one", agent_type="explorer", label="one")
    second = await wf.agent("read two", agent_type="explorer", label="two")
    if args["crash"]:
        raise RuntimeError("the worker died here")
    third = await wf.agent("read three", agent_type="explorer", label="three")
    return [first.output, second.output, third.output]


@pytest.mark.anyio
async def test_an_interrupted_attempt_is_resumed_under_its_own_run_id(
    tmp_path: Path, data_dir: Path
) -> None:
    repo = make_repo(tmp_path, bare=True)
    runner = counting_runner()
    engine = Engine(runner, data_dir=data_dir)
    run_id = "wf_0123456789ab"
    crashed = await engine.run(
        META, interrupted, {"crash": True}, interaction=POLICY, repo=repo, run_id=run_id
    )
    assert crashed.status == "failed"
    # What it finished was written as it went, not only at the end of the run.
    journal = json.loads((data_dir / "runs" / run_id / "journal.json").read_text())
    assert len(journal["entries"]) == 2

    # The next attempt fails again right after replaying the first call: the journal it
    # leaves must still hold the second, which it never reached.
    def dies_after_one(wf: Workflow, args: Any) -> Any:
        async def body() -> Any:
            await wf.agent("read one", agent_type="explorer", label="one")
            raise RuntimeError("died again")

        return body()

    again = await engine.run(
        META,
        dies_after_one,
        None,
        interaction=POLICY,
        repo=repo,
        run_id=run_id,
        resume_from=run_id,
    )
    assert again.status == "failed" and [a.replayed for a in again.agents] == [True]
    journal = json.loads((data_dir / "runs" / run_id / "journal.json").read_text())
    assert len(journal["entries"]) == 2

    calls = len(runner.calls)
    done = await engine.run(
        META,
        interrupted,
        {"crash": False},
        interaction=POLICY,
        repo=repo,
        run_id=run_id,
        resume_from=run_id,
    )
    assert done.status == "completed" and done.result == ["one#1", "two#2", "three#3"]
    assert [a.replayed for a in done.agents] == [True, True, False]
    assert [c.label for c in runner.calls[calls:]] == ["three"]
