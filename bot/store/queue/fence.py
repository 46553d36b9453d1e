"""Fencing: a run acts on the model and on GitHub only while its job's lease is still its own.

A lease alone does not stop a worker that was paused (SIGSTOP, a stalled VM, a long GC) past
its lease: when it resumes, its heartbeat has not run yet, and whatever it was about to do
(the next model call, the "working" comment) would happen while another worker holds the
job and does the same. So each claim carries a fencing token (`Job.lease_token`), and the
worker's `Fence` asks the store whether that claim still holds the job (`JobQueue.still_holds`,
one read by primary key) right before each model call (`bot.agents.runtime`) and each GitHub
write (`bot.github.installation`, and the push in `bot.git.checkout`). The answer is read
from the store every time: a cached "yes" is exactly what a paused worker would wrongly trust.

A fence that found its lease gone stays lost: every later check raises at once, without a
read, and it stops the job's work (`on_lost`). The run's artifacts (journal, transcripts,
workflow.json) are written synchronously, so they ask `holds_now` instead (the same read,
blocking): a paused attempt must not replace the new holder's journal or account of the run.
The fence of the job being run is found through a context variable that the worker sets for
the job's task, so the agent runtime, the GitHub client and the artifact store, shared by
every run of the process, need no extra argument; code that runs outside any job (the
redelivery pass, the CLI) has no fence and is not checked.

What stays possible is a pause between the check and the request it guards (microseconds
on the event loop); nothing short of GitHub checking the token itself could close that.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

from bot.log import get_logger
from bot.store.queue.base import LeaseLost

log = get_logger(__name__)

_CURRENT: contextvars.ContextVar[Fence | None] = contextvars.ContextVar("fence", default=None)


class Fence:
    """The check a job's run makes before acting: `await fence.check()` raises LeaseLost once
    the claim that started the run no longer holds its job."""

    def __init__(
        self,
        holds: Callable[[], Awaitable[bool]],
        *,
        job_id: int,
        delivery_id: str,
        on_lost: Callable[[], None] | None = None,
        holds_now: Callable[[], bool] | None = None,
    ) -> None:
        """`holds` reads the store (`JobQueue.still_holds` for this claim) and `holds_now`
        the same, blocking; `on_lost` stops the job's work, called once, from the event
        loop, when the lease is found gone."""
        self._holds = holds
        self._holds_now = holds_now
        self.job_id = job_id
        self.delivery_id = delivery_id
        self._on_lost = on_lost
        self._lost: str | None = None
        self._stopped = False

    @property
    def lost(self) -> bool:
        return self._lost is not None

    async def check(self) -> None:
        """Raise LeaseLost unless this claim still holds the job, read from the store now."""
        if self._lost is None and not await self._holds():
            self._mark(_GONE)
        if self._lost is not None:
            self._stop()
            raise LeaseLost(self._lost)

    def holds_now(self) -> bool:
        """Whether this claim still holds the job, read from the store now without awaiting
        (any thread): for writes made synchronously. Found lost, the fence stays lost; the
        job's work is stopped at its next `check` or heartbeat. A store that cannot answer
        counts as holding: these writes are best effort against the database anyway, and
        the next `check` (before anything reaches GitHub or the model) fails closed."""
        if self._lost is None and self._holds_now is not None:
            try:
                held = self._holds_now()
            except Exception as exc:  # any database error
                log.warning("cannot read the job's lease", extra={"error": type(exc).__name__})
                held = True
            if not held:
                self._mark(_GONE)
        return self._lost is None

    def lose(self, reason: str) -> None:
        """The heartbeat found the lease gone: mark it lost and stop the job's work; later
        checks raise without reading the store. Call from the event loop."""
        self._mark(reason)
        self._stop()

    def _mark(self, reason: str) -> None:
        if self._lost is not None:
            return
        self._lost = f"job {self.job_id}: {reason}"
        log.warning(
            "lease lost; the run stops here and writes nothing more",
            extra={"job_id": self.job_id, "delivery_id": self.delivery_id, "reason": reason},
        )

    def _stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            if self._on_lost is not None:
                self._on_lost()


_GONE = "the job's lease is held by another claim or has run out"


def current_fence() -> Fence | None:
    """The fence of the job whose task this is, or None outside a job."""
    return _CURRENT.get()


async def check_fence() -> None:
    """Before a model call or a GitHub write: raise LeaseLost when the current job's lease is
    no longer this worker's. Does nothing outside a job."""
    fence = _CURRENT.get()
    if fence is not None:
        await fence.check()


def fence_lost() -> bool:
    """Whether the current job's lease was found lost (no store read): for cleanup that must
    not touch what the job's new holder now owns."""
    fence = _CURRENT.get()
    return fence is not None and fence.lost


def fence_holds_now() -> bool:
    """Before a synchronous write of the run's state: False when the current job's lease is
    no longer this worker's, read from the store now. True outside a job."""
    fence = _CURRENT.get()
    return fence is None or fence.holds_now()


@contextmanager
def fenced(fence: Fence) -> Iterator[Fence]:
    """Run the block, and every task it starts, under `fence`."""
    token = _CURRENT.set(fence)
    try:
        yield fence
    finally:
        _CURRENT.reset(token)
