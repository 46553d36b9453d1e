"""Group commit for intake: one thread writes every pending delivery and its job in one transaction.

Requests hand their row to the writer and await a future; the writer takes everything queued
while the previous commit was running, appends the new bodies to a segment file, commits the
rows at once and wakes each request with its result (new or duplicate). WAL checkpoints run
on a separate thread and connection, so a request never waits for one.

Several receiver processes (`bot serve --receivers N`) each run a writer on the same file.
They take turns through an exclusive `flock` on `<database>-intake.lock`, held from the
moment a writer drains its queue until its commit: the kernel wakes the next writer as soon
as the lock is free, where SQLite's own busy handler would poll with sleeps of 1, 2, 5, 10 ms
and more, and whatever arrived while a writer waited goes into its next batch. Other writers
of the file (the worker, command-line tools) are waited for by SQLite's busy timeout; a batch
that still finds the database locked after `busy_timeout` seconds is answered with a
StoreError (503, so GitHub can redeliver it), never with a 202.

Durability (`BOT_DURABILITY`): "normal" commits with `synchronous=NORMAL`, which in WAL mode
writes the WAL without an fsync: a 202 survives the process being killed, and a power loss
may take the commits since the last checkpoint (about a second). "fsync" sets
`synchronous=FULL` on the writer's connection, so each commit fsyncs the WAL, and syncs the
batch's body segments before that commit: a 202 then survives a power loss. Group commit
keeps that to one WAL fsync (and at most one segment sync) per batch, not per delivery.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import fcntl
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bot.log import get_logger
from bot.store.queue.sqlite import SqliteJobHistory, insert_jobs
from bot.store.retry import retry_in
from bot.store.segments import SEGMENT_SIZE, SegmentWriter, bodies_dir
from bot.store.sqlite import StoreError, _Conn, connect

log = get_logger(__name__)

_INSERT = (
    "INSERT INTO deliveries (guid, event, action, hook_id, target_type, target_id,"
    " received_at, headers, body, body_segment, body_offset, body_length) VALUES "
)
INLINE_MAX = 2048  # bodies shorter than this stay in the row
# Under GitHub's 10 s: a batch that cannot commit is answered 503 while GitHub still listens.
BUSY_TIMEOUT = 5.0
DURABILITY = ("normal", "fsync")
_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6


def lock_path(database: Path) -> Path:
    """The file whose `flock` the intake writers of one database take turns on."""
    return database.with_name(database.name + "-intake.lock")


def _busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:  # not every sqlite3 error carries a code
        return "locked" in str(exc) or "busy" in str(exc)
    return int(code) & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)


def _marks(n: int) -> str:
    return ", ".join(["?"] * n)


@dataclass(frozen=True, slots=True)
class IncomingDelivery:
    """A verified delivery as it arrived: raw body plus the headers worth keeping."""

    guid: str
    event: str
    action: str | None
    hook_id: str | None
    target_type: str | None
    target_id: str | None
    headers_json: str
    body: bytes
    received_at: float


class IntakeWriter(Protocol):
    """How the webhook route stores a delivery: `submit` returns once the delivery and its
    job are committed, True when new and False when its GUID was stored before, and raises
    StoreError when they cannot be. This module's `DeliveryWriter` is SQLite's;
    `bot.intake.postgres_writer.PostgresIntake` is Postgres's."""

    @property
    def running(self) -> bool: ...

    def start(self) -> None: ...

    def stop(self) -> None:
        """Finish what was submitted; blocking, so call it from a worker thread."""
        ...

    async def submit(self, delivery: IncomingDelivery) -> bool: ...


Result = bool | BaseException
QueuedDelivery = tuple[IncomingDelivery, "asyncio.Future[bool]", asyncio.AbstractEventLoop]


def _resolve(pending: list[tuple[asyncio.Future[bool], Result]]) -> None:
    for future, result in pending:
        if future.done():  # the request was cancelled; its row is stored all the same
            continue
        if isinstance(result, BaseException):
            future.set_exception(result)
        else:
            future.set_result(result)


class GroupCommit(abc.ABC):
    """The batching both intake backends share: requests queue their delivery and await a
    future; one writer thread takes everything queued while its previous commit ran (up to
    `max_batch`), stores it with `_store`, then wakes each request with its result and calls
    `on_commit` with the number of new rows on each waiting loop.

    A backend supplies `running`, `_store` and the thread that runs `_write_batches`; it may
    hold a lock across each batch (`_turn`) and do work before each (`_before_batch`)."""

    name = "the intake"  # in the StoreErrors of a writer that is not running
    slow_commit: float | None = None  # seconds past which a commit is logged as slow

    def __init__(self, *, max_batch: int, on_commit: Callable[[int], None] | None) -> None:
        self.max_batch = max_batch
        self.on_commit = on_commit
        self._queue: queue.SimpleQueue[QueuedDelivery | None] = queue.SimpleQueue()
        self.batches = 0
        self.rows = 0

    @property
    @abc.abstractmethod
    def running(self) -> bool: ...

    def _accepting(self) -> bool:
        """Whether `submit` queues a delivery (else it raises StoreError)."""
        return self.running

    async def submit(self, delivery: IncomingDelivery) -> bool:
        """Commit the delivery and its job; True if new, False if its GUID was seen before."""
        if not self._accepting():
            raise StoreError(f"{self.name} is not running")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        self._queue.put((delivery, future, loop))
        return await future

    def _answer_leftovers(self) -> None:
        """After the writer thread has stopped: anything submitted after the stop was queued
        is answered, not left hanging."""
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                self._answer([item], [StoreError(f"{self.name} has stopped")])

    # -- the writer thread ---------------------------------------------------------------

    def _write_batches(self) -> None:
        """Commit batches until `None` is taken from the queue."""
        stopping = False
        while not stopping:
            item = self._queue.get()
            if item is None:
                break
            with self._turn():
                # Drained only once it is this writer's turn: what arrived meanwhile joins.
                batch = [item]
                while len(batch) < self.max_batch:
                    try:
                        more = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if more is None:
                        stopping = True
                        break
                    batch.append(more)
                self._before_batch()
                started = time.monotonic()
                results = self._store(batch)
            self._commit_done(batch, results, time.monotonic() - started)

    def _turn(self) -> contextlib.AbstractContextManager[None]:
        """Held from draining the queue until the batch is stored."""
        return contextlib.nullcontext()

    def _before_batch(self) -> None:
        """Runs before each batch is stored, in its turn."""
        return None

    @abc.abstractmethod
    def _store(self, batch: list[QueuedDelivery]) -> list[Result]:
        """Store the batch's deliveries and their jobs: True for each new one, False for one
        stored before, the exception for one that could not be stored."""

    def _commit_done(
        self, batch: list[QueuedDelivery], results: list[Result], elapsed: float
    ) -> None:
        self.batches += 1
        self.rows += len(batch)
        if self.slow_commit is not None and elapsed > self.slow_commit:
            log.warning(
                "slow commit: the disk or another writer held it up",
                extra={"seconds": round(elapsed, 3), "rows": len(batch)},
            )
        self._answer(batch, results)
        if self.on_commit is not None and any(result is True for result in results):
            new = sum(1 for result in results if result is True)
            for loop in {item[2] for item in batch}:
                # A closed loop raises RuntimeError: nobody is waiting there any more.
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(self.on_commit, new)

    @staticmethod
    def _answer(batch: list[QueuedDelivery], results: list[Result]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[bool], Result]]] = {}
        for (_, future, loop), result in zip(batch, results, strict=True):
            by_loop.setdefault(loop, []).append((future, result))
        for loop, pending in by_loop.items():
            # A closed loop raises RuntimeError: nobody is waiting there any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_resolve, pending)


class DeliveryWriter(GroupCommit):
    """The single writer of intake rows on SQLite. `submit` is awaited from the event loop."""

    name = "the delivery writer"
    slow_commit = 0.1

    def __init__(
        self,
        path: Path,
        *,
        max_batch: int = 512,
        checkpoint_interval: float = 1.0,
        max_wal_frames: int = 1024 * 1024,
        on_commit: Callable[[int], None] | None = None,
        inline_max: int = INLINE_MAX,
        segment_size: int = SEGMENT_SIZE,
        durability: str = "normal",
        busy_timeout: float = BUSY_TIMEOUT,
    ) -> None:
        if durability not in DURABILITY:
            raise ValueError(f"durability must be one of {', '.join(DURABILITY)}")
        super().__init__(max_batch=max_batch, on_commit=on_commit)
        self.path = path
        self.fsync = durability == "fsync"
        self.busy_timeout = busy_timeout
        self.inline_max = inline_max
        self.segments = SegmentWriter(bodies_dir(path), segment_size=segment_size)
        self.checkpoint_interval = checkpoint_interval
        self._stop = threading.Event()
        self.max_wal_frames = max_wal_frames
        self.wal_frames = 0
        self._threads: list[threading.Thread] = []
        # The writer thread's connection and lock file, while it runs.
        self._conn: sqlite3.Connection | None = None
        self._lock_fd = -1

    @property
    def running(self) -> bool:
        return bool(self._threads) and all(t.is_alive() for t in self._threads)

    def _accepting(self) -> bool:
        return bool(self._threads)

    def start(self) -> None:
        if self._threads:
            return
        self._stop.clear()
        conn = connect(self.path, timeout=self.busy_timeout)
        if self.fsync:  # the WAL is synced at every commit, so a 202 survives a power loss
            conn.execute("PRAGMA synchronous=FULL")
        # Checkpoints belong to the checkpoint thread, never to a commit a request waits on.
        conn.execute("PRAGMA wal_autocheckpoint=0")
        # When the WAL starts over, shrink the file back to this size.
        conn.execute(f"PRAGMA journal_size_limit={64 * 1024 * 1024}")
        self._threads = [
            threading.Thread(target=self._write_loop, args=(conn,), name="delivery-writer"),
            threading.Thread(target=self._checkpoint_loop, name="wal-checkpoint"),
        ]
        for thread in self._threads:
            thread.daemon = True
            thread.start()

    def stop(self) -> None:
        """Write what is queued, stop both threads and leave a checkpointed database."""
        if not self._threads:
            return
        self._queue.put(None)
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self._threads = []
        self._answer_leftovers()
        try:
            self.segments.sync()
            # Other receivers may still be writing: wait for them briefly, not for long.
            conn = connect(self.path, timeout=1.0)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            conn.close()
        except (sqlite3.Error, OSError) as exc:
            log.warning("final checkpoint failed", extra={"error": str(exc)})

    # -- the writer thread ---------------------------------------------------------------

    def _write_loop(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._lock_fd = os.open(lock_path(self.path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            self._write_batches()
        finally:
            os.close(self._lock_fd)
            self._lock_fd = -1
            self._conn = None
            conn.close()
            self.segments.close()

    def _turn(self) -> contextlib.AbstractContextManager[None]:
        return _turn(self._lock_fd)

    def _before_batch(self) -> None:
        assert self._conn is not None
        self._restart_wal_if_long(self._conn)

    def _store(self, batch: list[QueuedDelivery]) -> list[Result]:
        conn = self._conn
        assert conn is not None
        rows = [item[0] for item in batch]
        try:
            return list(self._write_retrying(conn, rows))
        except sqlite3.Error as exc:
            if _busy(exc):  # row by row would wait as long again for each row
                log.error(
                    "deliveries not stored: the database stayed locked",
                    extra={"rows": len(batch), "seconds": self.busy_timeout, "error": str(exc)},
                )
                return [StoreError(f"the database is locked: {exc}")] * len(batch)
        except OSError:
            pass
        # One bad row must not fail its neighbours: write them one by one.
        results: list[Result] = []
        for row in rows:
            try:
                results.extend(self._write_retrying(conn, [row]))
            except (sqlite3.Error, OSError) as exc:
                log.error("delivery not stored", extra={"delivery_id": row.guid, "error": str(exc)})
                results.append(StoreError(f"delivery not stored: {exc}"))
        return results

    def _write_retrying(self, conn: sqlite3.Connection, rows: list[IncomingDelivery]) -> list[bool]:
        """`_write`, tried again on SQLITE_BUSY until `busy_timeout` has passed.

        SQLite's busy handler waits out a lock held by another connection within one try;
        a few busy answers come back without waiting (a WAL being recovered or restarted by
        another process), and those are worth another try.
        """
        deadline = time.monotonic() + self.busy_timeout
        while True:
            try:
                return self._write(conn, rows)
            except sqlite3.Error as exc:
                if not _busy(exc) or time.monotonic() >= deadline:
                    raise
            time.sleep(0.001)

    def _write(self, conn: sqlite3.Connection, rows: list[IncomingDelivery]) -> list[bool]:
        """Insert the new rows of a batch and their jobs; True for each row that was new.

        A handful of statements per batch, whatever its size: the sqlite3 module lets go of
        the GIL at every statement step, and a busy event loop can keep it for a while before
        this thread gets it back.
        """
        conn.execute("BEGIN IMMEDIATE")
        try:
            guids = [d.guid for d in rows]
            seen = {
                row[0]
                for row in conn.execute(
                    f"SELECT guid FROM deliveries WHERE guid IN ({_marks(len(guids))})", guids
                )
            }
            # A GUID stored before whose work failed is run again (bot.store.retry): GitHub's
            # Redeliver keeps the GUID. Only those GUIDs cost the lookup.
            again = _run_again(conn, [d for d in rows if d.guid in seen])
            out: list[bool] = []
            fresh: list[IncomingDelivery] = []
            for d in rows:
                is_new = d.guid not in seen
                if is_new:  # the unique key decides; a GUID twice in one batch is new once
                    seen.add(d.guid)
                    fresh.append(d)
                elif d.guid in again:
                    again.discard(d.guid)
                    is_new = True
                out.append(is_new)
            if fresh:
                # The bodies reach the segment (the page cache) before the rows that point
                # at them commit; a crash in between leaves bytes nothing refers to.
                big = [d.body for d in fresh if len(d.body) >= self.inline_max]
                places = iter(self.segments.append(big) if big else ())
                if big and self.fsync:  # the rows must not reach the disk before their bodies
                    self.segments.sync()
                values: list[object] = []
                where: tuple[int | None, int | None, int | None]
                for d in fresh:
                    if len(d.body) >= self.inline_max:
                        segment, offset = next(places)
                        body, where = b"", (segment, offset, len(d.body))
                    else:
                        body, where = d.body, (None, None, None)
                    values.extend(
                        (
                            d.guid,
                            d.event,
                            d.action,
                            d.hook_id,
                            d.target_type,
                            d.target_id,
                            d.received_at,
                            d.headers_json,
                            body,
                            *where,
                        )
                    )
                rows_sql = ",".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"] * len(fresh))
                conn.execute(_INSERT + rows_sql, values)
                insert_jobs(conn, [(d.guid, d.received_at) for d in fresh])
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return out

    # -- the checkpoint thread -----------------------------------------------------------

    def _checkpoint_loop(self) -> None:
        conn = connect(self.path)
        try:
            while not self._stop.wait(self.checkpoint_interval):
                try:
                    # Bodies first: a row the checkpoint makes durable must not point at
                    # bytes a power loss could still take.
                    self.segments.sync()
                except OSError as exc:
                    log.warning("syncing the body segments failed", extra={"error": str(exc)})
                try:
                    _, frames, _ = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                except sqlite3.Error as exc:
                    log.warning("checkpoint failed", extra={"error": str(exc)})
                    continue
                # Checkpointing more often only adds fsyncs that stall the writer's appends.
                self.wal_frames = max(0, frames)
        finally:
            conn.close()

    def _restart_wal_if_long(self, conn: sqlite3.Connection) -> None:
        """Bound the WAL under sustained load.

        SQLite starts the WAL over only when a write transaction begins with every frame
        already copied back, and a writer that is never idle never gives the checkpoint
        thread that moment. So past `max_wal_frames` the writer runs one checkpoint itself,
        between two transactions: the checkpoint thread has copied nearly everything, so
        this pass is short, and the next commit starts the WAL from the beginning.
        """
        if self.wal_frames > self.max_wal_frames:
            frames, self.wal_frames = self.wal_frames, 0
            started = time.monotonic()
            try:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            except sqlite3.Error as exc:
                log.warning("checkpoint failed", extra={"error": str(exc)})
                return
            log.warning(
                "slow commit ahead: the WAL is long, so the writer checkpointed it",
                extra={"frames": frames, "seconds": round(time.monotonic() - started, 3)},
            )


def _run_again(conn: sqlite3.Connection, stored: list[IncomingDelivery]) -> set[str]:
    """The GUIDs of `stored` (deliveries whose GUID is stored already) run again now, inside
    the caller's transaction."""
    if not stored:
        return set()
    done = retry_in(
        _Conn(conn),
        SqliteJobHistory(),
        [d.guid for d in stored],
        now=max(d.received_at for d in stored),
        source="redelivery",
    )
    return {r.guid for r in done if r.kind is not None}


@contextlib.contextmanager
def _turn(lock_fd: int) -> Iterator[None]:
    """Hold the intake writers' lock of this database (blocks without holding the GIL)."""
    fcntl.flock(lock_fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(lock_fd, fcntl.LOCK_UN)
