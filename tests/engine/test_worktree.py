"""Sparse worktrees for writing agents: creation, materialize, handoff and safe reclaim."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from bot.engine import Engine, RunDetails, WorkflowMeta, build_result_message
from bot.engine.handoff import NAMES_CAP, PATCH_CAP, collect_handoff, reclaim
from bot.engine.types import AgentInvocation
from bot.engine.workflow import Workflow
from bot.engine.worktree import (
    WorktreeError,
    base_commit,
    create_worktree,
    is_sparse,
    materialize,
    materialize_all,
)
from tests.engine.scripted import POLICY, Script, ScriptedRunner, git, make_repo

META = WorkflowMeta("write", phases=("Fix",))


def files_in(tree: Path) -> list[str]:
    found = (p.relative_to(tree) for p in tree.rglob("*") if p.is_file())
    return sorted(str(p) for p in found if ".git" not in p.parts)


@pytest.mark.parametrize("bare", [False, True], ids=["work-tree", "bare-mirror"])
def test_sparse_worktree_starts_empty_and_materializes_on_demand(
    tmp_path: Path, bare: bool
) -> None:
    repo = make_repo(tmp_path, bare=bare)
    head = git(repo, "rev-parse", "HEAD")
    wt = create_worktree(repo, base="HEAD", run_id="wf_0123456789ab", index=3, label="Fix: A/B!")
    assert wt.branch == "bot/fix-a-b-6789ab-3" and wt.base == head
    assert "bot-worktrees" in wt.path.parts
    assert files_in(wt.path) == []
    assert is_sparse(wt.path) and base_commit(wt.path) == head
    assert git(wt.path, "status", "--porcelain") == ""  # not-yet-materialized is not "deleted"

    materialize(wt.path, ["pkg0/mod0.py", "missing.py", "../outside", "/etc/passwd", "pkg1"])
    assert files_in(wt.path) == ["pkg0/mod0.py", "pkg1/mod1.py", "pkg1/mod3.py"]
    assert (wt.path / "pkg0/mod0.py").read_text() == "VALUE = 0\n"
    assert git(wt.path, "status", "--porcelain") == ""

    # A new file can be added and committed while still sparse.
    (wt.path / "new.txt").write_text("hello\n")
    git(wt.path, "add", "-A")
    git(wt.path, "commit", "-q", "-m", "add new")
    assert git(wt.path, "status", "--porcelain") == ""
    assert git(wt.path, "show", "--name-status", "--format=", "HEAD") == "A\tnew.txt"

    # A materialized file that is edited is a change, and commits like any other.
    (wt.path / "pkg0/mod0.py").write_text("VALUE = 'edited'\n")
    assert git(wt.path, "status", "--porcelain") == "M pkg0/mod0.py"
    git(wt.path, "commit", "-q", "-am", "edit")
    assert git(wt.path, "show", "--name-only", "--format=", "HEAD") == "pkg0/mod0.py"
    assert git(wt.path, "status", "--porcelain") == ""
    assert (wt.path / "pkg0/mod0.py").read_text() == "VALUE = 'edited'\n"

    # Deleting a materialized file is a deletion, not a skipped entry.
    (wt.path / "pkg1/mod3.py").unlink()
    assert git(wt.path, "status", "--porcelain") == "D pkg1/mod3.py"
    git(wt.path, "checkout", "--", "pkg1/mod3.py")

    # Writing a tracked file that was never materialized still counts as a change.
    (wt.path / "README.md").write_text("overwritten\n")
    assert git(wt.path, "status", "--porcelain") == "M README.md"

    materialize_all(wt.path)
    assert not is_sparse(wt.path)
    assert len(files_in(wt.path)) == 7  # 5 modules, README, new.txt
    assert (wt.path / "README.md").read_text() == "overwritten\n"  # local change kept
    materialize(wt.path, ["pkg0/mod0.py"])  # a no-op once the tree is whole
    # The main repository is untouched.
    assert git(repo, "rev-parse", "HEAD") == head


def test_creation_errors_are_clear(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    with pytest.raises(WorktreeError, match="cannot resolve"):
        create_worktree(repo, base="nope", run_id="wf_0123456789ab", index=1, label="x")
    with pytest.raises(WorktreeError, match="not a git repository") as info:
        create_worktree(
            tmp_path / "data", base="HEAD", run_id="wf_0123456789ab", index=1, label="x"
        )
    assert "['" not in str(info.value)  # git's own words, not a Python list


def test_handoff_caps_the_patch(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    wt = create_worktree(repo, base="HEAD", run_id="wf_0123456789ab", index=1, label="big")
    (wt.path / "big.txt").write_text("line of text\n" * 60_000)
    git(wt.path, "add", "-A")
    git(wt.path, "commit", "-q", "-m", "big")
    record = collect_handoff(wt)
    assert record.patch_truncated and len(record.patch.encode()) < PATCH_CAP + 200
    assert "[patch truncated at 512 KiB" in record.patch
    assert record.numstat.startswith("60000\t0\tbig.txt")
    cleanup = reclaim(wt, record)
    assert cleanup.removed and not cleanup.branch_deleted and cleanup.commits == 1


def test_handoff_caps_the_names_of_stray_files(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    wt = create_worktree(repo, base="HEAD", run_id="wf_0123456789ab", index=1, label="many")
    (wt.path / "out").mkdir()
    for i in range(NAMES_CAP + 5):
        (wt.path / "out" / f"f{i}.txt").write_text("x")
    saved = collect_handoff(wt).as_dict()
    assert len(saved["untracked"]) == NAMES_CAP and saved["untracked_total"] == NAMES_CAP + 5
    assert saved["ignored"] == [] and saved["ignored_total"] == 0


def commit_change(call: AgentInvocation) -> None:
    tree = call.workspace.worktree
    assert tree is not None
    materialize(tree, ["pkg0/mod0.py"])
    (tree / "pkg0/mod0.py").write_text("VALUE = 100\n")
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "-m", f"change by {call.label}")


def read_only(call: AgentInvocation) -> None:
    assert call.workspace.worktree is not None
    materialize(call.workspace.worktree, ["README.md"])


def leave_dirty(call: AgentInvocation) -> None:
    tree = call.workspace.worktree
    assert tree is not None
    materialize(tree, ["pkg1/mod1.py"])
    (tree / "pkg1/mod1.py").write_text("VALUE = 'dirty'\n")


def leave_untracked(call: AgentInvocation) -> None:
    assert call.workspace.worktree is not None
    (call.workspace.worktree / "scratch.txt").write_text("notes\n")


def leave_ignored(call: AgentInvocation) -> None:
    tree = call.workspace.worktree
    assert tree is not None
    (tree / ".gitignore").write_text("*.log\n")
    git(tree, "add", ".gitignore")
    git(tree, "commit", "-q", "-m", "ignore logs")
    (tree / "build.log").write_text("output\n")


def detach(call: AgentInvocation) -> None:
    assert call.workspace.worktree is not None
    git(call.workspace.worktree, "checkout", "-q", "--detach")


ACTIONS: dict[str, Callable[[AgentInvocation], None]] = {
    "committer": commit_change,
    "reader": read_only,
    "dirty": leave_dirty,
    "untracked": leave_untracked,
    "ignored": leave_ignored,
    "detached": detach,
}


async def writers(wf: Workflow, args: Any) -> Any:
    wf.phase("Fix")
    results = await wf.parallel(
        [
            lambda name=name: wf.agent(
                f"work as {name}", agent_type="implementer", isolation="worktree", label=name
            )
            for name in args
        ]
    )
    return [r.ok for r in results], [r.branch for r in results]


async def run_writers(repo: Path, data_dir: Path, names: list[str]) -> RunDetails:
    runner = ScriptedRunner(rule=lambda c: Script(action=ACTIONS.get(c.label)))
    engine = Engine(runner, data_dir=data_dir, concurrency=16)
    details = await engine.run(META, writers, names, interaction=POLICY, repo=repo)
    assert all(call.workspace.branch for call in runner.calls)
    return details


@pytest.mark.anyio
@pytest.mark.parametrize("bare", [False, True], ids=["work-tree", "bare-mirror"])
async def test_worktree_agents_end_in_the_right_states(
    tmp_path: Path, data_dir: Path, bare: bool
) -> None:
    repo = make_repo(tmp_path, bare=bare)
    base = git(repo, "rev-parse", "HEAD")
    names = list(ACTIONS)
    details = await run_writers(repo, data_dir, names)
    oks, result_branches = details.result
    assert details.status == "completed" and oks == [True] * len(names)
    by = {a.label: a for a in details.agents}
    # A result names its agent's branch only when the branch was kept for its commits.
    kept_for_commits = {label: by[label].worktree_branch for label in ("committer", "ignored")}
    assert dict(zip(names, result_branches, strict=True)) == {
        name: kept_for_commits.get(name) for name in names
    }
    branches = set(
        git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/bot/").split()
    )

    committed = by["committer"]
    assert committed.worktree_path is None  # reclaimed
    assert committed.worktree_branch in branches
    assert committed.worktree_cleanup is not None and committed.worktree_cleanup["commits"] == 1
    assert git(repo, "show", f"{committed.worktree_branch}:pkg0/mod0.py") == "VALUE = 100"

    reader = by["reader"]
    assert reader.worktree_path is None and reader.worktree_branch not in branches
    assert reader.worktree_cleanup is not None and reader.worktree_cleanup["branch_deleted"]

    for label, reason in [
        ("dirty", "uncommitted changes"),
        ("untracked", "untracked files"),
        ("detached", "detached HEAD"),
        ("ignored", "ignored files"),
    ]:
        kept = by[label]
        assert kept.worktree_path is not None and kept.worktree_path.endswith(f"/{kept.index}")
        assert kept.worktree_cleanup is not None and kept.worktree_cleanup["reason"] == reason
    assert by["dirty"].worktree_branch in branches  # the branch stays with its directory
    kept_dirs = [by[label].worktree_path for label in ("dirty", "untracked", "detached")]
    assert all(is_dir(d) for d in kept_dirs)

    run_dir = data_dir / "runs" / details.run_id
    handoff = json.loads((run_dir / "worktrees" / f"agent-{committed.index}.json").read_text())
    assert handoff["base"] == base and handoff["commits"] == 1
    assert handoff["branch"] == committed.worktree_branch
    assert "-VALUE = 0\n+VALUE = 100" in handoff["patch"]
    assert handoff["name_status"].strip() == "M\tpkg0/mod0.py"
    dirty = json.loads((run_dir / "worktrees" / f"agent-{by['dirty'].index}.json").read_text())
    assert dirty["uncommitted_changes"] and "VALUE = 'dirty'" in dirty["patch"]
    untracked = json.loads(
        (run_dir / "worktrees" / f"agent-{by['untracked'].index}.json").read_text()
    )
    assert untracked["untracked"] == ["scratch.txt"]

    message = build_result_message(details, run_dir)
    assert f"- [committer] 1 commit on {committed.worktree_branch}; handoff" in message
    assert "- [reader] no commits; empty branch deleted" in message
    assert "(uncommitted changes)" in message and "(untracked files)" in message


@pytest.mark.anyio
async def test_sixteen_concurrent_worktree_agents_all_succeed(
    tmp_path: Path, data_dir: Path
) -> None:
    repo = make_repo(tmp_path, bare=True)
    names = [f"committer-{i}" for i in range(16)]
    # Every agent waits until two are in flight at once: that happens only if the engine lets
    # worktree agents overlap (otherwise the fail_after below ends the test).
    overlap = anyio.Event()

    def rule(call: AgentInvocation) -> Script:
        if runner.in_flight >= 2:
            overlap.set()
        return Script(hold=overlap, action=commit_change)

    runner = ScriptedRunner(rule=rule)
    engine = Engine(runner, data_dir=data_dir, concurrency=16)
    with anyio.fail_after(120):
        details = await engine.run(META, writers, names, interaction=POLICY, repo=repo)
    oks, result_branches = details.result
    assert oks == [True] * 16
    assert runner.max_in_flight > 1
    branches = git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/bot/").split()
    assert len(branches) == 16 and sorted(result_branches) == sorted(branches)
    assert all(a.worktree_path is None for a in details.agents)
    assert git(repo, "worktree", "list").count("\n") == 0  # only the main entry is left


@pytest.mark.anyio
async def test_worktree_creation_failure_fails_only_that_agent(
    tmp_path: Path, data_dir: Path
) -> None:
    repo = make_repo(tmp_path)
    engine = Engine(ScriptedRunner(), data_dir=data_dir)

    async def wf(wf: Workflow, args: Any) -> Any:
        common = Path(git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir"))
        (common / "bot-worktrees").write_text("a file where the folder should be\n")
        blocked = await wf.agent("x", agent_type="implementer", isolation="worktree")
        fine = await wf.agent("y", agent_type="explorer")
        return [blocked.ok, blocked.error, fine.ok]

    details = await engine.run(META, wf, None, interaction=POLICY, repo=repo)
    assert details.status == "completed"
    assert details.result[0] is False and "cannot create worktree" in details.result[1]
    assert details.result[2] is True


def test_leftover_worktree_path_gets_a_fresh_one(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    first = create_worktree(repo, base="HEAD", run_id="wf_0123456789ab", index=1, label="a")
    second = create_worktree(repo, base="HEAD", run_id="wf_0123456789ab", index=1, label="a")
    assert first.path != second.path and first.branch != second.branch
    assert second.path.name.startswith("1-")


def is_dir(path: str | None) -> bool:
    return path is not None and Path(path).is_dir()


def test_bare_mirror_config_stays_bare(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, bare=True)
    create_worktree(repo, base="HEAD", run_id="wf_0123456789ab", index=1, label="x")
    out = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--is-bare-repository"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "true"


CREATE_MANY = """
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from bot.engine.worktree import create_worktree

repo, run_id = Path(sys.argv[1]), sys.argv[2]
with ThreadPoolExecutor(4) as pool:
    made = list(pool.map(
        lambda n: create_worktree(repo, base="HEAD", run_id=run_id, index=n, label="p"),
        range(4),
    ))
print(len(made))
"""


def test_worktrees_from_several_processes_at_once(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, bare=True)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CREATE_MANY, str(repo), f"wf_00000000000{p}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in range(3)
    ]
    outputs = [proc.communicate(timeout=60) for proc in procs]
    assert [out.strip() for out, _ in outputs] == ["4", "4", "4"], outputs
    listed = git(repo, "worktree", "list", "--porcelain").count("worktree ")
    assert listed == 1 + 12
    assert len(git(repo, "for-each-ref", "refs/heads/bot/").splitlines()) == 12
