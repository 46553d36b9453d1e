"""The intake on Postgres: a delivery and its job commit together, and its GUID decides."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import anyio
import anyio.lowlevel
import psycopg
import pytest

from bot.intake.delivery_writer import IncomingDelivery
from bot.intake.postgres_writer import PostgresIntake
from bot.store.contract import StoreError
from bot.store.postgres.store import PostgresStore
from bot.store.queue.base import JobStatus
from bot.store.queue.postgres import PostgresJobQueue


def _delivery(guid: str, body: bytes = b'{"action":"opened"}') -> IncomingDelivery:
    return IncomingDelivery(
        guid=guid,
        event="issues",
        action="opened",
        hook_id="1",
        target_type="repository",
        target_id="2",
        headers_json=json.dumps({"x-github-event": "issues"}),
        body=body,
        received_at=1.0,
    )


@pytest.fixture
def store(postgres_dsn: str) -> Iterator[PostgresStore]:
    store = PostgresStore.open(postgres_dsn)
    yield store
    store.close()


@pytest.mark.anyio
async def test_concurrent_deliveries_share_commits_and_each_gets_one_job(
    store: PostgresStore,
) -> None:
    commits: list[int] = []
    intake = PostgresIntake(store, on_commit=commits.append)
    intake.start()
    results: dict[str, bool] = {}
    # Every byte value, and more than a page: the body comes back as it was sent.
    big = bytes(range(256)) * 64

    async def submit(guid: str) -> None:
        results[guid] = await intake.submit(_delivery(guid, big))

    async with anyio.create_task_group() as tasks:
        for n in range(100):
            tasks.start_soon(submit, f"g-{n}")
    intake.stop()
    assert results == {f"g-{n}": True for n in range(100)}
    assert intake.rows == 100
    assert intake.batches < 100  # requests arriving together shared transactions
    assert store.count_deliveries() == 100
    stored = store.get_delivery("g-7")
    assert stored is not None and stored.body == big
    queue = PostgresJobQueue(store)
    assert queue.counts_sync()[JobStatus.QUEUED] == 100
    assert [job.delivery_id for job in queue.jobs_for_delivery("g-7")] == ["g-7"]
    await anyio.lowlevel.checkpoint()
    assert sum(commits) == 100


@pytest.mark.anyio
async def test_a_redelivery_is_a_duplicate_without_a_second_job(store: PostgresStore) -> None:
    intake = PostgresIntake(store)
    intake.start()
    outcomes = [await intake.submit(_delivery("same")) for _ in range(3)]
    assert outcomes == [True, False, False]
    assert intake.write([_delivery("twice"), _delivery("twice")]) == [True, False]
    assert len(PostgresJobQueue(store).jobs_for_delivery("same")) == 1
    assert len(PostgresJobQueue(store).jobs_for_delivery("twice")) == 1


def test_two_receivers_racing_one_guid_store_it_once(postgres_dsn: str) -> None:
    """Receiver A has inserted the delivery but not committed; receiver B, on its own
    connection, waits on the key, and once A commits it finds a duplicate."""
    a_store, b_store = PostgresStore.open(postgres_dsn), PostgresStore.open(postgres_dsn)
    a, b = PostgresIntake(a_store), PostgresIntake(b_store)
    b_result: list[list[bool]] = []
    try:
        with a_store.pool.connection() as conn:
            assert a.write_in(conn, [_delivery("raced")]) == [True]
            racer = threading.Thread(target=lambda: b_result.append(b.write([_delivery("raced")])))
            racer.start()
            _wait_for_a_lock_wait(postgres_dsn)
            assert b_result == []  # B cannot decide while A's insert is uncommitted
        racer.join()
        assert b_result == [[False]]
        assert a_store.count_deliveries() == 1
        jobs = PostgresJobQueue(a_store).jobs_for_delivery("raced")
        assert [job.status for job in jobs] == [JobStatus.QUEUED]
    finally:
        a_store.close()
        b_store.close()


def _wait_for_a_lock_wait(dsn: str) -> None:
    """Return once some backend of this database waits for a lock (B on A's key)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for _ in range(10_000):
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).fetchone()
            if row and row[0]:
                return
            conn.execute("SELECT pg_sleep(0.01)")
    raise AssertionError("the second receiver never waited on the first one's insert")


@pytest.mark.anyio
async def test_a_broken_database_is_a_store_error(store: PostgresStore) -> None:
    intake = PostgresIntake(store)
    with pytest.raises(StoreError, match="not running"):
        await intake.submit(_delivery("early"))
    intake.start()
    with store.pool.connection() as conn:
        conn.execute("DROP TABLE deliveries")
    with pytest.raises(StoreError, match="delivery not stored: UndefinedTable"):
        await intake.submit(_delivery("lost"))
