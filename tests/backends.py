"""The two storage backends side by side, for tests that run on both (see `open_store`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.store.contract import Storage
from bot.store.postgres.store import PostgresStore
from bot.store.queue.base import Job, backoff_seconds
from bot.store.queue.postgres import PostgresJobQueue
from bot.store.queue.sqlite import SqliteJobQueue
from bot.store.sqlite import MIGRATIONS, Store, connect

BACKENDS = ("sqlite", "postgres")


def backend_store(request: pytest.FixtureRequest, data_dir: Path) -> Iterator[Storage]:
    """The body of a fixture parametrised over BACKENDS: a fresh store of that backend, closed
    after the test (Postgres through the `postgres_dsn` fixture, which skips without one)."""
    opened: Storage
    if request.param == "sqlite":
        opened = Store.open(data_dir / "bot.db")
    else:
        opened = PostgresStore.open(request.getfixturevalue("postgres_dsn"))
    try:
        yield opened
    finally:
        opened.close()


def execute(store: Storage, sql: str, *params: object) -> None:
    """A statement (`?` placeholders) on the backend's own connection, committed."""
    if isinstance(store, Store):
        store.conn().execute(sql, params)
    else:
        assert isinstance(store, PostgresStore)
        with store.pool.connection() as conn:
            conn.execute(sql.replace("?", "%s"), params)


def query(store: Storage, sql: str, *params: object) -> list[tuple[object, ...]]:
    """The rows of a query (`?` placeholders) on the backend's own connection."""
    if isinstance(store, Store):
        return list(store.conn().execute(sql, params).fetchall())
    assert isinstance(store, PostgresStore)
    with store.pool.connection() as conn:
        return list(conn.execute(sql.replace("?", "%s"), params).fetchall())


def insert_delivery(
    store: Storage,
    guid: str,
    received_at: float = 1.0,
    *,
    event: str = "issues",
    action: str | None = "opened",
    body: bytes = b"{}",
) -> None:
    """A delivery row as the intake stores it (a tiny body by default), without a job."""
    execute(
        store,
        "INSERT INTO deliveries (guid, event, action, received_at, headers, body)"
        ' VALUES (?, ?, ?, ?, \'{"x-github-event": "issues"}\', ?)',
        guid,
        event,
        action,
        received_at,
        body,
    )


def take_job(store: Storage) -> Job:
    """The next ready job, taken the way a worker of the backend takes it: claimed by the
    pool's loop (SQLite), or fetched by a procrastinate worker, registered for it (Postgres)."""
    if isinstance(store, Store):
        job = SqliteJobQueue(store).claim_sync("w", 60)
        assert job is not None
        return job
    assert isinstance(store, PostgresStore)
    with store.pool.connection() as conn:
        row = conn.execute("SELECT procrastinate_register_worker_v1()").fetchone()
        assert row is not None
        fetched = conn.execute(
            "SELECT id FROM procrastinate_fetch_job_v2(ARRAY['bot']::varchar[], %s)", (row[0],)
        ).fetchone()
    assert fetched is not None and fetched[0] is not None
    job = PostgresJobQueue(store).get_sync(int(fetched[0]))
    assert job is not None
    return job


def end_job(store: Storage, job: Job, how: str, error: str = "boom") -> None:
    """End a taken job as its worker would: `done`, `dead` (given up), or `retry` (failed,
    back in the queue after the contract's first backoff on the store's clock)."""
    if isinstance(store, Store):
        queue = SqliteJobQueue(store)
        if how == "done":
            queue.complete_sync(job.id, "w")
        else:
            queue.fail_sync(job.id, "w", error, how == "retry", None)
        return
    assert isinstance(store, PostgresStore)
    with store.pool.connection() as conn:
        conn.execute("UPDATE bot_jobs SET last_error = %s WHERE job_id = %s", (error, job.id))
        if how == "retry":
            conn.execute(
                "SELECT procrastinate_retry_job_v2(%s, to_timestamp(%s), NULL, NULL, NULL)",
                (job.id, store.clock() + backoff_seconds(job.attempts)),
            )
        else:
            status = "succeeded" if how == "done" else "failed"
            conn.execute("SELECT procrastinate_finish_job_v1(%s, %s, false)", (job.id, status))


def sqlite_before(path: Path, step: str) -> sqlite3.Connection:
    """A SQLite database at `path` migrated up to, not including, the migration `step` (one of
    `bot.store.sqlite.MIGRATIONS`), as an older release left it; the caller closes it."""
    conn = connect(path)
    before = MIGRATIONS.index(step)
    for earlier in MIGRATIONS[:before]:
        for statement in earlier.split(";"):
            if statement.strip():
                conn.execute(statement)
    conn.execute(f"PRAGMA user_version={before}")
    return conn
