"""The job queue contracts: `JobQueue`, which every backend keeps (jobs enqueued once per
delivery, cancelled, counted), and `LeasedQueue`, the claim loop's (leased claims, retries with
backoff, a dead state), which the SQLite backend keeps. On Postgres, procrastinate's worker
claims, retries and recovers the jobs itself (`bot.runs.procrastinate_pool`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import partial
from typing import Protocol, TypeVar, runtime_checkable

import anyio
import anyio.abc
import anyio.to_thread

from bot.store.contract import storable

T = TypeVar("T")

DELIVERY_JOB = "delivery"
DEFAULT_MAX_ATTEMPTS = 5


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    DEAD = "dead"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class Job:
    """One unit of work: handle the stored delivery `delivery_id`."""

    id: int
    kind: str
    delivery_id: str
    status: JobStatus
    attempts: int
    max_attempts: int
    run_after: float
    lease_owner: str | None
    lease_until: float | None
    last_error: str | None
    lease_token: int = 0
    """The fencing token of the current claim: each claim of the job gets a larger one, so
    a worker whose lease was taken over (even by its own id) can tell it no longer holds it
    (`JobQueue.still_holds`)."""


class GiveUp(RuntimeError):
    """The job must not be tried again: the worker marks it dead at once."""


class Deferred(RuntimeError):
    """The job cannot go on yet (its target is held by another run): it goes back to the
    queue until `not_before`, and this attempt does not count against its attempts."""

    def __init__(self, reason: str, not_before: float) -> None:
        super().__init__(reason)
        self.not_before = not_before


@dataclass(frozen=True, slots=True)
class QueueStats:
    """The queue at one moment, for monitoring: jobs by status, and how long the oldest job
    ready to run has waited (0.0 when none waits)."""

    queued: int
    ready: int
    running: int
    dead: int
    oldest_ready_age: float


class LeaseLost(RuntimeError):
    """The job's lease expired and another worker may hold it now; stop working on it."""


def backoff_seconds(attempts: int, *, base: float = 2.0, cap: float = 300.0) -> float:
    """Delay before the next try after `attempts` failed ones: 2, 4, 8, ... up to `cap`."""
    return float(min(cap, base * 2 ** max(0, attempts - 1)))


class JobQueue(Protocol):
    """Work handed from the receiver to the workers, at least once, one job per delivery and
    kind for good. A cancelled job never runs again; a running one is stopped (its holder
    loses it). Every backend keeps this contract."""

    async def enqueue(
        self, delivery_id: str, *, kind: str = DELIVERY_JOB, max_attempts: int = ...
    ) -> int | None:
        """Add a job; None when one exists already for (kind, delivery_id)."""
        ...

    async def cancel(self, delivery_ids: Sequence[str], reason: str) -> list[Job]:
        """Cancel the queued and running jobs of these deliveries (every kind): a queued one
        is never run, a running one is stopped (on SQLite its holder gets LeaseLost and the
        job is cancelled at once; on Postgres its abort is requested, procrastinate's worker
        cancels its task and it ends cancelled). Done, dead and cancelled jobs stay as they
        are. `reason` becomes the job's `last_error`. Returns the jobs this call cancelled,
        as they are now."""
        ...

    async def get(self, job_id: int) -> Job | None: ...

    async def counts(self) -> dict[JobStatus, int]:
        """How many jobs are in each status."""
        ...


@runtime_checkable
class LeasedQueue(JobQueue, Protocol):
    """A JobQueue whose jobs a worker pool claims itself (`bot.runs.worker.Worker`'s loop).

    A claimed job is leased to one worker until `lease_until`; the worker extends the lease
    with `heartbeat` while it works. A worker that dies simply stops heartbeating, and the job
    becomes claimable again once the lease runs out. Each claim counts as an attempt; after
    `max_attempts` the job is dead and no longer claimed. A cancelled job is never claimed
    again either, and its holder, if any, loses the lease. Each claim carries a fencing
    token (`Job.lease_token`, larger at every claim of the job): a worker that was paused
    past its lease learns from `still_holds` that the job is no longer its own before it
    acts (`bot.store.queue.fence`), where its heartbeat would tell it only later.
    """

    async def claim(self, worker_id: str, lease_seconds: float) -> Job | None:
        """Lease the oldest ready job to `worker_id`, or None when nothing is ready."""
        ...

    async def heartbeat(self, job_id: int, worker_id: str, lease_seconds: float) -> None:
        """Extend the lease; raises LeaseLost when `worker_id` no longer holds it."""
        ...

    async def still_holds(self, job_id: int, worker_id: str, token: int) -> bool:
        """Whether the claim that gave `token` to `worker_id` still holds the job now: it is
        running, leased to that worker under that token, and its lease has not run out (once
        it has, any claim may take the job). One read by primary key, cheap enough to ask
        before every model call and every GitHub write (`bot.store.queue.fence`)."""
        ...

    async def complete(self, job_id: int, worker_id: str) -> None:
        """Mark the job done; raises LeaseLost when `worker_id` no longer holds it."""
        ...

    async def defer(self, job_id: int, worker_id: str, reason: str, not_before: float) -> Job:
        """Put the job back in the queue until `not_before`, uncounted: its attempts are
        what they were before this claim. Raises LeaseLost when `worker_id` no longer holds
        it."""
        ...

    async def fail(
        self,
        job_id: int,
        worker_id: str,
        error: str,
        *,
        retry: bool = True,
        not_before: float | None = None,
    ) -> Job:
        """Record a failed attempt: back to queued after a backoff (or at `not_before`, when
        that is later: a rate limit's reset), or dead when attempts are spent or `retry` is
        False. Raises LeaseLost when `worker_id` no longer holds it."""
        ...


class Watch(Protocol):
    """Calls `wake` whenever jobs were committed by any process, until cancelled; reports
    started once it first tried to watch. A backend whose database can say so offers one."""

    async def __call__(
        self,
        wake: Callable[[], None],
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None: ...


class ThreadedQueue(ABC):
    """The async half of the JobQueue contract for a backend whose work is blocking: each
    call runs its `*_sync` counterpart on anyio's thread pool. A backend implements those."""

    async def _call(self, fn: Callable[..., T], *args: object) -> T:
        return await anyio.to_thread.run_sync(partial(fn, *args))

    async def enqueue(
        self,
        delivery_id: str,
        *,
        kind: str = DELIVERY_JOB,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> int | None:
        return await self._call(self.enqueue_sync, delivery_id, kind, max_attempts)

    async def cancel(self, delivery_ids: Sequence[str], reason: str) -> list[Job]:
        return await self._call(self.cancel_sync, list(delivery_ids), storable(reason))

    async def get(self, job_id: int) -> Job | None:
        return await self._call(self.get_sync, job_id)

    async def counts(self) -> dict[JobStatus, int]:
        return await self._call(self.counts_sync)

    @abstractmethod
    def enqueue_sync(
        self, delivery_id: str, kind: str = DELIVERY_JOB, max_attempts: int = DEFAULT_MAX_ATTEMPTS
    ) -> int | None: ...

    @abstractmethod
    def cancel_sync(self, delivery_ids: list[str], reason: str) -> list[Job]: ...

    @abstractmethod
    def get_sync(self, job_id: int) -> Job | None: ...

    @abstractmethod
    def counts_sync(self) -> dict[JobStatus, int]: ...


class ThreadedLeasedQueue(ThreadedQueue):
    """The async half of the LeasedQueue contract, as ThreadedQueue's."""

    async def claim(self, worker_id: str, lease_seconds: float) -> Job | None:
        return await self._call(self.claim_sync, worker_id, lease_seconds)

    async def heartbeat(self, job_id: int, worker_id: str, lease_seconds: float) -> None:
        await self._call(self.heartbeat_sync, job_id, worker_id, lease_seconds)

    async def still_holds(self, job_id: int, worker_id: str, token: int) -> bool:
        return await self._call(self.still_holds_sync, job_id, worker_id, token)

    async def complete(self, job_id: int, worker_id: str) -> None:
        await self._call(self.complete_sync, job_id, worker_id)

    async def defer(self, job_id: int, worker_id: str, reason: str, not_before: float) -> Job:
        return await self._call(self.defer_sync, job_id, worker_id, storable(reason), not_before)

    async def fail(
        self,
        job_id: int,
        worker_id: str,
        error: str,
        *,
        retry: bool = True,
        not_before: float | None = None,
    ) -> Job:
        # An exception's text may quote a payload's NUL, which Postgres refuses in a text column.
        error = storable(error)
        return await self._call(self.fail_sync, job_id, worker_id, error, retry, not_before)

    @abstractmethod
    def claim_sync(self, worker_id: str, lease_seconds: float) -> Job | None: ...

    @abstractmethod
    def heartbeat_sync(self, job_id: int, worker_id: str, lease_seconds: float) -> None: ...

    @abstractmethod
    def still_holds_sync(self, job_id: int, worker_id: str, token: int) -> bool: ...

    @abstractmethod
    def complete_sync(self, job_id: int, worker_id: str) -> None: ...

    @abstractmethod
    def defer_sync(self, job_id: int, worker_id: str, reason: str, not_before: float) -> Job: ...

    @abstractmethod
    def fail_sync(
        self, job_id: int, worker_id: str, error: str, retry: bool, not_before: float | None
    ) -> Job: ...
