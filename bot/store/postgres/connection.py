"""Connections to Postgres: one pool per process, the shared queries' `Sql` over psycopg.

The pool hands each blocking call a connection of its own for the length of one statement
or transaction, so the event loop's thread pool, the intake and the queue share a few
connections instead of holding one per thread. A DSN may carry a password: it is never
logged (`display_dsn` is what logs show) and `Settings.secret_values` redacts it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool

from bot.store.contract import StoreError, storable_params

POOL_SIZE = 4
"""Connections per process at most unless BOT_DB_POOL_MAX says otherwise; what a whole
deployment holds is `process_connections` added up over its processes (the README's
"Receivers, durability and metrics" does the sum for compose.yaml)."""
JOB_POOL_SIZE = 2
"""Connections in the pool of procrastinate's worker, in a process that runs the worker pool
(fetching, finishing, heartbeats: bot/store/queue/procrastinate_app.py)."""
LISTEN_CONNECTIONS = 1
"""procrastinate's worker also listens for new jobs and aborts, outside its pool."""
CONNECT_TIMEOUT = 10.0


def process_connections(pool_max: int, *, runs_pool: bool) -> int:
    """The most connections one process holds: its pool, and where it runs the worker pool,
    procrastinate's worker's pool and listening connection. The schema migration's
    connection at start-up is closed before the pool opens, so it adds nothing to the peak."""
    return pool_max + (JOB_POOL_SIZE + LISTEN_CONNECTIONS if runs_pool else 0)


@functools.lru_cache(maxsize=512)
def to_pyformat(sql: str) -> str:
    """The shared queries' `?` placeholders as psycopg's `%s` (a literal `%` doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


class PgConn:
    """`bot.store.contract.Sql` over a psycopg connection (text parameters as `storable_params`:
    Postgres refuses a NUL in text, and a refusal would fail the same write for ever)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def all(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(to_pyformat(sql), storable_params(params)).fetchall()

    def one(self, sql: str, params: Sequence[object] = ()) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self.conn.execute(
            to_pyformat(sql), storable_params(params)
        ).fetchone()
        return row

    def run(self, sql: str, params: Sequence[object] = ()) -> int:
        return self.conn.execute(to_pyformat(sql), storable_params(params)).rowcount


def display_dsn(dsn: str) -> str:
    """The DSN without its password, for logs and messages."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.Error:
        return "postgresql://(unparsable DSN)"
    user = f"{parts['user']}@" if parts.get("user") else ""
    host = str(parts.get("host") or "")
    port = f":{parts['port']}" if parts.get("port") else ""
    where = f"{host}{port}" if not host.startswith("/") else f"?host={host}"
    dbname = str(parts.get("dbname") or "")
    if where.startswith("?"):
        return f"postgresql://{user}/{dbname}{where}"
    return f"postgresql://{user}{where}/{dbname}"


def connect(dsn: str) -> psycopg.Connection[Any]:
    """One connection outside the pool; StoreError (without the password) when it fails."""
    try:
        return psycopg.connect(dsn, connect_timeout=int(CONNECT_TIMEOUT))
    except psycopg.Error as exc:
        # psycopg's message names the host and user, never the password.
        raise StoreError(
            f"cannot connect to Postgres at {display_dsn(dsn)}: {str(exc).strip()}; "
            "check BOT_DATABASE_URL and that the server is running"
        ) from None


def open_pool(dsn: str, *, max_size: int = POOL_SIZE) -> ConnectionPool:
    """An open pool; StoreError (without the password) when the server cannot be reached."""
    pool: ConnectionPool = ConnectionPool(
        dsn,
        min_size=1,
        max_size=max_size,
        open=False,
        name="bot",
        check=ConnectionPool.check_connection,
        timeout=30.0,
    )
    try:
        pool.open(wait=True, timeout=CONNECT_TIMEOUT)
    except psycopg.Error as exc:
        pool.close()
        raise StoreError(
            f"cannot connect to Postgres at {display_dsn(dsn)} ({type(exc).__name__}); "
            "check BOT_DATABASE_URL and that the server is running"
        ) from None
    return pool


@contextmanager
def transaction(pool: ConnectionPool) -> Iterator[PgConn]:
    """A pooled connection in a transaction: committed when the block ends, else rolled back."""
    with pool.connection() as conn:
        yield PgConn(conn)
