"""Repository-relative paths for agent tools: anything that could escape is refused.

`resolve_in` follows links inside the tree and refuses any location outside it;
`resolve_writable` also refuses any location inside any `.git` (the worktree's own `.git`
file, a nested repository's `.git` directory). Writes then go through `write_no_follow`, which
opens every directory on the way and the file itself without following links, so a link
swapped in after the check cannot send the write anywhere else.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO planted where a file was expected fails at once instead of hanging.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class ToolError(Exception):
    """A tool call failed in a way the model can act on; the message goes back to it."""


def check_path(raw: object, *, allow_root: bool = False) -> str:
    """A normalized repository-relative path, or ToolError for anything that could escape."""
    if raw is None or raw == "":
        if allow_root:
            return ""
        raise ToolError("a path is required")
    if not isinstance(raw, str):
        raise ToolError("the path must be a string")
    if "\0" in raw or "\n" in raw:
        raise ToolError("the path contains a NUL byte or a newline")
    if raw.startswith(("/", "\\")) or (len(raw) > 1 and raw[1] == ":"):
        raise ToolError(
            f"absolute paths are refused: {raw!r}; use a path relative to the repository"
        )
    parts = [p for p in raw.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ToolError(f"paths with `..` are refused: {raw!r}")
    if ".git" in parts:
        raise ToolError("`.git` is git's own data, not part of the repository's files")
    path = "/".join(parts)
    if not path and not allow_root:
        raise ToolError("a file path is required")
    return path


def in_dotgit(rel: str) -> bool:
    """True when a repository-relative path is, or is inside, any `.git`."""
    return any(part.casefold() == ".git" for part in rel.split("/"))


def resolve_in(root: Path, rel: str) -> Path:
    """`root/rel` with symlinks resolved; ToolError when that leads outside `root`."""
    base = root.resolve()
    target = (base / rel).resolve()
    if target != base and base not in target.parents:
        raise ToolError(f"{rel!r} leads outside the repository (through a symbolic link)")
    return target


def resolve_writable(root: Path, rel: str) -> str:
    """Where a write to `rel` lands, as a path relative to `root` with links inside the tree
    followed; ToolError when that is outside `root` or inside any `.git`."""
    target = resolve_in(root, rel).relative_to(root.resolve()).as_posix()
    if in_dotgit(target):
        raise ToolError(f"{rel!r} leads into `.git`, git's own data; it is never written")
    if target == ".":
        raise ToolError(f"{rel!r} is the repository itself, not a file")
    return target


def _walk(root: Path, parts: list[str], *, create: bool) -> int:
    """An open descriptor of the directory `root/parts...`, reached without following links."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in parts:
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
    except OSError:
        os.close(fd)
        raise
    return fd


def _no_follow_error(rel: str, exc: OSError) -> ToolError:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        return ToolError(f"{rel} leads through a symbolic link or a non-directory; not written")
    if exc.errno == errno.ENXIO:
        return ToolError(f"{rel} is not a regular file")
    return ToolError(f"cannot write {rel}: {exc.strerror or exc}")


def _checked_parts(rel: str) -> list[str]:
    parts = rel.split("/")
    if not rel or any(p in ("", ".", "..") for p in parts) or in_dotgit(rel):
        raise ToolError(f"{rel!r} is not a writable repository path")
    return parts


def write_no_follow(root: Path, rel: str, data: bytes) -> bool:
    """Write `data` to `root/rel` (parents made as needed) without following any link;
    True when the file existed. ToolError when a link or something odd is in the way."""
    parts = _checked_parts(rel)
    try:
        fd = _walk(root, parts[:-1], create=True)
    except OSError as exc:
        raise _no_follow_error(rel, exc) from exc
    try:
        try:
            info = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            existed = False
        else:
            if not stat.S_ISREG(info.st_mode):
                kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a regular file"
                raise ToolError(f"{rel} is {kind}; not written")
            existed = True
        try:
            out = os.open(parts[-1], _WRITE_FLAGS, 0o666, dir_fd=fd)
        except OSError as exc:
            raise _no_follow_error(rel, exc) from exc
    finally:
        os.close(fd)
    try:
        if not stat.S_ISREG(os.fstat(out).st_mode):
            raise ToolError(f"{rel} is not a regular file; not written")
        os.ftruncate(out, 0)
        view = memoryview(data)
        while view:
            view = view[os.write(out, view) :]
    finally:
        os.close(out)
    return existed


def read_no_follow(root: Path, rel: str, limit: int) -> bytes:
    """Up to `limit` bytes of the regular file `root/rel`, reached without following links."""
    parts = _checked_parts(rel)
    try:
        fd = _walk(root, parts[:-1], create=False)
        try:
            handle = os.open(parts[-1], _READ_FLAGS, dir_fd=fd)
        finally:
            os.close(fd)
    except FileNotFoundError as exc:
        raise ToolError(f"no such file: {rel}") from exc
    except OSError as exc:
        raise _no_follow_error(rel, exc) from exc
    try:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            raise ToolError(f"{rel} is not a regular file")
        chunks: list[bytes] = []
        left = limit
        while left > 0:
            chunk = os.read(handle, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(handle)


def is_git_data(name: str) -> bool:
    """True for a path component that is git's own data: `.git` (a directory or a file)."""
    return name.lower() == ".git"


def resolve_readable(root: Path, rel: str) -> Path:
    """`root/rel` with symlinks resolved, for reading: ToolError when that leads outside `root`
    or into any `.git`, whose config may hold a token in a remote URL."""
    target = resolve_in(root, rel)
    if any(is_git_data(part) for part in target.relative_to(root.resolve()).parts):
        raise ToolError(
            f"{rel!r} leads into `.git` (through a symbolic link): git's own data is not shown"
        )
    return target
