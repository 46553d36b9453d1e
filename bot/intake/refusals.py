"""The webhook route's refusals, noted without slowing it and kept in the store, bounded.

The route refuses what it cannot take (401 for a missing or wrong signature, 400 for bad
headers or a body that is not JSON, 408, 413, 503) and notes each refusal here (`note`): when,
from which address, the event header, the GUID when well-formed, the status and the reason,
never the body or the signature (`bot.store.refusals`). Each is counted on `/metrics` at once.

Noting costs the request a deque append: a thread writes what was noted every `interval`
seconds, in transactions of `CHUNK` rows that also trim the table to its newest
`REFUSALS_KEPT` rows.
Between two writes at most `capacity` refusals wait in memory, older ones giving way to newer
ones (a flood keeps its newest, and the ones that gave way are counted), so neither memory
nor the table grows without bound however many requests are refused. On SQLite the writer
takes its turn on the intake writers' lock (`bot.intake.delivery_writer.lock_path`), so a
valid delivery's commit waits for a refusal batch on the kernel's lock, never in SQLite's busy
handler's sleeps; on Postgres the batch goes through the store's pool.
"""

from __future__ import annotations

import collections
import os
import re
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

from bot import metrics
from bot.intake.delivery_writer import BUSY_TIMEOUT, _turn, lock_path
from bot.log import get_logger
from bot.store.contract import Storage
from bot.store.refusals import REFUSALS_KEPT, Refusal, insert_refusals
from bot.store.sqlite import Store, _Conn, connect, transaction

__all__ = ["INTERVAL", "RefusalLog", "for_store", "header_text"]

log = get_logger(__name__)

INTERVAL = 1.0
"""Seconds between two writes of the noted refusals."""
CHUNK = 250
"""Refusals written per transaction (and per turn on the intake writers' lock, on SQLite)."""
_HEADER_CAP = 100
_UNPRINTABLE = re.compile(r"[^\x20-\x7e]")


def header_text(raw: bytes) -> str:
    """A request header as the table keeps it: printable ASCII, at most 100 characters."""
    return _UNPRINTABLE.sub("?", raw[:_HEADER_CAP].decode("latin-1"))


class RefusalLog:
    """Notes refusals (`note`, on the event loop, never blocking) and writes them with
    `write` from a thread of its own (`start`, `stop`)."""

    def __init__(
        self,
        write: Callable[[list[Refusal]], None],
        *,
        interval: float = INTERVAL,
        capacity: int = REFUSALS_KEPT,
        close: Callable[[], None] | None = None,
    ) -> None:
        self.write = write
        self.interval = interval
        self._close = close
        self._pending: collections.deque[Refusal] = collections.deque(maxlen=capacity)
        self._wake = threading.Event()
        self._writing = threading.Lock()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.written = 0
        self.given_way = 0

    @property
    def pending(self) -> int:
        return len(self._pending)

    def note(self, refusal: Refusal) -> None:
        metrics.refused(refusal.status, refusal.reason)
        if len(self._pending) == self._pending.maxlen:
            self.given_way += 1  # the oldest noted one gives way
            metrics.refusal_unrecorded()
        self._pending.append(refusal)

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stopping = False
        self._wake.clear()
        self._thread = threading.Thread(target=self._loop, name="refusals", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Write what is noted, then stop the thread (blocking: call it from a worker thread)."""
        if self._thread is None:
            return
        self._stopping = True
        self._wake.set()
        self._thread.join()
        self._thread = None
        if self._close is not None:
            self._close()

    def flush(self) -> None:
        """Write what is noted now (the thread's work between waits).

        One flush at a time: when it returns, every refusal noted before it was called is
        written (or counted as not written), including a batch another flush had taken."""
        with self._writing:
            self._flush()

    def _flush(self) -> None:
        batch: list[Refusal] = []
        while True:
            try:
                batch.append(self._pending.popleft())
            except IndexError:
                break
        if not batch:
            return
        try:
            self.write(batch)
        except Exception as exc:  # the store is down: each refusal was logged already
            log.warning(
                "refused deliveries not recorded", extra={"rows": len(batch), "error": str(exc)}
            )
            return
        self.written += len(batch)

    def _loop(self) -> None:
        while not self._stopping:
            self._wake.wait(self.interval)
            self.flush()
        self.flush()


class _SqliteWriter:
    """Writes refusal batches on a connection of its own, in the intake writers' turn."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None

    def __call__(self, rows: list[Refusal]) -> None:
        if self._conn is None:
            self._conn = connect(self.path, timeout=BUSY_TIMEOUT)
        fd = os.open(lock_path(self.path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            # A turn per CHUNK rows: a delivery's commit waits for one chunk at most, never
            # for a flood's whole second.
            for start in range(0, len(rows), CHUNK):
                with _turn(fd), transaction(self._conn):
                    insert_refusals(_Conn(self._conn), rows[start : start + CHUNK])
        finally:
            os.close(fd)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def for_store(store: Storage, *, interval: float = INTERVAL) -> RefusalLog:
    """The refusal log of the store's backend."""
    if isinstance(store, Store):
        writer = _SqliteWriter(store.path)
        return RefusalLog(writer, interval=interval, close=writer.close)
    return RefusalLog(store.record_refusals, interval=interval)
