"""Delivery bodies in segment files: round trip, rotation, old inline rows, missing bytes."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.intake.delivery_writer import DeliveryWriter, IncomingDelivery
from bot.runs.worker import Worker, WorkerHooks
from bot.store.queue.base import JobStatus
from bot.store.queue.sqlite import SqliteJobQueue
from bot.store.segments import SegmentWriter, bodies_dir, read_body, segment_path
from bot.store.sqlite import MIGRATIONS, SCHEMA_VERSION, BodyMissing, Store, StoreError, connect
from tests.conftest import PAYLOADS

pytestmark = pytest.mark.anyio

OPENED = (PAYLOADS / "issues" / "opened.payload.json").read_bytes()


def _delivery(guid: str, body: bytes) -> IncomingDelivery:
    return IncomingDelivery(
        guid=guid,
        event="issues",
        action="opened",
        hook_id=None,
        target_type=None,
        target_id=None,
        headers_json=json.dumps({"x-github-event": "issues"}),
        body=body,
        received_at=1.0,
    )


def _big(n: int, size: int = 3000) -> bytes:
    """A JSON object of exactly `size` bytes, different for each n."""
    head = json.dumps({"action": "opened", "n": n, "pad": ""}).encode()
    return head[:-2] + b"x" * (size - len(head)) + b'"}'


@pytest.fixture
def store(data_dir: Path) -> Iterator[Store]:
    store = Store.open(data_dir / "bot.sqlite3")
    yield store
    store.close()


async def _submit_all(writer: DeliveryWriter, items: list[tuple[str, bytes]]) -> None:
    writer.start()
    try:
        for guid, body in items:
            assert await writer.submit(_delivery(guid, body)) is True
    finally:
        writer.stop()


def _where(store: Store, guid: str) -> tuple[bytes, int | None, int | None, int | None]:
    row = (
        store.conn()
        .execute(
            "SELECT body, body_segment, body_offset, body_length FROM deliveries WHERE guid = ?",
            (guid,),
        )
        .fetchone()
    )
    return bytes(row[0]), row[1], row[2], row[3]


async def test_a_large_body_round_trips_through_a_segment_and_a_small_one_stays_inline(
    store: Store,
) -> None:
    small = b'{"action":"opened"}'
    await _submit_all(DeliveryWriter(store.path), [("big", OPENED), ("small", small)])

    body, segment, offset, length = _where(store, "big")
    assert (body, length) == (b"", len(OPENED))
    assert segment is not None and offset is not None
    stored = segment_path(bodies_dir(store.path), segment).read_bytes()
    assert stored[offset : offset + len(OPENED)] == OPENED
    assert _where(store, "small") == (small, None, None, None)

    big = store.get_delivery("big")
    assert big is not None and big.body == OPENED
    assert [d.body for d in store.list_deliveries()] == [OPENED, small]


async def test_segments_rotate_and_a_restarted_writer_appends_after_stray_bytes(
    store: Store,
) -> None:
    first = [(f"a-{n}", _big(n)) for n in range(5)]
    await _submit_all(DeliveryWriter(store.path, segment_size=8000), first)
    folder = bodies_dir(store.path)
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["000001.bin", "000002.bin"]  # 3 bodies pass 8000 bytes, then a new one

    # A batch whose commit never happened (a crash) leaves bytes no row points at.
    with (folder / "000002.bin").open("ab") as f:
        f.write(b"unreferenced bytes of a batch that never committed")
    second = [(f"b-{n}", _big(10 + n)) for n in range(4)]
    await _submit_all(DeliveryWriter(store.path, segment_size=8000), second)

    for guid, body in first + second:
        row = store.get_delivery(guid)
        assert row is not None and row.body == body, guid
    segments = {_where(store, guid)[1] for guid, _ in second}
    assert segments == {2, 3}
    assert sorted(p.name for p in folder.iterdir()) == ["000001.bin", "000002.bin", "000003.bin"]


def test_the_segment_writer_reports_where_each_body_went(tmp_path: Path) -> None:
    writer = SegmentWriter(tmp_path / "bodies", segment_size=10)
    try:
        assert writer.append([b"abc", b"", b"defgh"]) == [(1, 0), (1, 3), (1, 3)]
        assert writer.append([b"ij"]) == [(1, 8)]
        assert writer.append([b"kl"]) == [(2, 0)]  # the first segment reached 10 bytes
        writer.sync()
    finally:
        writer.close()
    assert read_body(tmp_path / "bodies", 1, 3, 5) == b"defgh"
    assert read_body(tmp_path / "bodies", 2, 0, 2) == b"kl"


def test_short_writes_are_resumed_where_they_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = os.write
    calls: list[int] = []

    def short_writev(fd: int, buffers: list[memoryview]) -> int:
        calls.append(len(buffers))
        return real_write(fd, b"".join(buffers)[:4])  # as a full disk or a signal might

    monkeypatch.setattr(os, "writev", short_writev)
    writer = SegmentWriter(tmp_path / "bodies")
    try:
        assert writer.append([b"abc", b"defghij", b"k"]) == [(1, 0), (1, 3), (1, 10)]
    finally:
        writer.close()
    assert len(calls) == 3
    assert segment_path(tmp_path / "bodies", 1).read_bytes() == b"abcdefghijk"


async def test_a_missing_or_truncated_segment_is_a_clear_error(store: Store) -> None:
    items = [(f"g-{n}", _big(n)) for n in range(3)]
    await _submit_all(DeliveryWriter(store.path, segment_size=3000), items)
    folder = bodies_dir(store.path)
    segment_path(folder, 1).unlink()
    with segment_path(folder, 2).open("r+b") as f:
        f.truncate(100)

    with pytest.raises(BodyMissing, match=r"g-0 cannot be read: segment .*000001\.bin does not"):
        store.get_delivery("g-0")
    with pytest.raises(BodyMissing, match=r"g-1 cannot be read: .* is 100 bytes.*truncated"):
        store.get_delivery("g-1")
    row = store.get_delivery("g-2")
    assert row is not None and row.body == items[2][1]
    # A listing does not need the bodies, so it still works.
    assert [d.guid for d in store.list_deliveries(bodies=False)] == ["g-0", "g-1", "g-2"]


async def test_the_worker_records_an_unreadable_body_once_and_does_not_retry(
    store: Store,
) -> None:
    await _submit_all(DeliveryWriter(store.path), [("gone", OPENED)])
    (segment,) = bodies_dir(store.path).iterdir()
    segment.unlink()
    queue = SqliteJobQueue(store)
    worker = Worker(store, queue, WorkerHooks(), app_slug="repo-agent")

    assert await worker.run_until_idle() == 1
    decision, reason = (
        store.conn()
        .execute("SELECT decision, reason FROM deliveries WHERE guid = 'gone'")
        .fetchone()
    )
    assert decision == "error"
    assert reason.startswith("body_missing: the body of delivery gone cannot be read: segment")
    (job,) = queue.jobs_for_delivery("gone")
    assert job.status is JobStatus.DEAD and job.attempts == 1
    assert job.last_error == reason


def test_a_database_with_inline_bodies_keeps_them_after_the_upgrade(data_dir: Path) -> None:
    path = data_dir / "bot.sqlite3"
    conn = connect(path)
    for statement in MIGRATIONS[0].split(";"):
        if statement.strip():
            conn.execute(statement)
    conn.execute("PRAGMA user_version=1")
    conn.execute(
        "INSERT INTO deliveries (guid, event, received_at, headers, body) VALUES (?, ?, ?, ?, ?)",
        ("old", "issues", 1.0, "{}", OPENED),
    )
    conn.close()

    store = Store.open(path)
    try:
        assert store.conn().execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        row = store.get_delivery("old")
        assert row is not None and row.body == OPENED
        assert _where(store, "old")[1:] == (None, None, None)
    finally:
        store.close()
    assert not bodies_dir(path).exists()


async def test_a_failed_segment_write_stores_nothing_and_says_so(store: Store) -> None:
    # A file where the segment folder should be: the append fails inside the transaction.
    bodies_dir(store.path).write_text("in the way")
    writer = DeliveryWriter(store.path)
    writer.start()
    try:
        with pytest.raises(StoreError, match="delivery not stored"):
            await writer.submit(_delivery("g-1", OPENED))
        assert await writer.submit(_delivery("g-2", b"{}")) is True  # inline bodies still work
    finally:
        writer.stop()
    assert store.get_delivery("g-1") is None
    assert SqliteJobQueue(store).jobs_for_delivery("g-1") == []
