"""Leftovers of writing agents whose worker died: cleared for ended runs, kept for live ones."""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio

from bot.engine.worktree import create_worktree
from bot.runs.leftovers import clear_interrupted, sweep_leftovers
from bot.store.sqlite import Store
from tests.fakes.gitrepo import commit_files, init_bare_repo


def branches(git_dir: Path) -> list[str]:
    out = subprocess.run(
        ["git", f"--git-dir={git_dir}", "for-each-ref", "--format=%(refname:short)"],
        capture_output=True,
        text=True,
        check=True,
    )
    return sorted(out.stdout.split())


def test_the_sweep_clears_ended_and_unknown_runs_and_keeps_running_ones(tmp_path: Path) -> None:
    mirror = init_bare_repo(tmp_path / "repos" / "octo" / "hello.git", {"a.txt": "a\n"})
    commit_files(mirror, "main", {}, "Start")
    store = Store.open(tmp_path / "bot.sqlite3")
    runs = {}
    for name, status in (("ended", "succeeded"), ("live", "running")):
        run = store.create_run(
            delivery_id=name,
            repo="octo/hello",
            target_kind="issue",
            number=1,
            workflow="fix",
            mode="webhook",
        )
        store.update_run(run.id, status=status)
        runs[name] = run.id
    runs["unknown"] = "wf_0000000000aa"
    for run_id in runs.values():
        create_worktree(mirror, base="main", run_id=run_id, index=1, label="implement")
    assert len(branches(mirror)) == 4

    cleared = anyio.run(sweep_leftovers, tmp_path / "repos", store)
    assert sorted(cleared) == sorted([runs["ended"], runs["unknown"]])
    left = [p.name for p in (mirror / "bot-worktrees").iterdir()]
    assert left == [runs["live"]]
    assert branches(mirror) == sorted(["main", f"bot/implement-{runs['live'][-6:]}-1"])

    # The live run's own next attempt clears it.
    anyio.run(clear_interrupted, mirror, runs["live"])
    assert not any((mirror / "bot-worktrees").iterdir())
    assert branches(mirror) == ["main"]
    store.close()
