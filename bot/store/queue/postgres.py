"""The JobQueue on Postgres: procrastinate's job table, and our row beside each job.

A job is a row of `procrastinate_jobs` (task `delivery`, queue `bot`, the delivery id in its
args), created by procrastinate's `JobManager.batch_defer_jobs` inside the caller's
transaction, so the intake commits a delivery and its job together. procrastinate's own
worker runs the jobs (`bot.runs.procrastinate_pool`, with `bot.store.queue.procrastinate_app`):
it claims them, heartbeats, retries, aborts and recovers them, so this queue keeps only the
part of the contract every backend shares (`bot.store.queue.base.JobQueue`), mapped onto
procrastinate like this:

- status: todo is queued, doing is running, succeeded is done, failed is dead; cancelled
  (while it waited) and aborted (while it ran) are cancelled. Attempts are procrastinate's
  own counter (finished attempts) plus the one running, less the deferrals
  (`bot_jobs.deferrals`: procrastinate counts a deferral as an attempt, the contract not).
- enqueue dedupes by the unique key (kind, delivery_id) of `bot_jobs`, our row beside
  procrastinate's: its `queueing_lock` only holds while a job waits, and a delivery must get
  one job for good. The loser of a race drops the job it deferred, in its own transaction.
  Every kind is the one task `delivery`; the kind (a replay's) is ours.
- cancel: a waiting job through procrastinate's `cancel_job`; a running one gets its abort
  requested (`cancel_job` with abort), which procrastinate's worker that runs it hears (its
  LISTEN/NOTIFY, else its poll) and answers by cancelling the job's task: it ends aborted.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from procrastinate import SyncPsycopgConnector
from procrastinate import jobs as pjobs
from procrastinate import sql as psql
from procrastinate.manager import JobManager

from bot.store.contract import Sql
from bot.store.postgres.connection import PgConn
from bot.store.postgres.store import PostgresStore
from bot.store.queue.base import (
    DEFAULT_MAX_ATTEMPTS,
    DELIVERY_JOB,
    Job,
    JobStatus,
    QueueStats,
    ThreadedQueue,
)
from bot.store.retry import Retried, retry_in

QUEUE = "bot"

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
    " bj.last_error"
)
_JOBS = "bot_jobs AS bj JOIN procrastinate_jobs AS pj ON pj.id = bj.job_id"

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


def _job(row: tuple[Any, ...]) -> Job:
    return Job(
        id=int(row[0]),
        kind=str(row[1]),
        delivery_id=str(row[2]),
        status=_STATUS[str(row[3])],
        attempts=int(row[4]),
        max_attempts=int(row[5]),
        run_after=float(row[6]),
        # procrastinate's worker holds a running job, not a lease (its `worker_id`).
        lease_owner=None,
        lease_until=None,
        last_error=None if row[7] is None else str(row[7]),
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

    `clock` dates the jobs it enqueues (ready from then on); procrastinate's worker measures
    time by the database server's clock.
    """

    def __init__(self, store: PostgresStore, *, clock: Callable[[], float] | None = None) -> None:
        self.store = store
        self.clock = clock or store.clock
        self.manager = job_manager(store)

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
                "UPDATE bot_jobs SET last_error = %s WHERE job_id = ANY(%s)", (reason[:2000], ids)
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

    def retry_sync(
        self, guids: Sequence[str], *, source: str, dry_run: bool = False
    ) -> list[Retried]:
        """Run these stored deliveries again where `policies.retry` allows (bot.store.retry)."""
        return retry_sync(self.store, self.manager, guids, source=source, dry_run=dry_run)

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


_STATUS_SQL = (
    "CASE pj.status WHEN 'todo' THEN 'queued' WHEN 'doing' THEN 'running'"
    " WHEN 'succeeded' THEN 'done' WHEN 'failed' THEN 'dead' ELSE 'cancelled' END"
)


class PostgresJobHistory:
    """`bot.store.retry.JobHistory` over procrastinate's jobs and ours, on `db`'s connection."""

    def __init__(self, manager: JobManager) -> None:
        self.manager = manager

    def jobs_of(self, db: Sql, guids: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
        out: dict[str, list[tuple[str, str]]] = {}
        if not guids:
            return out
        assert isinstance(db, PgConn)
        rows = db.conn.execute(
            f"SELECT bj.delivery_id, bj.kind, {_STATUS_SQL} FROM {_JOBS}"
            " WHERE bj.delivery_id = ANY(%s) ORDER BY pj.id",
            (list(guids),),
        ).fetchall()
        for guid, kind, status in rows:
            out.setdefault(str(guid), []).append((str(kind), str(status)))
        return out

    def add_job(self, db: Sql, guid: str, kind: str, now: float) -> bool:
        assert isinstance(db, PgConn)
        (job_id,) = insert_jobs(db.conn, self.manager, [(guid, now)], kind=kind)
        return job_id is not None


def retry_sync(
    store: PostgresStore,
    manager: JobManager,
    guids: Sequence[str],
    *,
    source: str,
    dry_run: bool = False,
) -> list[Retried]:
    """`bot.store.retry.retry_in` in a transaction of its own."""
    with store.pool.connection() as conn:
        return retry_in(
            PgConn(conn),
            PostgresJobHistory(manager),
            guids,
            now=store.clock(),
            source=source,
            dry_run=dry_run,
        )
