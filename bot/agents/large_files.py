"""Files too large to read whole: read_file pages through them as a stream of chunks.

A file up to WHOLE_READ_LIMIT is read into memory and rendered by `render_text`. A larger one
is never held whole: its source (a blob through `cat-file --batch`, or a file on disk) feeds
chunks to a Page, which counts lines up to the requested offset, keeps only that page with
every line cut to READ_LINE_CAP, and asks for no more once the page is full. Memory stays at
a chunk plus a page however large the file; time grows with how deep the page lies.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import anyio.to_thread

from bot.agents.paths import ToolError
from bot.agents.rendering import READ_BYTES_CAP, READ_LINE_CAP, describe_binary

WHOLE_READ_LIMIT = 2 * 1024 * 1024
"""Files up to this many bytes are read whole; larger ones are only ever streamed by pages."""
CHUNK = 64 * 1024
_SNIFF = 8192  # bytes looked at for a NUL, as render_text does
_KEEP = READ_LINE_CAP * 4  # bytes kept of one line: READ_LINE_CAP characters of UTF-8 at most

Sink = Callable[[bytes], bool]
"""Takes the next chunk of a file; returns False once it wants no more."""
Feeder = Callable[[Sink], Awaitable[None]]
"""Feeds a file's chunks, in order, to a sink until the sink or the file has had enough."""


@dataclass(frozen=True, slots=True)
class LargeFile:
    """A file over WHOLE_READ_LIMIT: its size and how to stream it."""

    size: int
    feed: Feeder


def file_feeder(path: Path) -> Feeder:
    """A Feeder reading `path` from disk in chunks, off the event loop."""

    async def feed(sink: Sink) -> None:
        def run() -> None:
            with path.open("rb") as handle:
                while chunk := handle.read(CHUNK):
                    if not sink(chunk):
                        return

        await anyio.to_thread.run_sync(run)

    return feed


class Page:
    """One page of numbered lines, collected from chunks: lines `offset` to `offset+limit-1`."""

    def __init__(self, offset: int, limit: int) -> None:
        self.start = max(1, offset)
        self.stop = self.start + max(1, limit)
        self.line = 1  # the number of the line being read
        self.kept = bytearray()  # the head of that line, when it is on the page
        self.length = 0  # that line's full length in bytes
        self.pending = False  # bytes of that line have been seen
        self.shown: list[str] = []
        self.used = 0
        self.head = bytearray()
        self.binary = False
        self.ended = False  # the whole file went by (so the number of lines is known)

    def feed(self, chunk: bytes) -> bool:
        if len(self.head) < _SNIFF:
            self.head += chunk[: _SNIFF - len(self.head)]
            if b"\0" in self.head:
                self.binary = True
                return False
        pos, size = 0, len(chunk)
        while pos < size:
            if self.line < self.start:
                pos = self._skip(chunk, pos)
                continue
            newline = chunk.find(b"\n", pos)
            end = size if newline < 0 else newline
            room = _KEEP - len(self.kept)
            if room > 0:
                self.kept += chunk[pos : min(end, pos + room)]
            self.length += end - pos
            self.pending = True
            if newline < 0:
                return True
            pos = newline + 1
            if not self._emit():
                return False
        return True

    def _skip(self, chunk: bytes, pos: int) -> int:
        """Count lines before the page without looking at them; where the rest begins."""
        need = self.start - self.line
        count = chunk.count(b"\n", pos)
        if count < need:
            self.line += count
            self.pending = chunk.rfind(b"\n", pos) < len(chunk) - 1 if count else True
            return len(chunk)
        for _ in range(need):
            pos = chunk.index(b"\n", pos) + 1
        self.line, self.pending = self.start, False
        return pos

    def _emit(self) -> bool:
        """Show the line just read; False once the page is full."""
        text = self.kept.decode("utf-8", "replace")
        if self.length > len(self.kept) or len(text) > READ_LINE_CAP:
            text = f"{text[:READ_LINE_CAP]} ... [line cut: {self.length} bytes in all]"
        line = f"{self.line:>6}\t{text}"
        if self.shown and self.used + len(line) + 1 > READ_BYTES_CAP:
            return False
        self.shown.append(line)
        self.used += len(line) + 1
        self.line += 1
        self.kept.clear()
        self.length, self.pending = 0, False
        return self.line < self.stop

    def finish(self) -> None:
        """The file ended: count (and show, if on the page) a last line without a newline."""
        self.ended = True
        if self.pending:
            if self.line >= self.start:
                self._emit()
            else:
                self.line += 1

    def render(self, path: str, size: int) -> str:
        if self.binary:
            return describe_binary(path, size)
        total = self.line - 1
        if self.ended and total < self.start:
            raise ToolError(f"{path} has {total} lines; offset {self.start} is past the end")
        last = self.start + len(self.shown) - 1
        head = (
            f"{path} is {size} bytes, too large to read whole (over {WHOLE_READ_LIMIT}); "
            "it is read as a stream, one page at a time."
        )
        if self.ended and last >= total:
            tail = f"[showing lines {self.start}-{last} of {total}]"
        else:
            tail = (
                f"[showing lines {self.start}-{last}; read on with offset={last + 1}, "
                "or find lines with grep and its `path`]"
            )
        return "\n".join([head, *self.shown, tail])


async def render_large(path: str, large: LargeFile, offset: int, limit: int) -> str:
    """A page of a large file, read as a stream: never more than a chunk and a page in memory."""
    page = Page(offset, limit)
    ended = True

    def sink(chunk: bytes) -> bool:
        nonlocal ended
        wanted = page.feed(chunk)
        ended = ended and wanted
        return wanted

    await large.feed(sink)
    if ended:
        page.finish()
    return page.render(path, large.size)
