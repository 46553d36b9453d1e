"""`bot serve --receivers N`: N receiver processes on one listening socket, the pool beside them.

Sharing the port. The parent binds and listens once, then starts each receiver as a fresh
interpreter (`python -m bot.cli serve --listen-fd FD ...`) that inherits the socket and runs
uvicorn on it; the kernel hands each new connection to whichever receiver accepts it first.
Chosen over SO_REUSEPORT (a socket per receiver, connections spread by a hash of addresses):

- the port is bound once, so a bind error is reported once, before anything starts, and no
  other process of the same user can join the port and take a share of the connections;
- a receiver that stops leaves the connections still waiting to be accepted to the others,
  where closing an SO_REUSEPORT socket resets every connection queued on it;
- a busy receiver accepts less, where a hash keeps sending it its share.

Fresh interpreters rather than `fork`: by then the parent has an open database and threads.

The worker pool runs in the parent (none with `--no-worker`), in exactly one process as with
one receiver. A receiver that commits new jobs wakes it through a pipe (bot/intake/wakeup.py).

Stopping. SIGTERM or SIGINT to the parent stops the pool and sends SIGTERM to each receiver,
which answers its requests in flight, commits what its writer holds and exits; a receiver
still running `STOP_TIMEOUT` seconds later is killed. Each receiver asks the kernel for a
SIGTERM should the parent die first (PR_SET_PDEATHSIG), so a parent killed with SIGKILL leaves
no orphan holding the port. A receiver that exits on its own stops everything with exit status
1: it is a bug or an out-of-memory kill to look at, and the process manager restarts
`bot serve` whole; acknowledged deliveries are in the store whatever happens.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import anyio

from bot.intake import wakeup
from bot.log import get_logger

if TYPE_CHECKING:
    from bot.runs.worker import Worker

log = get_logger(__name__)

STOP_TIMEOUT = 30.0  # seconds a receiver gets to answer what it holds after SIGTERM
BACKLOG = 2048
POSTGRES_RECEIVERS = 4  # receivers by default on Postgres, whatever the number of cores
_PR_SET_PDEATHSIG = 1


def core_count() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def default_receivers(*, postgres: bool = False, cores: int | None = None) -> int:
    """One receiver per core (`cores`, by default those this process may run on); on Postgres
    at most POSTGRES_RECEIVERS, so that the connections stay bounded whatever the host (each
    receiver holds a pool: `serve_connections`). More intake is more `bot serve` processes,
    on this machine or others, each counted in the README's sum."""
    count = max(1, core_count() if cores is None else cores)
    return min(count, POSTGRES_RECEIVERS) if postgres else count


def serve_connections(receivers: int, pool_max: int, *, worker: bool) -> int:
    """The most Postgres connections one `bot serve` holds: each receiver's pool, and with
    more than one receiver the parent's too (with the worker pool's listening connection
    when it runs one)."""
    from bot.store.postgres.connection import process_connections

    parent = process_connections(pool_max, runs_pool=worker)
    if receivers == 1:  # the parent is the receiver
        return parent
    return parent + receivers * process_connections(pool_max, runs_pool=False)


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on (host, port), to be shared by the receivers."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


def die_with_parent(parent_pid: int) -> None:
    """In a receiver: be sent SIGTERM when the parent dies; exit now if it already has.

    The kernel sends the signal when the thread that started this process ends, which is the
    parent's main thread (`Receivers.start` runs there) and so lives as long as the parent.
    """
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != parent_pid:
        raise SystemExit(0)


class Receivers:
    """The receiver processes: started on one socket, watched, stopped."""

    def __init__(self, count: int, *, wake_fd: int | None) -> None:
        if count < 1:
            raise ValueError("at least one receiver is needed")
        self.count = count
        self.wake_fd = wake_fd
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, sock: socket.socket) -> None:
        """Start every receiver on `sock` (the caller may close its own copy afterwards)."""
        fds = [sock.fileno()]
        command = [
            sys.executable,
            "-m",
            "bot.cli",
            "serve",
            "--listen-fd",
            str(sock.fileno()),
            "--parent-pid",
            str(os.getpid()),
        ]
        if self.wake_fd is not None:
            command += ["--wake-fd", str(self.wake_fd)]
            fds.append(self.wake_fd)
        for _ in range(self.count):
            # stdout and stderr are inherited: every process logs to the same place. A process
            # group of their own: Ctrl-C in a terminal reaches the parent alone, which stops
            # the receivers itself, so none is seen exiting before the parent knows why.
            self.procs.append(subprocess.Popen(command, pass_fds=fds, process_group=0))

    @property
    def pids(self) -> list[int]:
        return [proc.pid for proc in self.procs]

    def exited(self) -> subprocess.Popen[bytes] | None:
        """A receiver that has exited, if any."""
        for proc in self.procs:
            if proc.poll() is not None:
                return proc
        return None

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM to each receiver; kill those still running after `timeout` seconds."""
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.error(
                    "receiver did not stop in time; killing it",
                    extra={"pid": proc.pid, "seconds": timeout},
                )
                proc.kill()
                proc.wait()


async def supervise(
    receivers: Receivers, worker: Worker | None, read_fd: int | None, *, poll: float = 0.2
) -> int:
    """Run the pool (if any) until SIGTERM or SIGINT, or until a receiver exits on its own.

    Returns the exit status: 0 when stopped by a signal, 1 when a receiver died.
    """
    status = 0
    async with anyio.create_task_group() as tasks:
        if worker is not None:
            await tasks.start(worker.run)
            if read_fd is not None:
                tasks.start_soon(wakeup.listen, read_fd, worker.wake)

        async def watch() -> None:
            nonlocal status
            while True:
                await anyio.sleep(poll)
                proc = receivers.exited()
                if proc is not None:
                    log.error(
                        "a receiver exited on its own; stopping `bot serve`",
                        extra={"pid": proc.pid, "returncode": proc.returncode},
                    )
                    status = 1
                    tasks.cancel_scope.cancel()
                    return

        tasks.start_soon(watch)
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("stopping", extra={"signal": signal.Signals(signum).name})
                break
        tasks.cancel_scope.cancel()
    return status
