"""Running git for the engine: lock-error retries and a per-repository lock around `bot.git.hostgit`."""

from __future__ import annotations

import fcntl
import os
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from bot.git import hostgit

_LOCK_HINTS = (
    "index.lock",
    "config.lock",
    ".lock': File exists",
    "Unable to create",
    "cannot lock",
)
_RETRIES = 6


class GitError(RuntimeError):
    """A git command failed; the message carries the command and git's own words."""

    def __init__(self, args: Sequence[str], returncode: int, stderr: str) -> None:
        self.args_ = tuple(args)
        self.returncode = returncode
        self.stderr = stderr.strip()
        detail = self.stderr.splitlines()[-1] if self.stderr else f"exit status {returncode}"
        super().__init__(f"git {' '.join(args[:2])} failed: {detail}")


def run_git(
    args: Sequence[str],
    cwd: Path,
    *,
    stdin: bytes | None = None,
    check: bool = True,
    retry_locks: bool = False,
    optional_locks: bool = True,
) -> subprocess.CompletedProcess[bytes]:
    """Run `git -C cwd args...` through `bot.git.hostgit`; raise GitError on failure when `check`.

    `retry_locks` retries a few times when git reports that another process holds one of
    its lock files (index.lock, config.lock, a ref lock). In a writing agent's worktree whose
    `.git` was tampered with, raises `bot.git.gitguard.WorktreeQuarantined` and runs nothing.
    """
    extra = {} if optional_locks else {"GIT_OPTIONAL_LOCKS": "0"}
    attempts = _RETRIES if retry_locks else 1
    proc: subprocess.CompletedProcess[bytes] | None = None
    for attempt in range(attempts):
        proc = hostgit.run_sync(args, cwd=cwd, stdin=stdin, extra_env=extra)
        if proc.returncode == 0 or not check:
            return proc
        err = proc.stderr.decode("utf-8", "replace")
        if attempt + 1 < attempts and any(hint in err for hint in _LOCK_HINTS):
            time.sleep(0.02 * (2**attempt))
            continue
        break
    assert proc is not None
    raise GitError(list(args), proc.returncode, proc.stderr.decode("utf-8", "replace"))


def git_out(args: Sequence[str], cwd: Path, *, optional_locks: bool = True) -> str:
    """Stdout of a git command, stripped."""
    proc = run_git(args, cwd, optional_locks=optional_locks)
    return proc.stdout.decode("utf-8", "replace").strip()


def common_dir(repo: Path) -> Path:
    """The git common dir (the bare repository itself, or a work tree's `.git`)."""
    out = git_out(["rev-parse", "--path-format=absolute", "--git-common-dir"], repo)
    return Path(out).resolve()


_thread_locks: dict[str, threading.Lock] = {}
_thread_locks_guard = threading.Lock()


@contextmanager
def repo_lock(common: Path) -> Iterator[None]:
    """Hold the per-repository lock around git operations that take repo-wide locks.

    In-process a threading lock per repository; across processes an exclusive `flock` on
    `<common dir>/bot-engine.lock` (opened afresh each time, so threads also exclude each other).
    """
    key = str(common)
    with _thread_locks_guard:
        lock = _thread_locks.setdefault(key, threading.Lock())
    with lock:
        fd = os.open(common / "bot-engine.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
