"""procrastinate's App over the bot's Postgres jobs: the task's retry strategy, fenced
finishes, stalled-job recovery and the read that fences a running job.

The jobs are those the intake defers (`bot.store.queue.postgres.insert_jobs`: task
`delivery`, queue `bot`); procrastinate's own worker runs them (`bot.runs.procrastinate_pool`).
What this module adds to procrastinate, and why:

- retries: `DeliveryRetry` is a procrastinate retry strategy that retries exactly two
  exceptions, each carrying its own time: `AttemptFailed` (the contract's backoff, or a
  rate limit's reset when later) and `Deferred` (the run's target is held by another run).
  Every other exception ends the job: `GaveUp`, an abort (`JobAborted`), a lost claim.
  procrastinate counts a deferral as an attempt; `bot_jobs.deferrals` counts them so that
  the attempts the contract reports, and the `max_attempts` the task checks, leave them out.
- a claim: the job is the worker's while it is `doing` under that worker's id, with the
  attempts it had when fetched (each retry adds one, so they are a fencing token), no
  abort requested, and the worker's heartbeat fresher than the stalled timeout. `holds`
  reads exactly that; the run's model calls and GitHub writes ask it first
  (`bot.store.queue.fence`).
- fenced finishes: procrastinate's worker finishes or retries every job it ran, whatever
  happened meanwhile. A worker that was paused past its heartbeat, whose job was recovered
  and fetched by another worker, would finish the other worker's job: `FencedJobManager`
  finishes or retries a job only while the worker that fetched it still holds it under the
  same attempts, and otherwise leaves it to its new holder.
- stalled jobs: procrastinate records each worker's heartbeat (`procrastinate_workers`) and
  selects the running jobs of workers whose heartbeat is stale, leaving it to the
  application to retry them. `recover_stalled` does that in one statement that locks what
  it recovers (two workers recovering at once never retry a job twice, nor one fetched
  again meanwhile), through procrastinate's own `retry_job` procedure.
- time is the database server's (`now()`), as procrastinate's: retries scheduled by one
  machine's clock are due by the server's.
"""

from __future__ import annotations

import datetime
from typing import Any

import psycopg
from procrastinate import App, BaseRetryStrategy, PsycopgConnector, RetryDecision
from procrastinate import jobs as pjobs
from procrastinate.manager import JobManager
from psycopg_pool import AsyncConnectionPool

from bot.store.postgres.connection import JOB_POOL_SIZE
from bot.store.queue.base import Deferred
from bot.store.queue.postgres import QUEUE


class AttemptFailed(Exception):
    """An attempt failed in a way another attempt may not: retried at `retry_at`."""

    def __init__(self, error: str, retry_at: float = 0.0) -> None:
        super().__init__(error)
        self.retry_at = retry_at


class GaveUp(Exception):
    """Trying again cannot help, or the attempts are spent: the job ends failed (dead)."""


class ClaimLost(Exception):
    """The job is no longer this worker's (recovered as stalled, fetched elsewhere): this
    attempt neither finishes nor retries it."""


def _at(epoch: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(epoch, tz=datetime.UTC)


class DeliveryRetry(BaseRetryStrategy):
    """procrastinate's retry strategy for our jobs: only `AttemptFailed` and `Deferred` are
    retried, each at the time it carries. The task has counted the attempts already (it
    raises `GaveUp` on the last one), so no count is kept here."""

    def get_retry_decision(
        self, *, exception: BaseException, job: pjobs.Job
    ) -> RetryDecision | None:
        if isinstance(exception, AttemptFailed):
            return RetryDecision(retry_at=_at(exception.retry_at))
        if isinstance(exception, Deferred):
            return RetryDecision(retry_at=_at(exception.not_before))
        return None


# procrastinate's finish and retry procedures, applied only while the fetching worker still
# holds the job under the attempts it was fetched with (see the module).
_HELD = (
    "SELECT id FROM procrastinate_jobs WHERE id = %(job_id)s AND status = 'doing'"
    " AND worker_id = %(worker_id)s AND attempts = %(attempts)s FOR UPDATE"
)
_FENCED_FINISH = (
    f"WITH held AS MATERIALIZED ({_HELD})"
    " SELECT procrastinate_finish_job_v1(id, %(status)s, %(delete_job)s) FROM held"
)
_FENCED_RETRY = (
    f"WITH held AS MATERIALIZED ({_HELD})"
    " SELECT procrastinate_retry_job_v2(id, %(retry_at)s, %(new_priority)s,"
    " %(new_queue_name)s, %(new_lock)s) FROM held"
)


class FencedJobManager(JobManager):
    """procrastinate's job manager whose worker-side finish and retry are fenced."""

    async def finish_job(self, job: pjobs.Job, status: pjobs.Status, delete_job: bool) -> None:
        await self.connector.execute_query_all_async(
            query=_FENCED_FINISH,  # type: ignore[arg-type]
            job_id=job.id,
            worker_id=job.worker_id,
            attempts=job.attempts,
            status=status.value,
            delete_job=delete_job,
        )

    async def retry_job(
        self,
        job: pjobs.Job,
        retry_at: datetime.datetime | None = None,
        priority: int | None = None,
        queue: str | None = None,
        lock: str | None = None,
    ) -> None:
        await self.connector.execute_query_all_async(
            query=_FENCED_RETRY,  # type: ignore[arg-type]
            job_id=job.id,
            worker_id=job.worker_id,
            attempts=job.attempts,
            retry_at=retry_at or datetime.datetime.now(datetime.UTC),
            new_priority=priority,
            new_queue_name=queue,
            new_lock=lock,
        )


def procrastinate_app(conninfo: str) -> App:
    """procrastinate's App on its own small async pool to the store's database (opened with
    `app.open_async()`), its job manager fenced."""
    connector = PsycopgConnector(
        conninfo=conninfo,
        min_size=1,
        max_size=JOB_POOL_SIZE,
        name="bot-jobs",
        pool_factory=AsyncConnectionPool,
    )
    app = App(connector=connector)
    app.job_manager = FencedJobManager(connector)
    return app


_RECOVER = """
WITH stalled AS MATERIALIZED (
    SELECT job.id FROM procrastinate_jobs AS job
      LEFT JOIN procrastinate_workers AS worker ON worker.id = job.worker_id
     WHERE job.status = 'doing' AND job.queue_name = %(queue)s
       AND (worker.id IS NULL
            OR worker.last_heartbeat < now() - make_interval(secs => %(stalled)s))
       FOR UPDATE OF job SKIP LOCKED
)
SELECT id, procrastinate_retry_job_v2(id, now(), NULL, NULL, NULL) FROM stalled
"""


def recover_stalled(conn: psycopg.Connection[Any], stalled_after: float) -> list[int]:
    """Put back in the queue the running jobs of workers whose heartbeat is older than
    `stalled_after` seconds (or that were pruned): one more attempt each, at once (an
    abort requested meanwhile makes procrastinate's retry end it failed). Their ids."""
    rows = conn.execute(_RECOVER, {"queue": QUEUE, "stalled": stalled_after}).fetchall()
    return [int(row[0]) for row in rows]


_HOLDS = """
SELECT 1 FROM procrastinate_jobs AS job
  JOIN procrastinate_workers AS worker ON worker.id = job.worker_id
 WHERE job.id = %(job_id)s AND job.status = 'doing' AND NOT job.abort_requested
   AND job.worker_id = %(worker_id)s AND job.attempts = %(attempts)s
   AND worker.last_heartbeat > now() - make_interval(secs => %(stalled)s)
"""


def holds(
    conn: psycopg.Connection[Any], job_id: int, worker_id: int, attempts: int, stalled_after: float
) -> bool:
    """Whether the worker that fetched the job with `attempts` still holds it (see the
    module): one read by primary key."""
    args = {
        "job_id": job_id,
        "worker_id": worker_id,
        "attempts": attempts,
        "stalled": stalled_after,
    }
    return conn.execute(_HOLDS, args).fetchone() is not None


def job_facts(conn: psycopg.Connection[Any], job_id: int) -> tuple[str, int, int] | None:
    """(kind, max_attempts, deferrals) of a job, from our row beside procrastinate's."""
    row = conn.execute(
        "SELECT kind, max_attempts, deferrals FROM bot_jobs WHERE job_id = %s", (job_id,)
    ).fetchone()
    return None if row is None else (str(row[0]), int(row[1]), int(row[2]))


def note_attempt(
    conn: psycopg.Connection[Any], job_id: int, *, error: str | None, deferred: bool
) -> None:
    """Record an attempt's error (the job's `last_error`) and whether it was a deferral."""
    conn.execute(
        "UPDATE bot_jobs SET last_error = coalesce(%s, last_error),"
        " deferrals = deferrals + %s WHERE job_id = %s",
        (None if error is None else error[:2000], 1 if deferred else 0, job_id),
    )
