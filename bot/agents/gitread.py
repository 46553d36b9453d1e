"""Read a commit straight from a git object database: no checkout, so no path can escape."""

from __future__ import annotations

import contextlib
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import Process

from bot.agents.large_files import WHOLE_READ_LIMIT, Sink
from bot.git import hostgit
from bot.git.gitguard import WorktreeQuarantined

_REV = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/~^@{}+-]{0,199}$")


class GitError(Exception):
    """A git command failed; the message is fit to show to an agent."""


def check_rev(rev: str) -> str:
    """Refuse anything but a plain revision (no options, no ranges of paths, no spaces)."""
    if not _REV.match(rev):
        raise GitError(f"not a valid revision: {rev!r}")
    return rev


@dataclass(frozen=True, slots=True)
class GitOutput:
    code: int
    stdout: bytes
    stderr: bytes


async def run_git(
    args: Sequence[str], *, cwd: Path | None = None, git_dir: Path | None = None
) -> GitOutput:
    """Run one git command through `bot.git.hostgit` and collect its output; GitError when the
    worktree it would run in is quarantined."""
    try:
        done = await hostgit.run_async(args, cwd=cwd, git_dir=git_dir)
    except WorktreeQuarantined as exc:
        raise GitError(str(exc)) from exc
    return GitOutput(done.returncode, done.stdout, done.stderr)


@dataclass(frozen=True, slots=True)
class Blob:
    kind: str  # "blob", "tree", "commit", "symlink"
    size: int
    data: bytes
    whole: bool = True
    """False for a blob too large to read whole: `data` is empty; `stream()` reads it."""


class ObjectReader:
    """One `git cat-file --batch` process kept open for an agent's whole run."""

    def __init__(self, git_dir: Path, commit: str) -> None:
        self.git_dir = git_dir
        self.commit = commit
        self._process: Process | None = None
        self._lock = anyio.Lock()
        self._buffer = bytearray()
        self._listing: list[tuple[str, str, int]] | None = None
        self._index: dict[str, tuple[str, int]] | None = None
        self._dirs: set[str] = set()

    async def aclose(self) -> None:
        if self._process is not None:
            process, self._process = self._process, None
            with anyio.CancelScope(shield=True):
                if process.stdin is not None:
                    await process.stdin.aclose()
                with anyio.move_on_after(2):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
                await process.aclose()

    async def _start(self) -> Process:
        if self._process is None:
            self._process = await hostgit.open_async(["cat-file", "--batch"], git_dir=self.git_dir)
        return self._process

    async def _read_exactly(self, process: Process, count: int) -> bytes:
        assert process.stdout is not None
        while len(self._buffer) < count:
            self._buffer.extend(await process.stdout.receive())
        data = bytes(self._buffer[:count])
        del self._buffer[:count]
        return data

    async def _read_line(self, process: Process) -> bytes:
        assert process.stdout is not None
        while b"\n" not in self._buffer:
            self._buffer.extend(await process.stdout.receive())
        index = self._buffer.index(b"\n")
        line = bytes(self._buffer[:index])
        del self._buffer[: index + 1]
        return line

    async def entries(self) -> list[tuple[str, str, int]]:
        """Every file of the commit as (path, mode, size), from `git ls-tree -r -l`."""
        if self._listing is None:
            out = await run_git(
                ["ls-tree", "-r", "-l", "-z", "--full-tree", self.commit], git_dir=self.git_dir
            )
            if out.code != 0:
                raise GitError(f"cannot list commit {self.commit}: {out.stderr.decode().strip()}")
            listing: list[tuple[str, str, int]] = []
            for record in out.stdout.split(b"\0"):
                if not record:
                    continue
                meta, _, path = record.partition(b"\t")
                fields = meta.split()
                size = int(fields[3]) if len(fields) > 3 and fields[3].isdigit() else 0
                listing.append((path.decode("utf-8", "replace"), fields[0].decode(), size))
            self._listing = listing
        return self._listing

    async def _index_map(self) -> dict[str, tuple[str, int]]:
        if self._index is None:
            entries = await self.entries()
            self._index = {path: (mode, size) for path, mode, size in entries}
            for path, _, _ in entries:
                parts = path.split("/")[:-1]
                for i in range(len(parts)):
                    self._dirs.add("/".join(parts[: i + 1]))
        return self._index

    async def read(self, path: str, *, max_bytes: int = WHOLE_READ_LIMIT) -> Blob | None:
        """The object at `path` in the commit, or None when there is none.

        A blob over `max_bytes` is not read: its size is known from the listing (and checked
        again in the `--batch` header) before any content is, and it comes back not `whole`.
        """
        index = await self._index_map()
        entry = index.get(path)
        if entry is None:
            return Blob("tree", 0, b"") if path in self._dirs else None
        mode, size = entry
        if mode == "160000":
            return Blob("submodule", 0, b"")
        if size > max_bytes:
            return Blob("blob", size, b"", whole=False)
        async with self._lock:
            process = await self._start()
            try:
                header = await self._request(process, path)
                if header is None:
                    return None
                size = int(header[2])
                if size > max_bytes:  # the listing was out of date: never read it
                    await self._restart()
                    return Blob(header[1].decode(), size, b"", whole=False)
                data = await self._read_exactly(process, size + 1)
            except BaseException as exc:
                await self._restart()  # interrupted mid-answer: the pipe is out of step
                if isinstance(exc, Exception) and not isinstance(exc, GitError):
                    raise GitError(
                        f"reading {path} failed ({type(exc).__name__}); try again"
                    ) from exc
                raise
        kind = "symlink" if mode == "120000" else header[1].decode()
        return Blob(kind, size, data[:-1])

    async def stream(self, path: str, sink: Sink) -> None:
        """Feed the blob at `path` to `sink` in chunks until it has had enough or the blob
        ends; what it does not want is never read (the pipe is restarted instead)."""
        async with self._lock:
            process = await self._start()
            assert process.stdout is not None
            try:
                header = await self._request(process, path)
                left = int(header[2]) + 1 if header else 0  # the content, then git's newline
                while left > 0:
                    if not self._buffer:
                        self._buffer.extend(await process.stdout.receive())
                    take = bytes(self._buffer[:left])
                    del self._buffer[: len(take)]
                    left -= len(take)
                    piece = take[:-1] if left == 0 else take
                    if piece and not sink(piece) and left > 0:
                        await self._restart()
                        return
            except BaseException as exc:
                await self._restart()  # interrupted mid-answer: the pipe is out of step
                if isinstance(exc, Exception) and not isinstance(exc, GitError):
                    raise GitError(
                        f"reading {path} failed ({type(exc).__name__}); try again"
                    ) from exc
                raise
        if header is None:
            raise GitError(f"no such file in the commit: {path}")

    async def _request(self, process: Process, path: str) -> list[bytes] | None:
        """Ask `--batch` for `path`; its header (`<oid> <type> <size>`), None when missing."""
        assert process.stdin is not None
        await process.stdin.send(f"{self.commit}:{path}\n".encode())
        header = (await self._read_line(process)).split()
        if len(header) < 3 or header[-1] == b"missing":
            return None
        return header

    async def _restart(self) -> None:
        """Leave an answer unread (a tool timeout, cancellation, a dead process, or a blob not
        wanted): the pipe is out of step, so a fresh process starts next time."""
        self._buffer.clear()
        if self._process is not None and self._process.returncode is None:
            # Killed, not closed: git may be blocked writing the rest of a large blob.
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()
        await self.aclose()

    async def resolve_links(self, path: str, max_hops: int = 8) -> str:
        """`path` with symbolic links inside the commit followed, as git would check them
        out; GitError when one points outside the repository or they loop."""
        index = await self._index_map()
        for _ in range(max_hops):
            parts = path.split("/")
            for i in range(len(parts)):
                prefix = "/".join(parts[: i + 1])
                entry = index.get(prefix)
                if entry is not None and entry[0] == "120000":
                    blob = await self.read(prefix)
                    target = blob.data.decode("utf-8", "replace") if blob else ""
                    joined = posixpath.normpath(posixpath.join(posixpath.dirname(prefix), target))
                    if target.startswith("/") or joined == ".." or joined.startswith("../"):
                        raise GitError(f"{prefix} is a link to {target!r}, outside the repository")
                    path = "/".join([joined, *parts[i + 1 :]]).removeprefix("./")
                    break
            else:
                return path
        raise GitError(f"{path}: too many levels of symbolic links")
