"""The scale-out backend: deliveries, runs and review state in Postgres, beside the jobs.

The queries are `bot.store.contract.Storage`'s; this module adds the connection pool and the schema
(`bot.store.postgres.schema`, migrated when the store opens). A delivery's body is a `bytea` in its
row: the segment files are the SQLite backend's way around its write-ahead log, and every
process on every machine must be able to read every body. So must every run artifact: the
engine writes each to its run folder and here (`run_artifacts`), so that a run interrupted on
one machine resumes on another from its journal, and any machine can show what a run did.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager

import psycopg
from psycopg_pool import ConnectionPool

from bot.log import get_logger
from bot.store.contract import Storage
from bot.store.postgres.connection import (
    POOL_SIZE,
    PgConn,
    connect,
    display_dsn,
    open_pool,
    transaction,
)
from bot.store.postgres.schema import migrate

log = get_logger(__name__)


class PostgresStore(Storage):
    """The bot's tables in one Postgres database, reached through a pool of connections."""

    _rowid = "seq"
    _for_update = " FOR UPDATE"
    # A delivery's job is procrastinate's row and ours (bot.store.queue.postgres), named as the
    # JobQueue names them: an aborted job is one cancelled while it ran.
    _delivery_jobs = (
        "SELECT bj.delivery_id, CASE pj.status WHEN 'todo' THEN 'queued'"
        " WHEN 'doing' THEN 'running' WHEN 'succeeded' THEN 'done' WHEN 'failed' THEN 'dead'"
        " ELSE 'cancelled' END, pj.attempts + (pj.status = 'doing')::int - bj.deferrals, bj.max_attempts,"
        " bj.last_error FROM bot_jobs AS bj JOIN procrastinate_jobs AS pj ON pj.id = bj.job_id"
        " WHERE bj.kind = 'delivery' AND bj.delivery_id IN ({marks})"
    )

    _queue_states = (
        "SELECT coalesce(d.workflow, ''), CASE"
        " WHEN pj.status = 'todo' AND pj.attempts - bj.deferrals > 0 THEN 'failed'"
        " WHEN pj.status = 'todo' AND pj.scheduled_at > to_timestamp(?) THEN 'deferred'"
        " WHEN pj.status = 'todo' THEN 'queued' WHEN pj.status = 'doing' THEN 'running'"
        " ELSE 'dead' END, count(*), min(bj.enqueued_at)"
        " FROM bot_jobs AS bj JOIN procrastinate_jobs AS pj ON pj.id = bj.job_id"
        " LEFT JOIN deliveries AS d ON d.guid = bj.delivery_id"
        " WHERE pj.status IN ('todo', 'doing', 'failed') GROUP BY 1, 2"
    )

    def __init__(
        self, pool: ConnectionPool, *, where: str, clock: Callable[[], float] = time.time
    ) -> None:
        super().__init__(where=where, clock=clock)
        self.pool = pool

    @classmethod
    def open(
        cls, dsn: str, *, clock: Callable[[], float] = time.time, pool_size: int = POOL_SIZE
    ) -> PostgresStore:
        """Connect, migrate the schema and open the pool; StoreError when any of it fails."""
        conn = connect(dsn)
        try:
            migrate(conn)
        finally:
            conn.close()
        return cls(open_pool(dsn, max_size=pool_size), where=display_dsn(dsn), clock=clock)

    def _session(self) -> AbstractContextManager[PgConn]:
        # A statement alone is its own transaction; the pool commits when it gets it back.
        return transaction(self.pool)

    def _transaction(self) -> AbstractContextManager[PgConn]:
        return transaction(self.pool)

    def ping(self) -> bool:
        """True when the database answers a query."""
        try:
            with transaction(self.pool) as db:
                db.all("SELECT 1 FROM deliveries LIMIT 1")
        except psycopg.Error:
            return False
        return True

    def close(self) -> None:
        self.pool.close()
