"""The two storage backends side by side, for tests that run on both (see `open_store`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.store.contract import Storage
from bot.store.postgres.store import PostgresStore
from bot.store.sqlite import Store

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
