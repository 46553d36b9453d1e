"""The worker pool on Postgres: procrastinate's worker runs the jobs, the Worker handles each.

procrastinate's `Worker` fetches the jobs of queue `bot` (its LISTEN/NOTIFY wakes it when any
machine commits one, its poll covers a lost notification), runs up to `concurrency` at once,
records its heartbeat in `procrastinate_workers`, and cancels a job's task when its abort is
requested (`cancel_job_by_id(abort=True)`: `JobQueue.cancel` on a running job). The task
`delivery` is one attempt of `bot.runs.worker.Worker`: the same loading, deciding, recording
and running as the SQLite pool's claim loop, under a fence that asks procrastinate's job row
whether this worker still holds the job (`bot.store.queue.procrastinate_app.holds`). How the
attempt ended becomes what procrastinate understands:

- done: the task returns (succeeded).
- failed, with attempts left: `AttemptFailed` at the contract's backoff (or a rate limit's
  reset), retried by the retry strategy; on the last attempt, or when trying again cannot
  help, the delivery is recorded as given up and the task raises `GaveUp` (failed: dead).
- deferred (the target is held by another run): `Deferred`, retried at its time, counted as
  a deferral and not an attempt.
- cancelled (the installation was lost) or aborted: `JobAborted` (aborted: cancelled).
- the claim lost (recovered as stalled while this worker was paused): `ClaimLost`, and
  procrastinate's fenced finish leaves the job to its new holder.

A worker that dies stops its heartbeat; every pool recovers the running jobs of workers
whose heartbeat is older than the lease (`BOT_JOB_LEASE_SECONDS`) every third of it, and
the next attempt resumes the run. At shutdown the running jobs are cancelled and go back to
the queue at once (procrastinate retries a job aborted by its worker's shutdown).
"""

from __future__ import annotations

import asyncio
from functools import partial

import anyio
import anyio.abc
import anyio.to_thread
from procrastinate import App
from procrastinate import worker as pworker
from procrastinate.exceptions import JobAborted
from procrastinate.job_context import AbortReason, JobContext

from bot.log import bound, get_logger
from bot.runs.heartbeat import beat_forever
from bot.runs.worker import (
    WATCHED_POLL_INTERVAL,
    Worker,
    describe_failure,
    retry_not_before,
    retryable,
)
from bot.store.postgres.store import PostgresStore
from bot.store.queue.base import DELIVERY_JOB, Deferred, backoff_seconds
from bot.store.queue.fence import Fence
from bot.store.queue.postgres import QUEUE
from bot.store.queue.procrastinate_app import (
    AttemptFailed,
    ClaimLost,
    DeliveryRetry,
    GaveUp,
    holds,
    job_facts,
    note_attempt,
    procrastinate_app,
    recover_stalled,
)

log = get_logger(__name__)

ABORT_POLL_INTERVAL = 5.0
"""Seconds between procrastinate's polls for aborts, the fallback for a lost notification."""
SHUTDOWN_GRACE = 0.0
"""Seconds the jobs running at shutdown may take to end before they are cancelled (and go
back to the queue): a run takes minutes, the process manager's patience seconds."""


class ProcrastinatePool:
    """A `bot.runs.worker.Runner`: the worker's jobs run by procrastinate's worker."""

    def __init__(self, store: PostgresStore, *, stalled_after: float) -> None:
        """`stalled_after`: seconds without a heartbeat after which a worker's jobs are
        another's to take (the lease); heartbeats come at a third of it."""
        self.store = store
        self.stalled_after = stalled_after

    async def run(
        self, worker: Worker, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        app = self._app(worker, [])
        async with app.open_async():
            engine = self._worker(app, worker, concurrency=worker.concurrency, wait=True)
            log.info(
                "worker pool started",
                extra={"worker_id": worker.worker_id, "tasks": worker.concurrency},
            )
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(beat_forever, worker.store, worker.worker_id, worker.held_runs)
                tasks.start_soon(self._engine, engine)
                tasks.start_soon(self._recover_forever)
                for job in worker.hooks.background:
                    tasks.start_soon(job)
                task_status.started()

    async def run_until_idle(self, worker: Worker) -> int:
        """procrastinate's worker with `wait=False`, one job at a time: it stops once no job
        is ready (stalled jobs are recovered first)."""
        handled: list[int] = []
        await anyio.to_thread.run_sync(self._recover)
        app = self._app(worker, handled)
        async with app.open_async():
            await self._engine(self._worker(app, worker, concurrency=1, wait=False))
        return len(handled)

    def _app(self, worker: Worker, handled: list[int]) -> App:
        app = procrastinate_app(self._conninfo())

        async def delivery(context: JobContext, delivery_id: str) -> None:
            handled.append(1)
            await self._delivery(worker, context, delivery_id)

        app.task(name=DELIVERY_JOB, queue=QUEUE, pass_context=True, retry=DeliveryRetry())(delivery)
        return app

    def _worker(self, app: App, worker: Worker, *, concurrency: int, wait: bool) -> pworker.Worker:
        return pworker.Worker(
            app,
            queues=[QUEUE],
            name=worker.worker_id,
            concurrency=concurrency,
            wait=wait,
            fetch_job_polling_interval=WATCHED_POLL_INTERVAL,
            abort_job_polling_interval=ABORT_POLL_INTERVAL,
            shutdown_graceful_timeout=SHUTDOWN_GRACE,
            install_signal_handlers=False,
            update_heartbeat_interval=self.stalled_after / 3,
            stalled_worker_timeout=self.stalled_after,
        )

    async def _engine(self, engine: pworker.Worker) -> None:
        """procrastinate's worker, stopped its own way (cancelling the running jobs and
        recording how each ended) when this task is cancelled, rather than mid-write."""
        done = anyio.Event()

        async def run() -> None:
            try:
                with anyio.CancelScope(shield=True):
                    await engine.run()  # type: ignore[no-untyped-call]
            finally:
                done.set()

        async with anyio.create_task_group() as inner:
            inner.start_soon(run)
            try:
                await done.wait()
            finally:
                engine.stop()  # type: ignore[no-untyped-call]
                with anyio.CancelScope(shield=True):
                    await done.wait()

    def _conninfo(self) -> str:
        conninfo = self.store.pool.conninfo  # the pool's own DSN (a callable makes one)
        return str(conninfo() if callable(conninfo) else conninfo)

    async def _recover_forever(self) -> None:
        while True:
            try:
                recovered = await anyio.to_thread.run_sync(self._recover)
            except Exception as exc:  # a busy database now and then: the next pass
                log.warning("recovering stalled jobs failed", extra={"error": type(exc).__name__})
            else:
                if recovered:
                    log.warning(
                        "jobs of a stalled worker put back in the queue",
                        extra={"job_ids": recovered},
                    )
            await anyio.sleep(self.stalled_after / 3)

    def _recover(self) -> list[int]:
        with self.store.pool.connection() as conn:
            return recover_stalled(conn, self.stalled_after)

    def _holds(self, job_id: int, worker_id: int, attempts: int) -> bool:
        with self.store.pool.connection() as conn:
            return holds(conn, job_id, worker_id, attempts, self.stalled_after)

    def _note(self, job_id: int, error: str | None, deferred: bool = False) -> None:
        with self.store.pool.connection() as conn:
            note_attempt(conn, job_id, error=error, deferred=deferred)

    async def _delivery(self, worker: Worker, context: JobContext, delivery_id: str) -> None:
        """procrastinate's task: one attempt at the job (see the module)."""
        job = context.job
        assert job.id is not None and job.worker_id is not None
        job_id, worker_id, fetched_attempts = job.id, job.worker_id, job.attempts
        with bound(delivery_id=delivery_id, job_id=job_id):
            try:
                await self._attempt(worker, job_id, worker_id, fetched_attempts, delivery_id)
            except asyncio.CancelledError:
                if context.abort_reason() is AbortReason.USER_REQUEST:
                    log.info("job aborted")
                    raise JobAborted("aborted") from None
                raise  # shutting down: procrastinate puts the job back in the queue

    async def _attempt(
        self, worker: Worker, job_id: int, worker_id: int, fetched: int, delivery_id: str
    ) -> None:
        with self.store.pool.connection() as conn:
            facts = job_facts(conn, job_id)
        if facts is None:
            raise GaveUp(f"job {job_id} has no row in bot_jobs")
        _, max_attempts, deferrals = facts
        attempt = fetched - deferrals + 1
        loaded = await worker.load(delivery_id)
        if isinstance(loaded, str):
            await anyio.to_thread.run_sync(self._note, job_id, loaded)
            raise GaveUp(loaded)
        delivery = loaded
        if attempt > max_attempts:  # the last attempt's worker died
            spent = GaveUp("its attempts ran out: each worker stopped before it ended")
            await worker.dead(delivery.guid, attempt - 1, spent)
            raise spent
        claim = (job_id, worker_id, fetched)

        def make_fence(scope: anyio.CancelScope) -> Fence:
            async def still() -> bool:
                return await anyio.to_thread.run_sync(self._holds, *claim)

            return Fence(
                still,
                job_id=job_id,
                delivery_id=delivery.guid,
                on_lost=scope.cancel,
                holds_now=partial(self._holds, *claim),
            )

        with bound(event=delivery.event):
            done = await worker.attempt(job_id, delivery, make_fence)
            if done.inflight.cancelled is not None:
                raise JobAborted(done.inflight.cancelled)
            if done.fence.lost:
                raise ClaimLost(f"job {job_id} is no longer this worker's")
            error = done.error
            if error is None:
                return
            if isinstance(error, Deferred):
                await anyio.to_thread.run_sync(self._note, job_id, str(error), True)
                raise error
            log.error(
                "handling the delivery failed",
                exc_info=error,
                extra={"attempt": attempt, "max_attempts": max_attempts},
            )
            described = describe_failure(error)
            await anyio.to_thread.run_sync(self._note, job_id, described)
            if not retryable(error) or attempt >= max_attempts:
                await worker.dead(delivery.guid, attempt, error)
                raise GaveUp(described) from error
            retry_at = worker.store.clock() + backoff_seconds(attempt)
            raise AttemptFailed(described, max(retry_at, retry_not_before(error) or 0.0)) from error
