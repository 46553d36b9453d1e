"""Read a commit straight from a git object database: no checkout, so no path can escape."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import Process

from bot import hostgit
from bot.gitguard import WorktreeQuarantined

# Blobs above this are not read through the shared `cat-file --batch` pipe.
BATCH_BLOB_LIMIT = 8 * 1024 * 1024
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
    """Run one git command through `bot.hostgit` and collect its output; GitError when the
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

    async def read(self, path: str) -> Blob | None:
        """The object at `path` in the commit, or None when there is none."""
        index = await self._index_map()
        entry = index.get(path)
        if entry is None:
            return Blob("tree", 0, b"") if path in self._dirs else None
        mode, size = entry
        if mode == "160000":
            return Blob("submodule", 0, b"")
        if size > BATCH_BLOB_LIMIT:
            return Blob("blob", size, await self._read_head(path, BATCH_BLOB_LIMIT))
        async with self._lock:
            process = await self._start()
            assert process.stdin is not None
            try:
                await process.stdin.send(f"{self.commit}:{path}\n".encode())
                header = (await self._read_line(process)).split()
                if len(header) < 3 or header[-1] == b"missing":
                    return None
                size = int(header[2])
                data = await self._read_exactly(process, size + 1)
            except BaseException as exc:
                # Interrupted mid-answer (a tool timeout, cancellation, a dead process): the
                # pipe is out of step, so start a fresh process next time.
                self._buffer.clear()
                await self.aclose()
                if isinstance(exc, Exception):
                    raise GitError(
                        f"reading {path} failed ({type(exc).__name__}); try again"
                    ) from exc
                raise
        kind = "symlink" if mode == "120000" else header[1].decode()
        return Blob(kind, size, data[:-1])

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

    async def _read_head(self, path: str, limit: int) -> bytes:
        out = await run_git(["cat-file", "blob", f"{self.commit}:{path}"], git_dir=self.git_dir)
        return out.stdout[:limit]
