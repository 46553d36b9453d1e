"""The store's budget ledger and command counts, on both backends, two stores side by side
(two processes on one database)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.store.contract import Storage
from bot.store.postgres.store import PostgresStore
from bot.store.sqlite import Store
from tests.backends import BACKENDS

Opener = Callable[[], Storage]


@pytest.fixture(params=BACKENDS)
def open_store(request: pytest.FixtureRequest, data_dir: Path) -> Iterator[Opener]:
    opened: list[Storage] = []

    def opener() -> Storage:
        store: Storage
        if request.param == "sqlite":
            store = Store.open(data_dir / "bot.sqlite3")
        else:
            store = PostgresStore.open(request.getfixturevalue("postgres_dsn"))
        opened.append(store)
        return store

    try:
        yield opener
    finally:
        for store in opened:
            store.close()


def test_daily_tokens_add_up_per_installation_and_day_across_stores(open_store: Opener) -> None:
    stores = [open_store(), open_store()]
    start = threading.Barrier(8)

    def add(n: int) -> None:
        start.wait()
        stores[n % 2].add_daily_tokens(42, "2026-12-02", 100)

    threads = [threading.Thread(target=add, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stores[0].add_daily_tokens(42, "2026-12-03", 7)
    stores[1].add_daily_tokens(43, "2026-12-02", 5)
    assert stores[1].daily_tokens(42, "2026-12-02") == 800
    assert stores[0].daily_tokens(42, "2026-12-03") == 7
    assert stores[0].daily_tokens(43, "2026-12-02") == 5
    assert stores[0].daily_tokens(44, "2026-12-02") == 0


def test_commands_are_counted_per_person_and_repository_within_the_window(
    open_store: Opener,
) -> None:
    a, b = open_store(), open_store()
    assert [
        a.count_command(f"g-{n}", "octo/hello", "Maint", at=float(n), window=10) for n in range(3)
    ] == [1, 2, 3]
    # A retried job counts its delivery once; case does not make another person.
    assert b.count_command("g-2", "Octo/Hello", "maint", at=2.5, window=10) == 3
    assert b.count_command("g-9", "octo/hello", "alice", at=3.0, window=10) == 1
    assert b.count_command("g-8", "octo/other", "maint", at=3.0, window=10) == 1
    # Eleven seconds later the first two have left the window.
    assert a.count_command("g-3", "octo/hello", "maint", at=11.5, window=10) == 2


def test_the_notice_is_claimed_once_per_window(open_store: Opener) -> None:
    a, b = open_store(), open_store()
    assert a.claim_command_notice("octo/hello", "maint", at=100.0, window=3600)
    assert not b.claim_command_notice("octo/hello", "Maint", at=101.0, window=3600)
    assert not a.claim_command_notice("octo/hello", "maint", at=3699.0, window=3600)
    assert b.claim_command_notice("octo/hello", "alice", at=200.0, window=3600)
    assert b.claim_command_notice("octo/hello", "maint", at=3700.0, window=3600)
    assert not a.claim_command_notice("octo/hello", "maint", at=3701.0, window=3600)
