"""Group commit: concurrent deliveries share transactions, duplicates are decided by the key."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from bot.delivery_writer import DeliveryWriter, IncomingDelivery
from bot.queue.base import JobStatus
from bot.queue.sqlite import SqliteJobQueue
from bot.store import Store, StoreError

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
