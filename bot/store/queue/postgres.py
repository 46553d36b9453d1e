"""The JobQueue on Postgres, built on procrastinate's job table and its primitives.

A job is a row of `procrastinate_jobs` (task `delivery`, queue `bot`, the delivery id in its
args), created by procrastinate's `JobManager.batch_defer_jobs` inside the caller's
transaction, so the intake commits a delivery and its job together. The contract maps onto
procrastinate like this:

- status: todo is queued, doing is running, succeeded is done, failed is dead; cancelled
  (while it waited) and aborted (while it ran) are cancelled. Attempts are procrastinate's
  own counter (finished attempts) plus the one running.
- enqueue dedupes by the unique key (kind, delivery_id) of `bot_jobs`, our row beside
  procrastinate's: its `queueing_lock` only holds while a job waits, and a delivery must get
  one job for good. The loser of a race drops the job it deferred, in its own transaction.
- claim is procrastinate's fetch (same order: priority, then id; same `lock` rule: never two
  jobs with one lock at once; `FOR UPDATE SKIP LOCKED`) with two changes: time is the queue's
  clock, not the server's `now()`, so tests drive it; and the claim takes a lease.
- leases: procrastinate detects a stalled job by its worker's heartbeat; the contract wants a
  lease per job, extended by `heartbeat` and owned by a worker id, so `bot_jobs` holds
  `lease_owner` and `lease_until`. A lease that ran out is recovered the way procrastinate's
  docs recover stalled jobs, with its `retry_job` (back to todo, one more attempt), or with
  its `finish_job` as failed when no attempt is left.
- complete and fail are procrastinate's `finish_job` and `retry_job`. Whether a failure is
  retried is decided by procrastinate's `RetryStrategy`, with `retry_exceptions` given
  explicitly: only `AttemptFailed` is retried. Left unset, procrastinate retries every
  exception, an abort included; here an abort or a refusal ends the job after its attempt.
  When is ours: the contract's backoff, or `not_before` when that is later, as `scheduled_at`.
- cancel: a waiting job through procrastinate's `cancel_job`; a running one is finished as
  aborted through its `finish_job` at once (the contract takes the lease from its holder
  there and then, where procrastinate would only flag it and wait for its worker).
- abort: a running job whose abort was requested (procrastinate's `cancel_job_by_id(job_id,
  abort=True)`) makes its worker's next `heartbeat` raise LeaseLost, so the worker stops; a
  `fail` then, or the lease running out, ends the job (failed, after that one attempt): the
  abort reaches the retry strategy as `JobAborted`, which it does not retry.

- wake-ups: procrastinate's insert trigger notifies `procrastinate_queue_v1#bot` when a job
  is committed; `watch` listens there and wakes the pool (`bot.store.postgres.listen`).

procrastinate's own worker does not run: `bot.runs.worker` claims through this contract. So
`procrastinate_workers` stays empty and a running job's `worker_id` stays NULL, which
procrastinate's own stalled-job query would read as stalled: do not point `procrastinate
worker` or its stalled-job recovery at this database. Blocking work runs on anyio's thread
pool over the store's connection pool.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypeVar

import anyio
import anyio.abc
import psycopg
from procrastinate import RetryStrategy, SyncPsycopgConnector
from procrastinate import jobs as pjobs
from procrastinate import sql as psql
from procrastinate.exceptions import JobAborted
from procrastinate.manager import JobManager

from bot.store.postgres.listen import channel, listen
from bot.store.postgres.store import PostgresStore
from bot.store.queue.base import (
    DEFAULT_MAX_ATTEMPTS,
    DELIVERY_JOB,
    Job,
    JobStatus,
    LeaseLost,
    QueueStats,
    ThreadedQueue,
    backoff_seconds,
)

T = TypeVar("T")

QUEUE = "bot"
_EXPIRED_PER_CLAIM = 20  # leases recovered by one claim at most; the next claim takes more

_STATUS = {
    "todo": JobStatus.QUEUED,
    "doing": JobStatus.RUNNING,
    "succeeded": JobStatus.DONE,
    "failed": JobStatus.DEAD,
    "cancelled": JobStatus.CANCELLED,
    "aborted": JobStatus.CANCELLED,  # cancelled while it ran
}

_JOB_COLUMNS = (
    "pj.id, bj.kind, bj.delivery_id, pj.status::text,"
    " pj.attempts + (pj.status = 'doing')::int - bj.deferrals, bj.max_attempts,"
    " coalesce(extract(epoch from pj.scheduled_at)::float8, bj.enqueued_at),"
    " bj.lease_owner, bj.lease_until, bj.last_error, bj.lease_token"
)
_JOBS = "bot_jobs AS bj JOIN procrastinate_jobs AS pj ON pj.id = bj.job_id"

# procrastinate's fetch (procrastinate_fetch_job_v2) with the clock as a parameter.
_FETCH = """
WITH candidate AS (
    SELECT jobs.id
      FROM procrastinate_jobs AS jobs
     WHERE NOT EXISTS (
               SELECT 1 FROM procrastinate_jobs AS other_jobs
                WHERE jobs.lock IS NOT NULL
                  AND other_jobs.lock = jobs.lock
                  AND (other_jobs.status = 'doing'
                       OR (other_jobs.status = 'todo'
                           AND (other_jobs.priority > jobs.priority
                                OR (other_jobs.priority = jobs.priority
                                    AND other_jobs.id < jobs.id)))))
       AND jobs.status = 'todo'
       AND jobs.queue_name = %(queue)s
       AND (jobs.scheduled_at IS NULL OR jobs.scheduled_at <= to_timestamp(%(now)s))
     ORDER BY jobs.priority DESC, jobs.id ASC
     LIMIT 1
       FOR UPDATE OF jobs SKIP LOCKED
)
UPDATE procrastinate_jobs SET status = 'doing'
  FROM candidate WHERE procrastinate_jobs.id = candidate.id
RETURNING procrastinate_jobs.id
"""

# The queue's figures for the metrics: each count on a partial index (todo and doing:
# procrastinate's; failed: bot_jobs_dead), never a scan of the finished jobs.
_STATS = """
SELECT (SELECT count(*) FROM procrastinate_jobs
         WHERE status = 'todo' AND queue_name = %(queue)s),
       (SELECT count(*) FROM procrastinate_jobs
         WHERE status = 'doing' AND queue_name = %(queue)s),
       (SELECT count(*) FROM procrastinate_jobs
         WHERE status = 'failed' AND queue_name = %(queue)s),
       ready.count, extract(epoch from ready.oldest)::float8
  FROM (SELECT count(*) AS count, min(scheduled_at) AS oldest FROM procrastinate_jobs
         WHERE status = 'todo' AND queue_name = %(queue)s
           AND (scheduled_at IS NULL OR scheduled_at <= to_timestamp(%(now)s))) AS ready
"""


class Held(NamedTuple):
    """A job its worker holds, and whether its abort was requested meanwhile."""

    job: Job
    aborting: bool


class AttemptFailed(Exception):
    """An attempt failed in a way another attempt may not: the only exception retried."""


class GaveUp(Exception):
    """The worker says trying again cannot help (`fail(retry=False)`): never retried."""


def retry_strategy(max_attempts: int) -> RetryStrategy:
    """procrastinate's strategy for our jobs, retry exceptions explicit (see the module)."""
    return RetryStrategy(max_attempts=max_attempts, retry_exceptions=(AttemptFailed,))


def _job(row: tuple[Any, ...]) -> Job:
    return Job(
        id=int(row[0]),
        kind=str(row[1]),
        delivery_id=str(row[2]),
        status=_STATUS[str(row[3])],
        attempts=int(row[4]),
        max_attempts=int(row[5]),
        run_after=float(row[6]),
        lease_owner=None if row[7] is None else str(row[7]),
        lease_until=None if row[8] is None else float(row[8]),
        last_error=None if row[9] is None else str(row[9]),
        lease_token=int(row[10]),
    )


def _at(epoch: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(epoch, tz=datetime.UTC)


def job_manager(store: PostgresStore) -> JobManager:
    """procrastinate's job manager over the store's pool (which stays the store's to close)."""
    connector = SyncPsycopgConnector()
    connector.open(pool=store.pool)
    return JobManager(connector)


def insert_jobs(
    conn: psycopg.Connection[Any],
    manager: JobManager,
    items: Sequence[tuple[str, float]],
    *,
    kind: str = DELIVERY_JOB,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> list[int | None]:
    """Defer one job per (delivery_id, now) inside the caller's transaction on `conn`; the
    job id of each, or None where (kind, delivery_id) has a job already."""
    if not items:
        return []
    deferred = manager.batch_defer_jobs(
        [
            pjobs.Job(
                queue=QUEUE,
                lock=None,
                queueing_lock=None,
                # Every kind runs the one task: the kind is ours (`bot_jobs`), the task
                # procrastinate's worker looks up by name.
                task_name=DELIVERY_JOB,
                task_kwargs={"delivery_id": delivery_id},
                # Ready from `now` on the queue's clock, as the contract's run_after.
                scheduled_at=_at(now),
            )
            for delivery_id, now in items
        ],
        connection=conn,
    )
    ids = [int(job.id or 0) for job in deferred]
    kept = {
        int(row[0])
        for row in conn.execute(
            "INSERT INTO bot_jobs (job_id, kind, delivery_id, max_attempts, enqueued_at)"
            " SELECT id, %s, delivery_id, %s, enqueued_at"
            " FROM unnest(%s::bigint[], %s::text[], %s::float8[]) AS t(id, delivery_id, enqueued_at)"
            " ON CONFLICT (kind, delivery_id) DO NOTHING RETURNING job_id",
            (kind, max_attempts, ids, [d for d, _ in items], [now for _, now in items]),
        )
    }
    dropped = [job_id for job_id in ids if job_id not in kept]
    if dropped:
        conn.execute("DELETE FROM procrastinate_jobs WHERE id = ANY(%s)", (dropped,))
    return [job_id if job_id in kept else None for job_id in ids]


class PostgresJobQueue(ThreadedQueue):
    """JobQueue over procrastinate's tables in the store's database.

    `clock` gives the time leases and retries are measured in; every machine's clock should
    agree within a small part of a lease (NTP does), as with any lease.
    """

    def __init__(self, store: PostgresStore, *, clock: Callable[[], float] | None = None) -> None:
        self.store = store
        self.clock = clock or store.clock
        self.manager = job_manager(store)

    async def watch(
        self,
        wake: Callable[[], None],
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Call `wake` when a job is committed from any machine (`bot.store.postgres.listen`)."""
        conninfo = self.store.pool.conninfo  # the pool's own DSN (a callable makes one)
        dsn = conninfo() if callable(conninfo) else conninfo
        await listen(dsn, channel(QUEUE), wake, task_status=task_status)

    # -- blocking implementations ----------------------------------------------------------

    def _procrastinate(self, conn: psycopg.Connection[Any], query: str, **args: object) -> None:
        """Run one of procrastinate's own queries on `conn`, inside its transaction."""
        self.manager.connector.execute_query_all_with_connection(
            conn, query=psql.queries[query], **args
        )

    def enqueue_sync(
        self, delivery_id: str, kind: str = DELIVERY_JOB, max_attempts: int = DEFAULT_MAX_ATTEMPTS
    ) -> int | None:
        with self.store.pool.connection() as conn:
            (job_id,) = insert_jobs(
                conn,
                self.manager,
                [(delivery_id, self.clock())],
                kind=kind,
                max_attempts=max_attempts,
            )
        return job_id

    def claim_sync(self, worker_id: str, lease_seconds: float) -> Job | None:
        now = self.clock()
        with self.store.pool.connection() as conn:
            self._recover_expired(conn, now)
            row = conn.execute(_FETCH, {"queue": QUEUE, "now": now}).fetchone()
            if row is None:
                return None
            job_id = int(row[0])
            conn.execute(
                "UPDATE bot_jobs SET lease_owner = %s, lease_until = %s,"
                " lease_token = lease_token + 1 WHERE job_id = %s",
                (worker_id, now + lease_seconds, job_id),
            )
            return self._get(conn, job_id)

    def _recover_expired(self, conn: psycopg.Connection[Any], now: float) -> None:
        """Leases that ran out: another attempt through procrastinate's retry, or, with no
        attempt left or an abort requested, failed (dead) through its finish."""
        expired = conn.execute(
            f"SELECT pj.id, pj.attempts + 1 >= bj.max_attempts OR pj.abort_requested FROM {_JOBS}"
            " WHERE bj.lease_until <= %s AND pj.status = 'doing'"
            " ORDER BY bj.lease_until LIMIT %s FOR UPDATE OF bj, pj SKIP LOCKED",
            (now, _EXPIRED_PER_CLAIM),
        ).fetchall()
        for job_id, last in expired:
            if last:
                self._procrastinate(
                    conn, "finish_job", job_id=job_id, status="failed", delete_job=False
                )
            else:
                self._procrastinate(
                    conn,
                    "retry_job",
                    job_id=job_id,
                    retry_at=_at(now),
                    new_priority=None,
                    new_queue_name=None,
                    new_lock=None,
                )
            conn.execute(
                "UPDATE bot_jobs SET lease_owner = NULL, lease_until = NULL,"
                " last_error = CASE WHEN %s THEN coalesce(last_error, 'lease expired')"
                " ELSE last_error END WHERE job_id = %s",
                (last, job_id),
            )

    def _held(self, conn: psycopg.Connection[Any], job_id: int, worker_id: str) -> Held:
        row = conn.execute(
            f"SELECT {_JOB_COLUMNS}, pj.abort_requested FROM {_JOBS} WHERE pj.id = %s"
            " FOR UPDATE OF bj, pj",
            (job_id,),
        ).fetchone()
        if row is None:
            raise LeaseLost(f"job {job_id} does not exist")
        job = _job(row)
        if job.status is not JobStatus.RUNNING or job.lease_owner != worker_id:
            raise LeaseLost(f"job {job_id} is no longer leased to {worker_id}")
        return Held(job, bool(row[11]))

    def heartbeat_sync(self, job_id: int, worker_id: str, lease_seconds: float) -> None:
        now = self.clock()
        with self.store.pool.connection() as conn:
            if self._held(conn, job_id, worker_id).aborting:
                # The worker stops as on a lost lease; the lease runs out and the job ends.
                raise LeaseLost(f"job {job_id} was aborted")
            conn.execute(
                "UPDATE bot_jobs SET lease_until = %s WHERE job_id = %s",
                (now + lease_seconds, job_id),
            )

    def still_holds_sync(self, job_id: int, worker_id: str, token: int) -> bool:
        """As `heartbeat` would see it, read only: a job whose abort was requested is no
        longer held either."""
        with self.store.pool.connection() as conn:
            row = conn.execute(
                f"SELECT 1 FROM {_JOBS} WHERE bj.job_id = %s AND pj.status = 'doing'"
                " AND NOT pj.abort_requested AND bj.lease_owner = %s AND bj.lease_token = %s"
                " AND bj.lease_until > %s",
                (job_id, worker_id, token, self.clock()),
            ).fetchone()
        return row is not None

    def complete_sync(self, job_id: int, worker_id: str) -> None:
        with self.store.pool.connection() as conn:
            self._held(conn, job_id, worker_id)
            self._procrastinate(
                conn, "finish_job", job_id=job_id, status="succeeded", delete_job=False
            )
            conn.execute(
                "UPDATE bot_jobs SET lease_owner = NULL, lease_until = NULL WHERE job_id = %s",
                (job_id,),
            )

    def defer_sync(self, job_id: int, worker_id: str, reason: str, not_before: float) -> Job:
        with self.store.pool.connection() as conn:
            _, aborting = self._held(conn, job_id, worker_id)
            if aborting:  # cancelled while it waited: it ends as `fail` would end it
                self._procrastinate(
                    conn, "finish_job", job_id=job_id, status="failed", delete_job=False
                )
                return self._get(conn, job_id)
            self._procrastinate(
                conn,
                "retry_job",
                job_id=job_id,
                retry_at=_at(max(self.clock(), not_before)),
                new_priority=None,
                new_queue_name=None,
                new_lock=None,
            )
            # procrastinate counts a retry as an attempt; a deferral is not one.
            conn.execute(
                "UPDATE procrastinate_jobs SET attempts = attempts - 1"
                " WHERE id = %s AND status = 'todo'",
                (job_id,),
            )
            conn.execute(
                "UPDATE bot_jobs SET lease_owner = NULL, lease_until = NULL, last_error = %s"
                " WHERE job_id = %s",
                (reason[:2000], job_id),
            )
            return self._get(conn, job_id)

    def fail_sync(
        self, job_id: int, worker_id: str, error: str, retry: bool, not_before: float | None
    ) -> Job:
        now = self.clock()
        with self.store.pool.connection() as conn:
            job, aborting = self._held(conn, job_id, worker_id)
            failure: BaseException
            if aborting:
                failure = JobAborted(error)
            else:
                failure = AttemptFailed(error) if retry else GaveUp(error)
            attempt = pjobs.Job(
                id=job.id,
                queue=QUEUE,
                lock=None,
                queueing_lock=None,
                task_name=job.kind,
                attempts=job.attempts,
            )
            decision = retry_strategy(job.max_attempts).get_retry_decision(
                exception=failure, job=attempt
            )
            if decision is None:
                self._procrastinate(
                    conn, "finish_job", job_id=job_id, status="failed", delete_job=False
                )
            else:
                run_after = max(now + backoff_seconds(job.attempts), not_before or 0.0)
                self._procrastinate(
                    conn,
                    "retry_job",
                    job_id=job_id,
                    retry_at=_at(run_after),
                    new_priority=None,
                    new_queue_name=None,
                    new_lock=None,
                )
            conn.execute(
                "UPDATE bot_jobs SET lease_owner = NULL, lease_until = NULL, last_error = %s"
                " WHERE job_id = %s",
                (error[:2000], job_id),
            )
            return self._get(conn, job_id)

    @staticmethod
    def _get(conn: psycopg.Connection[Any], job_id: int) -> Job:
        row = conn.execute(
            f"SELECT {_JOB_COLUMNS} FROM {_JOBS} WHERE pj.id = %s", (job_id,)
        ).fetchone()
        assert row is not None, f"job {job_id} vanished inside its transaction"
        return _job(row)

    def get_sync(self, job_id: int) -> Job | None:
        with self.store.pool.connection() as conn:
            row = conn.execute(
                f"SELECT {_JOB_COLUMNS} FROM {_JOBS} WHERE pj.id = %s", (job_id,)
            ).fetchone()
        return None if row is None else _job(row)

    def cancel_sync(self, delivery_ids: list[str], reason: str) -> list[Job]:
        """Cancel the waiting and running jobs (every kind) of `delivery_ids`; those this
        call cancelled, by id."""
        if not delivery_ids:
            return []
        with self.store.pool.connection() as conn:
            rows = conn.execute(
                f"SELECT pj.id, pj.status::text FROM {_JOBS}"
                " WHERE bj.delivery_id = ANY(%s) AND pj.status IN ('todo', 'doing')"
                " ORDER BY pj.id FOR UPDATE OF bj, pj",
                (delivery_ids,),
            ).fetchall()
            for job_id, status in rows:
                # A waiting job is cancelled there and then; a running one gets its abort
                # requested, and procrastinate's worker that runs it cancels its task (it
                # ends aborted: cancelled).
                self._procrastinate(
                    conn, "cancel_job", job_id=job_id, abort=status == "doing", delete_job=False
                )
            ids = [int(row[0]) for row in rows]
            conn.execute(
                "UPDATE bot_jobs SET lease_owner = NULL, lease_until = NULL, last_error = %s"
                " WHERE job_id = ANY(%s)",
                (reason[:2000], ids),
            )
            return [self._get(conn, job_id) for job_id in ids]

    def jobs_for_delivery(self, delivery_id: str) -> list[Job]:
        """The delivery's jobs (of every kind), oldest first."""
        with self.store.pool.connection() as conn:
            rows = conn.execute(
                f"SELECT {_JOB_COLUMNS} FROM {_JOBS} WHERE bj.delivery_id = %s ORDER BY pj.id",
                (delivery_id,),
            ).fetchall()
        return [_job(row) for row in rows]

    def counts_sync(self) -> dict[JobStatus, int]:
        counts = dict.fromkeys(JobStatus, 0)
        with self.store.pool.connection() as conn:
            rows = conn.execute(
                f"SELECT pj.status::text, count(*) FROM {_JOBS} GROUP BY pj.status"
            ).fetchall()
        for status, count in rows:
            counts[_STATUS[str(status)]] += int(count)
        return counts

    def stats_sync(self) -> QueueStats:
        """Counts by status (done jobs aside) and the oldest ready job's wait, in one
        statement over partial indexes: cheap enough to read at every metrics scrape."""
        now = self.clock()
        with self.store.pool.connection() as conn:
            row = conn.execute(_STATS, {"queue": QUEUE, "now": now}).fetchone()
        assert row is not None  # an aggregate always has its row
        queued, running, dead, ready, oldest = row
        return QueueStats(
            queued=int(queued),
            ready=int(ready),
            running=int(running),
            dead=int(dead),
            oldest_ready_age=0.0 if oldest is None else max(0.0, now - float(oldest)),
        )
