"""Group commit: concurrent deliveries share transactions, duplicates are decided by the key."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from bot.intake.delivery_writer import DeliveryWriter, IncomingDelivery
from bot.store.queue.base import JobStatus
from bot.store.queue.sqlite import SqliteJobQueue
from bot.store.sqlite import Store, StoreError

pytestmark = pytest.mark.anyio


def _delivery(guid: str) -> IncomingDelivery:
    return IncomingDelivery(
        guid=guid,
        event="issues",
        action="opened",
        hook_id="1",
        target_type="repository",
        target_id="2",
        headers_json=json.dumps({"x-github-event": "issues"}),
        body=b'{"action":"opened"}',
        received_at=1.0,
    )


@pytest.fixture
def store(data_dir: Path) -> Iterator[Store]:
    store = Store.open(data_dir / "bot.sqlite3")
    yield store
    store.close()


async def test_concurrent_deliveries_are_committed_in_shared_batches(store: Store) -> None:
    commits: list[int] = []
    writer = DeliveryWriter(store.path, on_commit=commits.append)
    writer.start()
    results: dict[str, bool] = {}

    async def submit(guid: str) -> None:
        results[guid] = await writer.submit(_delivery(guid))

    try:
        async with anyio.create_task_group() as tasks:
            for n in range(200):
                tasks.start_soon(submit, f"g-{n}")
    finally:
        writer.stop()
    assert results == {f"g-{n}": True for n in range(200)}
    assert store.count_deliveries() == 200
    assert SqliteJobQueue(store).counts_sync()[JobStatus.QUEUED] == 200
    assert writer.rows == 200
    assert writer.batches < 200  # requests arriving together shared commits
    await anyio.lowlevel.checkpoint()  # let the loop run the commit callbacks
    assert sum(commits) == 200


async def test_concurrent_duplicates_get_one_new_and_one_job(store: Store) -> None:
    writer = DeliveryWriter(store.path)
    writer.start()
    outcomes: list[bool] = []

    async def submit() -> None:
        outcomes.append(await writer.submit(_delivery("same")))

    try:
        async with anyio.create_task_group() as tasks:
            for _ in range(20):
                tasks.start_soon(submit)
        assert await writer.submit(_delivery("same")) is False
    finally:
        writer.stop()
    assert sorted(outcomes) == [False] * 19 + [True]
    assert len(SqliteJobQueue(store).jobs_for_delivery("same")) == 1


async def test_stored_row_keeps_body_headers_and_metadata(store: Store) -> None:
    writer = DeliveryWriter(store.path)
    writer.start()
    try:
        assert await writer.submit(_delivery("g-1")) is True
    finally:
        writer.stop()
    row = store.get_delivery("g-1")
    assert row is not None
    assert (row.event, row.action, row.hook_id, row.target_type, row.target_id) == (
        "issues",
        "opened",
        "1",
        "repository",
        "2",
    )
    assert row.body == b'{"action":"opened"}'
    assert row.headers == {"x-github-event": "issues"}


async def test_submit_to_a_stopped_writer_is_a_store_error(store: Store) -> None:
    writer = DeliveryWriter(store.path)
    with pytest.raises(StoreError, match="not running"):
        await writer.submit(_delivery("g-1"))
    writer.start()
    writer.stop()
    with pytest.raises(StoreError, match="not running"):
        await writer.submit(_delivery("g-1"))


async def test_a_failing_database_answers_every_request_with_an_error(store: Store) -> None:
    writer = DeliveryWriter(store.path)
    writer.start()
    store.conn().execute("DROP TABLE jobs")
    try:
        with pytest.raises(StoreError, match="not stored"):
            await writer.submit(_delivery("g-1"))
    finally:
        writer.stop()
    assert store.count_deliveries() == 0  # the delivery and its job commit together or not at all


async def test_stop_leaves_the_wal_checkpointed(store: Store) -> None:
    writer = DeliveryWriter(store.path, checkpoint_interval=0.05)
    writer.start()
    try:
        for n in range(50):
            await writer.submit(_delivery(f"g-{n}"))
    finally:
        writer.stop()
    wal = store.path.with_name(store.path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0


def _large(guid: str) -> IncomingDelivery:
    body = json.dumps({"action": "opened", "text": "x" * 10_000}).encode()
    return IncomingDelivery(
        guid=guid,
        event="issues",
        action="opened",
        hook_id=None,
        target_type=None,
        target_id=None,
        headers_json="{}",
        body=body,
        received_at=1.0,
    )


async def test_writers_of_one_file_take_turns_and_lose_nothing(store: Store) -> None:
    """Two writers on one database, as two receiver processes have (each its own connection
    and its own open of the lock file), committing at once: every row stored once."""
    writers = [DeliveryWriter(store.path), DeliveryWriter(store.path)]
    for writer in writers:
        writer.start()
    results: dict[str, bool] = {}

    async def submit(writer: DeliveryWriter, guid: str) -> None:
        delivery = _large(guid) if guid.endswith("0") else _delivery(guid)
        results[guid] = await writer.submit(delivery)

    try:
        async with anyio.create_task_group() as tasks:
            for n in range(300):
                tasks.start_soon(submit, writers[n % 2], f"g-{n}")
            for n in range(0, 300, 3):  # the same deliveries again, through the other writer
                tasks.start_soon(submit, writers[(n + 1) % 2], f"g-{n}")
    finally:
        for writer in writers:
            writer.stop()
    assert store.count_deliveries() == 300
    assert SqliteJobQueue(store).counts_sync()[JobStatus.QUEUED] == 300
    assert sum(writer.rows for writer in writers) == 400
    for n in range(0, 300, 10):
        assert store.get_delivery(f"g-{n}") is not None
    assert store.get_delivery("g-10").body == _large("g-10").body  # type: ignore[union-attr]


def _hold_write_lock(path: Path, release: threading.Event, held: threading.Event) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    held.set()
    release.wait(30)
    conn.execute("ROLLBACK")
    conn.close()


async def test_a_writer_waits_for_another_connections_write_lock(store: Store) -> None:
    writer = DeliveryWriter(store.path, busy_timeout=20)
    writer.start()
    release, held = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_write_lock, args=(store.path, release, held))
    holder.start()
    try:
        held.wait(10)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(writer.submit, _delivery("g-1"))
            await anyio.sleep(0.3)  # the writer is waiting on the lock by now
            assert store.count_deliveries() == 0
            release.set()
    finally:
        release.set()
        holder.join()
        writer.stop()
    assert store.count_deliveries() == 1


async def test_a_lock_held_past_the_busy_timeout_fails_the_batch_and_nothing_is_stored(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    writer = DeliveryWriter(store.path, busy_timeout=0.2)
    writer.start()
    release, held = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_write_lock, args=(store.path, release, held))
    holder.start()
    try:
        held.wait(10)
        with pytest.raises(StoreError, match="locked"):
            await writer.submit(_delivery("g-1"))
        assert "the database stayed locked" in caplog.text
        release.set()
        holder.join()
        assert await writer.submit(_delivery("g-2")) is True  # and the writer carries on
    finally:
        release.set()
        holder.join()
        writer.stop()
    assert [d.guid for d in store.list_deliveries()] == ["g-2"]


async def test_fsync_durability_stores_small_and_large_bodies(store: Store) -> None:
    writer = DeliveryWriter(store.path, durability="fsync")
    writer.start()
    try:
        assert await writer.submit(_delivery("small")) is True
        assert await writer.submit(_large("large")) is True
    finally:
        writer.stop()
    assert store.get_delivery("small").body == _delivery("small").body  # type: ignore[union-attr]
    assert store.get_delivery("large").body == _large("large").body  # type: ignore[union-attr]


def test_an_unknown_durability_is_a_construction_error(store: Store) -> None:
    with pytest.raises(ValueError, match="normal, fsync"):
        DeliveryWriter(store.path, durability="sometimes")
