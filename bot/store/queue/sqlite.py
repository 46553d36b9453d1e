"""The JobQueue on SQLite: the jobs table lives in the store's file, beside the deliveries."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from bot.store.contract import Sql
from bot.store.queue.base import (
    DEFAULT_MAX_ATTEMPTS,
    DELIVERY_JOB,
    Job,
    JobStatus,
    LeaseLost,
    QueueStats,
    ThreadedLeasedQueue,
    backoff_seconds,
)
from bot.store.retry import Retried, retry_in
from bot.store.sqlite import Store, _Conn, transaction

T = TypeVar("T")
_BATCH = 500  # ids per statement, well under SQLite's limit on bound parameters

_COLUMNS = (
    "id, kind, delivery_id, status, attempts, max_attempts, run_after, lease_owner, lease_until,"
    " last_error, lease_token"
)


def insert_job(
    conn: sqlite3.Connection,
    delivery_id: str,
    now: float,
    *,
    kind: str = DELIVERY_JOB,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> int | None:
    """Insert a job inside the caller's transaction; None when (kind, delivery_id) exists."""
    cursor = conn.execute(
        "INSERT OR IGNORE INTO jobs (kind, delivery_id, max_attempts, run_after, created_at,"
        " updated_at) VALUES (?, ?, ?, ?, ?, ?)",
        (kind, delivery_id, max_attempts, now, now, now),
    )
    return cursor.lastrowid if cursor.rowcount == 1 else None


def insert_jobs(
    conn: sqlite3.Connection,
    items: list[tuple[str, float]],
    *,
    kind: str = DELIVERY_JOB,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> None:
    """Insert one job per (delivery_id, now) in one statement, inside the caller's transaction."""
    if not items:
        return
    values: list[object] = []
    for delivery_id, now in items:
        values.extend((kind, delivery_id, max_attempts, now, now, now))
    conn.execute(
        "INSERT OR IGNORE INTO jobs (kind, delivery_id, max_attempts, run_after, created_at,"
        " updated_at) VALUES " + ",".join(["(?, ?, ?, ?, ?, ?)"] * len(items)),
        values,
    )


def _job(row: tuple[Any, ...]) -> Job:
    return Job(
        id=int(row[0]),
        kind=str(row[1]),
        delivery_id=str(row[2]),
        status=JobStatus(str(row[3])),
        attempts=int(row[4]),
        max_attempts=int(row[5]),
        run_after=float(row[6]),
        lease_owner=None if row[7] is None else str(row[7]),
        lease_until=None if row[8] is None else float(row[8]),
        last_error=None if row[9] is None else str(row[9]),
        lease_token=int(row[10]),
    )


class SqliteJobQueue(ThreadedLeasedQueue):
    """LeasedQueue over the store's SQLite file; blocking work runs on anyio's thread pool."""

    def __init__(self, store: Store, *, clock: Callable[[], float] | None = None) -> None:
        self.store = store
        self.clock = clock or store.clock

    # -- blocking implementations ----------------------------------------------------------

    def enqueue_sync(
        self, delivery_id: str, kind: str = DELIVERY_JOB, max_attempts: int = DEFAULT_MAX_ATTEMPTS
    ) -> int | None:
        conn = self.store.conn()
        with transaction(conn):
            return insert_job(conn, delivery_id, self.clock(), kind=kind, max_attempts=max_attempts)

    def claim_sync(self, worker_id: str, lease_seconds: float) -> Job | None:
        conn = self.store.conn()
        now = self.clock()
        with transaction(conn):
            # A job whose last lease ran out with no attempts left is dead, not claimable.
            conn.execute(
                "UPDATE jobs SET status = 'dead', lease_owner = NULL, lease_until = NULL,"
                " last_error = coalesce(last_error, 'lease expired'), updated_at = ?"
                " WHERE status = 'running' AND lease_until <= ? AND attempts >= max_attempts",
                (now, now),
            )
            row = conn.execute(
                f"UPDATE jobs SET status = 'running', lease_owner = ?, lease_until = ?,"
                f" lease_token = lease_token + 1, attempts = attempts + 1, updated_at = ?"
                f" WHERE id = (SELECT id FROM jobs WHERE attempts < max_attempts AND"
                f" ((status = 'queued' AND run_after <= ?)"
                f" OR (status = 'running' AND lease_until <= ?))"
                f" ORDER BY run_after, id LIMIT 1)"
                f" RETURNING {_COLUMNS}",
                (worker_id, now + lease_seconds, now, now, now),
            ).fetchone()
        return None if row is None else _job(row)

    def _held(self, conn: sqlite3.Connection, job_id: int, worker_id: str) -> Job:
        row = conn.execute(f"SELECT {_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise LeaseLost(f"job {job_id} does not exist")
        job = _job(row)
        if job.status is not JobStatus.RUNNING or job.lease_owner != worker_id:
            raise LeaseLost(f"job {job_id} is no longer leased to {worker_id}")
        return job

    def heartbeat_sync(self, job_id: int, worker_id: str, lease_seconds: float) -> None:
        conn = self.store.conn()
        now = self.clock()
        with transaction(conn):
            self._held(conn, job_id, worker_id)
            conn.execute(
                "UPDATE jobs SET lease_until = ?, updated_at = ? WHERE id = ?",
                (now + lease_seconds, now, job_id),
            )

    def still_holds_sync(self, job_id: int, worker_id: str, token: int) -> bool:
        row = (
            self.store.conn()
            .execute(
                "SELECT 1 FROM jobs WHERE id = ? AND status = 'running' AND lease_owner = ?"
                " AND lease_token = ? AND lease_until > ?",
                (job_id, worker_id, token, self.clock()),
            )
            .fetchone()
        )
        return row is not None

    def complete_sync(self, job_id: int, worker_id: str) -> None:
        conn = self.store.conn()
        with transaction(conn):
            self._held(conn, job_id, worker_id)
            conn.execute(
                "UPDATE jobs SET status = 'done', lease_owner = NULL, lease_until = NULL,"
                " updated_at = ? WHERE id = ?",
                (self.clock(), job_id),
            )

    def defer_sync(self, job_id: int, worker_id: str, reason: str, not_before: float) -> Job:
        conn = self.store.conn()
        now = self.clock()
        with transaction(conn):
            self._held(conn, job_id, worker_id)
            row = conn.execute(
                f"UPDATE jobs SET status = 'queued', run_after = ?, attempts = attempts - 1,"
                f" lease_owner = NULL, lease_until = NULL, last_error = ?, updated_at = ?"
                f" WHERE id = ? RETURNING {_COLUMNS}",
                (max(now, not_before), reason[:2000], now, job_id),
            ).fetchone()
        return _job(row)

    def fail_sync(
        self, job_id: int, worker_id: str, error: str, retry: bool, not_before: float | None
    ) -> Job:
        conn = self.store.conn()
        now = self.clock()
        with transaction(conn):
            job = self._held(conn, job_id, worker_id)
            dead = not retry or job.attempts >= job.max_attempts
            run_after = max(now + backoff_seconds(job.attempts), not_before or 0.0)
            row = conn.execute(
                f"UPDATE jobs SET status = ?, run_after = ?, lease_owner = NULL,"
                f" lease_until = NULL, last_error = ?, updated_at = ? WHERE id = ?"
                f" RETURNING {_COLUMNS}",
                (
                    JobStatus.DEAD if dead else JobStatus.QUEUED,
                    now if dead else run_after,
                    error[:2000],
                    now,
                    job_id,
                ),
            ).fetchone()
        return _job(row)

    def cancel_sync(self, delivery_ids: list[str], reason: str) -> list[Job]:
        conn = self.store.conn()
        now = self.clock()
        cancelled: list[Job] = []
        with transaction(conn):
            for start in range(0, len(delivery_ids), _BATCH):
                batch = delivery_ids[start : start + _BATCH]
                rows = conn.execute(
                    f"UPDATE jobs SET status = 'cancelled', lease_owner = NULL,"
                    f" lease_until = NULL, last_error = ?, updated_at = ?"
                    f" WHERE status IN ('queued', 'running')"
                    f" AND delivery_id IN ({','.join('?' * len(batch))})"
                    f" RETURNING {_COLUMNS}",
                    (reason[:2000], now, *batch),
                ).fetchall()
                cancelled.extend(_job(row) for row in rows)
        return sorted(cancelled, key=lambda job: job.id)

    def get_sync(self, job_id: int) -> Job | None:
        row = (
            self.store.conn()
            .execute(f"SELECT {_COLUMNS} FROM jobs WHERE id = ?", (job_id,))
            .fetchone()
        )
        return None if row is None else _job(row)

    def jobs_for_delivery(self, delivery_id: str) -> list[Job]:
        rows = self.store.conn().execute(
            f"SELECT {_COLUMNS} FROM jobs WHERE delivery_id = ? ORDER BY id", (delivery_id,)
        )
        return [_job(row) for row in rows]

    def retry_sync(
        self, guids: Sequence[str], *, source: str, dry_run: bool = False
    ) -> list[Retried]:
        """Run these stored deliveries again where `policies.retry` allows (bot.store.retry)."""
        return retry_sync(self.store, guids, source=source, dry_run=dry_run)

    def counts_sync(self) -> dict[JobStatus, int]:
        counts = dict.fromkeys(JobStatus, 0)
        for status, count in self.store.conn().execute(
            "SELECT status, count(*) FROM jobs GROUP BY status"
        ):
            counts[JobStatus(status)] = int(count)
        return counts

    def stats_sync(self) -> QueueStats:
        """Counts by status (done jobs aside) and the oldest ready job's wait, from the
        `jobs_ready` index alone: cheap enough to read at every metrics scrape."""
        now = self.clock()
        conn = self.store.conn()
        counts = dict(
            conn.execute(
                "SELECT status, count(*) FROM jobs"
                " WHERE status IN ('queued', 'running', 'dead') GROUP BY status"
            ).fetchall()
        )
        ready, oldest = conn.execute(
            "SELECT count(*), min(run_after) FROM jobs WHERE status = 'queued' AND run_after <= ?",
            (now,),
        ).fetchone()
        return QueueStats(
            queued=int(counts.get("queued", 0)),
            ready=int(ready),
            running=int(counts.get("running", 0)),
            dead=int(counts.get("dead", 0)),
            oldest_ready_age=0.0 if oldest is None else max(0.0, now - float(oldest)),
        )


class SqliteJobHistory:
    """`bot.store.retry.JobHistory` over the `jobs` table, on the connection `db` wraps."""

    def jobs_of(self, db: Sql, guids: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
        out: dict[str, list[tuple[str, str]]] = {}
        for start in range(0, len(guids), _BATCH):
            batch = list(guids[start : start + _BATCH])
            rows = db.all(
                f"SELECT delivery_id, kind, status FROM jobs"
                f" WHERE delivery_id IN ({','.join('?' * len(batch))}) ORDER BY id",
                batch,
            )
            for guid, kind, status in rows:
                out.setdefault(str(guid), []).append((str(kind), str(status)))
        return out

    def add_job(self, db: Sql, guid: str, kind: str, now: float) -> bool:
        assert isinstance(db, _Conn)
        return insert_job(db.conn, guid, now, kind=kind) is not None


def retry_sync(
    store: Store, guids: Sequence[str], *, source: str, dry_run: bool = False
) -> list[Retried]:
    """`bot.store.retry.retry_in` in a transaction of its own on the store's file."""
    conn = store.conn()
    with transaction(conn):
        return retry_in(
            _Conn(conn),
            SqliteJobHistory(),
            guids,
            now=store.clock(),
            source=source,
            dry_run=dry_run,
        )
