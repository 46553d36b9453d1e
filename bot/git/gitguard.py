"""The `.git` file of each writing agent's worktree: recorded at creation, checked before host git.

A linked worktree's `.git` is a one-line file, `gitdir: <common dir>/worktrees/<name>`, and git
run in the worktree takes its config (hooks, fsmonitor, filter drivers) from wherever that line
points. So the engine records the file when it creates the worktree (`seal`), and every host
git command whose directory is inside a worktree first calls `check`: the file must still be a
regular file (not a link, not a directory, not hard-linked) with the recorded content and inode,
and the worktree's own `config.worktree` may hold only the keys the engine and
`git sparse-checkout` write. A worktree made by another process (not sealed here) is checked
against the repository instead: its `.git` must name an admin directory of the common dir
whose `gitdir` file points back at this worktree.

When a check fails the worktree is quarantined: a `<index>.quarantined` file beside it (outside
the worktree, where the sandbox cannot reach) records why, and from then on `check` refuses at
once, so no host git runs there again. The sweep deletes a quarantined worktree without git.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

WORKTREES_DIR = "bot-worktrees"
"""Writing agents' worktrees live at `<common dir>/bot-worktrees/<run id>/<index>`."""
QUARANTINE_SUFFIX = ".quarantined"
_DOTGIT_CAP = 4096
# What `config.worktree` may hold: the engine writes core.bare, core.sparseCheckout and
# bot.base; `git sparse-checkout` may add its cone and sparse-index switches.
_WORKTREE_KEYS = frozenset(
    {"core.bare", "core.sparsecheckout", "core.sparsecheckoutcone", "index.sparse", "bot.base"}
)


class WorktreeQuarantined(RuntimeError):
    """A worktree's `.git` is not what the engine made; nothing runs git in it any more."""

    def __init__(self, worktree: Path, reason: str) -> None:
        self.worktree = worktree
        self.reason = reason
        super().__init__(
            f"the worktree is quarantined: its `.git` {reason}; host git no longer runs in it "
            "and the agent cannot continue"
        )


@dataclass(frozen=True, slots=True)
class Seal:
    """What the engine recorded of a worktree's `.git` file when it created the worktree."""

    content: bytes
    device: int
    inode: int


_seals: dict[str, Seal] = {}
_quarantined: dict[str, str] = {}
_guard = threading.Lock()


def seal(worktree: Path) -> Seal:
    """Record `<worktree>/.git` as it is now (right after `git worktree add`)."""
    path = worktree.resolve()
    content, info = _read_dotgit(path)
    record = Seal(content, info.st_dev, info.st_ino)
    with _guard:
        _seals[str(path)] = record
    return record


def forget(worktree: Path) -> None:
    """Drop the record of a worktree that was removed."""
    with _guard:
        _seals.pop(str(worktree.resolve()), None)


def owning_worktree(directory: Path) -> Path | None:
    """The writing agent's worktree that `directory` is in, or None when it is in none."""
    path = directory.resolve()
    with _guard:
        sealed = set(_seals)
    for candidate in (path, *path.parents):
        if str(candidate) in sealed:
            return candidate
        if candidate.parent.parent.name == WORKTREES_DIR:
            return candidate
    return None


def _marker(worktree: Path) -> Path:
    return worktree.parent / f"{worktree.name}{QUARANTINE_SUFFIX}"


def quarantined(worktree: Path) -> str | None:
    """Why the worktree was quarantined, or None when it was not."""
    path = worktree.resolve()
    with _guard:
        reason = _quarantined.get(str(path))
    if reason is not None:
        return reason
    marker = _marker(path)
    if marker.is_file() and not marker.is_symlink():
        return marker.read_text(encoding="utf-8", errors="replace").strip() or "tampered with"
    return None


def quarantine(worktree: Path, reason: str) -> None:
    """Mark the worktree so that no host git runs in it again, in this process or another."""
    path = worktree.resolve()
    with _guard:
        _quarantined[str(path)] = reason
    with contextlib.suppress(OSError):  # the mark in memory still holds for this process
        _marker(path).write_text(reason + "\n", encoding="utf-8")


def check(worktree: Path) -> None:
    """Raise WorktreeQuarantined unless the worktree's `.git` is still what the engine made."""
    path = worktree.resolve()
    reason = quarantined(path)
    if reason is not None:
        raise WorktreeQuarantined(path, reason)
    problem = _problem(path)
    if problem is not None:
        quarantine(path, problem)
        raise WorktreeQuarantined(path, problem)


def guard(directory: Path) -> Path | None:
    """`check` the worktree that `directory` is in, if any; returns that worktree."""
    worktree = owning_worktree(directory)
    if worktree is not None:
        check(worktree)
    return worktree


def _read_dotgit(worktree: Path) -> tuple[bytes, os.stat_result]:
    fd = os.open(worktree / ".git", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        return os.read(fd, _DOTGIT_CAP), info
    finally:
        os.close(fd)


def _problem(worktree: Path) -> str | None:
    """What is wrong with the worktree's `.git`, or None."""
    dotgit = worktree / ".git"
    try:
        info = os.lstat(dotgit)
    except OSError:
        return "is missing"
    if stat.S_ISLNK(info.st_mode):
        return "was replaced by a symbolic link"
    if not stat.S_ISREG(info.st_mode):
        return "is no longer a regular file"
    if info.st_nlink != 1:
        return "has other hard links"
    try:
        content, opened = _read_dotgit(worktree)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
        return "changed while it was checked"
    with _guard:
        recorded = _seals.get(str(worktree))
    if recorded is not None:
        if content != recorded.content:
            return "was rewritten"
        if (info.st_dev, info.st_ino) != (recorded.device, recorded.inode):
            return "was replaced by another file"
    admin = _admin_dir(content)
    if admin is None:
        return "does not name a git directory"
    if recorded is None:
        problem = _unsealed_problem(worktree, admin)
        if problem is not None:
            return problem
    extra = sorted(set(read_flat_config(admin / "config.worktree")) - _WORKTREE_KEYS)
    if extra:
        return f"leads to a worktree config with unexpected settings ({', '.join(extra[:5])})"
    return None


def _admin_dir(content: bytes) -> Path | None:
    text = content.decode("utf-8", "replace")
    if not text.startswith("gitdir: ") or text.count("\n") > 1:
        return None
    admin = Path(text.removeprefix("gitdir: ").strip())
    return admin if admin.is_absolute() else None


def _unsealed_problem(worktree: Path, admin: Path) -> str | None:
    """A worktree this process did not create: its admin directory must be one of the
    repository's, and must point back at this worktree."""
    common = worktree.parent.parent.parent
    if worktree.parent.parent.name != WORKTREES_DIR:
        return "belongs to no known worktree"
    try:
        if admin.resolve().parent != (common / "worktrees").resolve():
            return "names a git directory outside the repository"
        back = (admin / "gitdir").read_text(encoding="utf-8").strip()
    except OSError:
        return "names a git directory that does not exist"
    if Path(back).resolve() != (worktree / ".git").resolve():
        return "names another worktree's git directory"
    return None


def read_flat_config(path: Path) -> dict[str, str]:
    """`section.key -> value` (lower-case names) from a flat git config file.

    A small reader for the files the engine and `git sparse-checkout` write (no includes, no
    subsections kept); no git process, so reading one costs microseconds. {} when unreadable.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    values: dict[str, str] = {}
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            inner = line[1:-1].strip()
            section = inner.split()[0].lower() if inner else ""
            continue
        key, _, value = line.partition("=")
        values[f"{section}.{key.strip().lower()}"] = value.strip().strip('"')
    return values
