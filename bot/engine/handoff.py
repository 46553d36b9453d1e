"""The end of a writing agent's worktree: record what it did, then reclaim it only when safe.

A quarantined worktree (its `.git` was tampered with: see `bot.git.gitguard`) is neither inspected
nor reclaimed with git: its record says why, and it stays where it is until the sweep deletes it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.engine.git import GitError, repo_lock, run_git
from bot.engine.worktree import Worktree
from bot.git import gitguard
from bot.git.gitguard import WorktreeQuarantined

PATCH_CAP = 512 * 1024
NAMES_CAP = 1000  # untracked or ignored names kept in the record (a build can leave many)


@dataclass(frozen=True, slots=True)
class Handoff:
    """What a worktree agent left behind, as written to `worktrees/agent-N.json`."""

    base: str
    head: str | None
    branch: str
    detached: bool
    descends: bool
    commits: int
    patch: str
    patch_truncated: bool
    numstat: str
    name_status: str
    untracked: tuple[str, ...]
    ignored: tuple[str, ...]
    dirty: bool
    path: str
    quarantined: str | None = None
    """Why the worktree was quarantined (then nothing else was read from it), or None."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "quarantined": self.quarantined,
            "base": self.base,
            "head": self.head,
            "branch": self.branch,
            "detached": self.detached,
            "descends_from_base": self.descends,
            "commits": self.commits,
            "patch": self.patch,
            "patch_truncated": self.patch_truncated,
            "numstat": self.numstat,
            "name_status": self.name_status,
            "untracked": list(self.untracked[:NAMES_CAP]),
            "untracked_total": len(self.untracked),
            "ignored": list(self.ignored[:NAMES_CAP]),
            "ignored_total": len(self.ignored),
            "uncommitted_changes": self.dirty,
            "worktree": self.path,
        }


@dataclass(frozen=True, slots=True)
class Cleanup:
    """What happened to the worktree and its branch after the handoff was written."""

    removed: bool
    branch_deleted: bool
    reason: str | None
    commits: int
    branch: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "removed": self.removed,
            "branch_deleted": self.branch_deleted,
            "reason": self.reason,
            "commits": self.commits,
            "branch": self.branch,
        }


def _text(args: list[str], cwd: Path) -> str | None:
    proc = run_git(args, cwd, check=False, optional_locks=False)
    if proc.returncode != 0:
        return None
    return proc.stdout.decode("utf-8", "replace")


def _parse_status(out: str | None) -> tuple[bool, tuple[str, ...], tuple[str, ...]]:
    """(tracked changes?, untracked names, ignored names) from `git status --porcelain -z`."""
    if out is None:
        return True, (), ()
    dirty = False
    untracked: list[str] = []
    ignored: list[str] = []
    tokens = iter(out.split("\0"))
    for token in tokens:
        if len(token) < 4:
            continue
        code, name = token[:2], token[3:]
        if code == "??":
            untracked.append(name)
        elif code == "!!":
            ignored.append(name)
        else:
            dirty = True
            if code[0] in "RC":
                next(tokens, None)  # the rename's source path
    return dirty, tuple(untracked), tuple(ignored)


def collect_handoff(wt: Worktree) -> Handoff:
    """Inspect the worktree: head, branch, patch against base (capped), stats, stray files.

    A worktree whose `.git` is not the one the engine made is quarantined and not inspected.
    """
    path = wt.path
    try:
        gitguard.check(path)
    except WorktreeQuarantined as exc:
        return _quarantined(wt, str(exc))
    head = (_text(["rev-parse", "--verify", "HEAD"], path) or "").strip() or None
    branch_ref = (_text(["symbolic-ref", "-q", "HEAD"], path) or "").strip()
    detached = not branch_ref
    branch = branch_ref.removeprefix("refs/heads/") if branch_ref else wt.branch
    descends, commits = head == wt.base, 0
    if head is not None and head != wt.base:
        check = run_git(["merge-base", "--is-ancestor", wt.base, head], path, check=False)
        descends = check.returncode == 0
        count = _text(["rev-list", "--count", f"{wt.base}..{head}"], path)
        commits = int(count.strip()) if count and count.strip().isdigit() else 0
    status = _text(
        ["status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignored=matching"], path
    )
    dirty, untracked, ignored = _parse_status(status)
    patch, truncated, numstat, name_status = "", False, "", ""
    if dirty or head != wt.base:  # an untouched worktree has nothing to diff
        proc = run_git(
            ["diff", "--no-color", "--no-ext-diff", "--binary", wt.base],
            path,
            check=False,
            optional_locks=False,
        )
        raw = proc.stdout if proc.returncode == 0 else b""
        truncated = len(raw) > PATCH_CAP
        patch = raw[:PATCH_CAP].decode("utf-8", "replace")
        if truncated:
            patch += f"\n[patch truncated at {PATCH_CAP // 1024} KiB of {len(raw)} bytes]\n"
        numstat = _text(["diff", "--numstat", wt.base], path) or ""
        name_status = _text(["diff", "--name-status", wt.base], path) or ""
    return Handoff(
        base=wt.base,
        head=head,
        branch=branch,
        detached=detached,
        descends=descends,
        commits=commits,
        patch=patch,
        patch_truncated=truncated,
        numstat=numstat,
        name_status=name_status,
        untracked=untracked,
        ignored=ignored,
        dirty=dirty,
        path=str(path),
    )


def _quarantined(wt: Worktree, reason: str) -> Handoff:
    return Handoff(
        base=wt.base,
        head=None,
        branch=wt.branch,
        detached=False,
        descends=False,
        commits=0,
        patch="",
        patch_truncated=False,
        numstat="",
        name_status="",
        untracked=(),
        ignored=(),
        dirty=True,
        path=str(wt.path),
        quarantined=reason,
    )


def _keep_reason(record: Handoff, exists: bool) -> str | None:
    if record.quarantined:
        return record.quarantined
    if not exists:
        return "worktree directory is missing"
    if record.head is None:
        return "HEAD cannot be read"
    if record.detached:
        return "detached HEAD"
    if not record.descends:
        return "branch does not descend from base"
    if record.dirty:
        return "uncommitted changes"
    if record.untracked:
        return "untracked files"
    if record.ignored:
        return "ignored files"
    return None


def reclaim(wt: Worktree, record: Handoff) -> Cleanup:
    """Remove the worktree only when clean, on its branch and descending from base (never
    forced); delete the branch only when it has no commits beyond base. Blocking."""
    reason = _keep_reason(record, wt.path.is_dir())
    if reason is not None:
        return Cleanup(False, False, reason, record.commits, record.branch)
    removed = False
    deleted = False
    try:
        gitguard.check(wt.path)
        with repo_lock(wt.common_dir):
            run_git(["worktree", "remove", str(wt.path)], wt.common_dir, retry_locks=True)
            removed = True
            gitguard.forget(wt.path)
            if record.commits == 0 and record.head == wt.base:
                run_git(
                    ["update-ref", "-d", f"refs/heads/{record.branch}", wt.base],
                    wt.common_dir,
                    retry_locks=True,
                )
                deleted = True
    except (GitError, WorktreeQuarantined) as exc:
        return Cleanup(removed, deleted, str(exc), record.commits, record.branch)
    with contextlib.suppress(OSError):
        wt.path.parent.rmdir()  # the run's folder, once its last worktree is gone
    return Cleanup(removed, deleted, None, record.commits, record.branch)
