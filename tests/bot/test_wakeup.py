"""The wake-up pipe between receiver processes and the worker pool's process."""

from __future__ import annotations

import os

import anyio
import pytest

from bot.intake import wakeup

pytestmark = pytest.mark.anyio


async def test_each_batch_of_wakeups_wakes_the_pool_and_the_end_of_the_pipe_stops_listening() -> (
    None
):
    read_fd, write_fd = wakeup.open_pipe()
    woken = anyio.Event()
    wakes: list[int] = []

    def wake() -> None:
        wakes.append(1)
        woken.set()

    try:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(wakeup.listen, read_fd, wake)
                notify = wakeup.notifier(write_fd)
                for _ in range(3):  # three commits before the listener runs: one wake-up
                    notify(1)
                await woken.wait()
                assert wakes == [1]
                os.close(write_fd)  # every write end closed: the listener returns
                write_fd = -1
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)


def test_a_full_pipe_never_blocks_a_commit() -> None:
    read_fd, write_fd = wakeup.open_pipe()
    try:
        notify = wakeup.notifier(write_fd)
        for _ in range(70_000):  # more than a pipe holds
            notify(1)
        assert len(os.read(read_fd, 1 << 20)) <= 70_000
    finally:
        os.close(read_fd)
        os.close(write_fd)


def test_a_closed_reader_is_not_the_committers_problem() -> None:
    read_fd, write_fd = wakeup.open_pipe()
    os.close(read_fd)
    try:
        wakeup.notifier(write_fd)(1)  # EPIPE, and SIGPIPE is ignored by Python
    finally:
        os.close(write_fd)
