"""The host git wrapper and the worktree guard: drivers disarmed, `.git` checked, quarantine kept."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import pytest

from bot.engine.git import run_git
from bot.engine.worktree import create_worktree, worktree_git_dir
from bot.git import gitguard, hostgit
from bot.git.checkout import Mirrors
from tests.agents.conftest import git, make_repo


def test_driver_names_with_odd_characters_are_all_disarmed(tmp_path: Path) -> None:
    """A subsection holding `=` or dots would be misread from a `-c` argument; the overrides
    travel as GIT_CONFIG_KEY/VALUE pairs instead, and git honours every one of them."""
    root, _ = make_repo(tmp_path / "repo", {"a.txt": "hello\n"})
    marker = tmp_path / "pwned"
    for name in ("x", "a=b", "dotted.name"):
        git(root, "config", f"filter.{name}.clean", f"touch {marker}; cat")
        git(root, "config", f"filter.{name}.required", "true")
        git(root, "config", f"diff.{name}.textconv", f"touch {marker}; cat")
    (root / ".gitattributes").write_text(
        "*.txt filter=x diff=x\n*.md filter=a=b diff=a=b\n*.py filter=dotted.name\n"
    )
    for name, text in (("a.txt", "new\n"), ("b.md", "md\n"), ("c.py", "py\n")):
        (root / name).write_text(text)
    assert run_git(["add", "-A"], root).returncode == 0
    assert b"+new" in run_git(["diff", "--cached"], root).stdout
    assert run_git(["diff", "HEAD"], root).returncode == 0
    assert run_git(["log", "-p", "-1"], root).returncode == 0
    assert not marker.exists()
    # The same repository through plain git runs the driver: the test can fail.
    (root / "a.txt").write_text("again\n")
    git(root, "add", "a.txt")
    assert marker.exists()


def test_subcommands_get_their_switches() -> None:
    assert hostgit.harden_args(["--literal-pathspecs", "diff", "--cached"]) == [
        "--literal-pathspecs",
        "diff",
        "--no-ext-diff",
        "--no-textconv",
        "--ignore-submodules=all",
        "--cached",
    ]
    assert hostgit.harden_args(["status", "-z"])[:2] == ["status", "--ignore-submodules=all"]
    assert hostgit.harden_args(["rev-parse", "HEAD"]) == ["rev-parse", "HEAD"]
    assert hostgit.driver_overrides(b"diff.external\nx\0core.a\nb\0") == []


def test_an_unsealed_worktree_is_checked_against_the_repository(tmp_path: Path) -> None:
    root, sha = make_repo(tmp_path / "repo")
    one = create_worktree(root, base=sha, run_id="wf_555555555555", index=1, label="a")
    two = create_worktree(root, base=sha, run_id="wf_555555555555", index=2, label="b")
    for wt in (one, two):
        gitguard.forget(wt.path)  # as if another process had made them
    assert run_git(["status"], one.path).returncode == 0
    # Pointing one worktree at the other's git directory is caught.
    (one.path / ".git").write_text(f"gitdir: {worktree_git_dir(two.path)}\n")
    with pytest.raises(gitguard.WorktreeQuarantined, match="another worktree"):
        run_git(["status"], one.path)
    assert gitguard.quarantined(one.path)
    assert (one.path.parent / "1.quarantined").is_file()
    assert run_git(["status"], two.path).returncode == 0


def test_unexpected_worktree_config_quarantines(tmp_path: Path) -> None:
    root, sha = make_repo(tmp_path / "repo")
    wt = create_worktree(root, base=sha, run_id="wf_666666666666", index=1, label="a")
    marker = tmp_path / "pwned"
    with open(worktree_git_dir(wt.path) / "config.worktree", "a") as fh:
        fh.write(f"[core]\n\tfsmonitor = touch {marker}\n")
    with pytest.raises(gitguard.WorktreeQuarantined, match=r"core\.fsmonitor"):
        run_git(["status"], wt.path)
    assert not marker.exists()


def test_the_sweep_deletes_a_quarantined_worktree_without_git(tmp_path: Path) -> None:
    data = tmp_path / "data"
    mirror = data / "repos" / "o" / "r.git"
    mirror.parent.mkdir(parents=True)
    source, sha = make_repo(tmp_path / "src")
    git(tmp_path, "clone", "-q", "--bare", str(source), str(mirror))
    wt = create_worktree(mirror, base=sha, run_id="wf_777777777777", index=1, label="a")
    evil = tmp_path / "evil"
    git(tmp_path, "init", "-q", str(evil))
    git(evil, "config", "core.fsmonitor", f"touch {tmp_path}/pwned")
    (wt.path / ".git").write_text(f"gitdir: {evil / '.git'}\n")
    with pytest.raises(gitguard.WorktreeQuarantined):
        gitguard.check(wt.path)
    old = time.time() - 30 * 86400
    os.utime(wt.path, (old, old))

    removed = anyio.run(Mirrors(data, worktree_max_age_days=7).sweep)

    assert removed == [wt.path] and not wt.path.exists()
    assert not (wt.path.parent / "1.quarantined").exists()
    assert not (tmp_path / "pwned").exists()
    assert str(wt.path) not in git(mirror, "worktree", "list")
