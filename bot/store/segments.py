"""Append-only segment files that hold delivery bodies outside SQLite.

The intake writer appends each batch's bodies to the current segment with one `writev`
before the batch's transaction commits, and each delivery row keeps (segment, offset,
length). A body is written once, to the page cache, instead of into the WAL and then again
into the database file. Bytes appended by a batch whose commit never happened are simply
never referenced.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path

SEGMENT_SIZE = 64 * 1024 * 1024  # start a new segment once the current one is this long
_NAME = re.compile(r"^(\d{6,})\.bin$")
_IOV_MAX = 1024  # Linux's limit on buffers per writev


class SegmentError(Exception):
    """A stored body cannot be read back: its segment is missing or shorter than recorded."""


def bodies_dir(database: Path) -> Path:
    """The folder of segments that belongs to one database file (beside its -wal and -shm)."""
    return database.with_name(database.name + "-bodies")


def segment_path(folder: Path, segment: int) -> Path:
    return folder / f"{segment:06d}.bin"


def read_body(folder: Path, segment: int, offset: int, length: int) -> bytes:
    """The `length` bytes at `offset` in a segment; SegmentError when they are not all there."""
    path = segment_path(folder, segment)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise SegmentError(f"segment {path} does not exist") from None
    except OSError as exc:
        raise SegmentError(f"cannot open segment {path}: {exc.strerror}") from None
    try:
        data = os.pread(fd, length, offset)
        if len(data) < length:
            size = os.fstat(fd).st_size
            raise SegmentError(
                f"segment {path} is {size} bytes, but the body needs bytes {offset} to "
                f"{offset + length}: it was truncated"
            )
    except OSError as exc:
        raise SegmentError(f"cannot read segment {path}: {exc.strerror}") from None
    finally:
        os.close(fd)
    return data


class SegmentWriter:
    """Appends bodies to the newest segment, starting a new one past `segment_size` bytes.

    Used by one thread (the intake writer); `take_unsynced` may be called from another.
    """

    def __init__(self, folder: Path, *, segment_size: int = SEGMENT_SIZE) -> None:
        self.folder = folder
        self.segment_size = segment_size
        self.segment = 0
        self._fd = -1
        self._size = 0
        self._lock = threading.Lock()
        self._unsynced: set[int] = set()
        self._new_files = False

    def append(self, bodies: Sequence[bytes]) -> list[tuple[int, int]]:
        """Write `bodies` back to back; (segment, offset) of each, in order.

        The bytes are in the page cache when this returns, which survives the process
        being killed; `sync` makes them survive a power loss.
        """
        if self._fd < 0 or self._size >= self.segment_size:
            self._open_next()
        total = sum(len(body) for body in bodies)
        views = [memoryview(body) for body in bodies if body]
        first = 0
        start = end = -1
        while first < len(views):
            n = os.writev(self._fd, views[first : first + _IOV_MAX])
            if n == 0:
                raise OSError(f"segment {self.segment}: a write made no progress")
            # With O_APPEND the position after a write is the end of the bytes it wrote.
            end = os.lseek(self._fd, 0, os.SEEK_CUR)
            if start < 0:
                start = end - n
            while first < len(views) and n >= len(views[first]):
                n -= len(views[first])
                first += 1
            if n:  # a short write: the rest of this body goes next
                views[first] = views[first][n:]
        if start < 0:
            start = end = os.lseek(self._fd, 0, os.SEEK_END)
        self._size = end
        with self._lock:
            self._unsynced.add(self.segment)
        if end - start != total:
            raise OSError(f"segment {self.segment}: another writer appended between the parts")
        out: list[tuple[int, int]] = []
        offset = start
        for body in bodies:
            out.append((self.segment, offset))
            offset += len(body)
        return out

    def _open_next(self) -> None:
        if self._fd < 0:
            self.folder.mkdir(parents=True, exist_ok=True)
            numbers = [int(m.group(1)) for p in self.folder.iterdir() if (m := _NAME.match(p.name))]
            segment = max(numbers, default=1)
        else:
            os.close(self._fd)
            self._fd = -1
            segment = self.segment + 1
        while True:
            path = segment_path(self.folder, segment)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            size = os.fstat(fd).st_size
            if size < self.segment_size:
                break
            os.close(fd)
            segment += 1
        self._fd, self._size, self.segment = fd, size, segment
        with self._lock:
            self._new_files = True

    def sync(self) -> None:
        """Flush the segments written since the last call to disk (safe from another thread)."""
        with self._lock:
            segments, self._unsynced = self._unsynced, set()
            new_files, self._new_files = self._new_files, False
        for segment in sorted(segments):
            try:
                fd = os.open(segment_path(self.folder, segment), os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            try:
                os.fdatasync(fd)
            finally:
                os.close(fd)
        if new_files:
            fd = os.open(self.folder, os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
