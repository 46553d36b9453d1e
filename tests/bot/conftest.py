"""Fixtures for the store's tests: `open_store`, the store of each backend."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.store.contract import Storage
from bot.store.postgres.store import PostgresStore
from bot.store.sqlite import Store
from tests.backends import BACKENDS


@pytest.fixture(params=BACKENDS)
def open_store(request: pytest.FixtureRequest, data_dir: Path) -> Iterator[Callable[..., Storage]]:
    """Opens the backend's store (again, on the same database, when called again), with the
    clock given (default: `time.time`); each is closed after the test."""
    opened: list[Storage] = []

    def opener(clock: Callable[[], float] = time.time) -> Storage:
        store: Storage
        if request.param == "sqlite":
            store = Store.open(data_dir / "bot.sqlite3", clock=clock)
        else:
            store = PostgresStore.open(request.getfixturevalue("postgres_dsn"), clock=clock)
        opened.append(store)
        return store

    yield opener
    for store in opened:
        store.close()
