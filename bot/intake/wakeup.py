"""A pipe that wakes the worker pool in one process when a receiver in another commits jobs.

In one process the delivery writer wakes the pool directly. With several receivers
(`bot serve --receivers N`) the pool lives in the parent: each receiver gets the pipe's write
end and writes one byte after each commit that stored new deliveries; the parent reads
whatever is there and wakes the pool once. A pipe rather than a shorter poll: the pool starts
on a new job within the time it takes to read a byte, and an idle pool costs nothing. The
write end is non-blocking, so a full pipe (the parent has 64 KiB of wake-ups still to read,
which already mean "wake up") never holds up a commit. The pool's own poll (once a second)
stays as the fallback for a wake-up that was lost. On Postgres the database itself wakes
every pool on every machine as well (procrastinate's worker listens: `bot.runs.procrastinate_pool`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

import anyio


def open_pipe() -> tuple[int, int]:
    """(read end, write end), both non-blocking and closed on exec unless passed on."""
    return os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)


def notifier(write_fd: int) -> Callable[[int], None]:
    """The `on_commit` callback of a receiver: one byte per commit with new jobs."""

    def notify(new_jobs: int) -> None:
        # Full: the reader has wake-ups pending already. Broken: the parent is gone.
        with contextlib.suppress(BlockingIOError, BrokenPipeError):
            os.write(write_fd, b"\x01")

    return notify


async def listen(read_fd: int, wake: Callable[[], None]) -> None:
    """Call `wake` each time wake-ups arrive, until every write end is closed."""
    while True:
        await anyio.wait_readable(read_fd)
        try:
            data = os.read(read_fd, 4096)
        except BlockingIOError:  # another reader of the same pipe was quicker
            continue
        if not data:
            return
        wake()
