"""The intake on Postgres: group commit of deliveries and their jobs, before each answer.

Requests hand their delivery to one writer thread and await a future; the thread takes
everything queued while its previous transaction ran and commits it as one: the delivery
rows, each inserted unless its GUID is stored already (the primary key decides, so two
receivers given the same delivery store it once and answer one 202, the other 200), and
for each new one its job, deferred through procrastinate in the same transaction. Then it
wakes each request with its result. One transaction per batch instead of one per request
is what lets a receiver keep up with a burst (see `bench/README.md`).

Rows of a batch are inserted in GUID order, so two receivers' batches that share GUIDs lock
them in the same order and never deadlock. A batch that fails is written again one
delivery at a time, so one bad row fails only its own request (503, GitHub may redeliver).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from procrastinate.exceptions import ConnectorException

from bot.delivery_writer import IncomingDelivery
from bot.log import get_logger
from bot.postgres.store import PostgresStore
from bot.queue.postgres import insert_jobs, job_manager
from bot.storage import StoreError

log = get_logger(__name__)

_Item = tuple[IncomingDelivery, "asyncio.Future[bool]", asyncio.AbstractEventLoop]
_Result = bool | BaseException
_FAILURES = (psycopg.Error, ConnectorException)


def _resolve(pending: list[tuple[asyncio.Future[bool], _Result]]) -> None:
    for future, result in pending:
        if future.done():  # the request was cancelled; its row is stored all the same
            continue
        if isinstance(result, BaseException):
            future.set_exception(result)
        else:
            future.set_result(result)


class PostgresIntake:
    """The webhook route's `IntakeWriter` on Postgres. `submit` is awaited from the loop."""

    def __init__(
        self,
        store: PostgresStore,
        *,
        on_commit: Callable[[int], None] | None = None,
        max_batch: int = 512,
    ) -> None:
        self.store = store
        self.manager = job_manager(store)
        self.on_commit = on_commit
        self.max_batch = max_batch
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self.batches = 0
        self.rows = 0

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._write_loop, name="pg-intake", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Write what is queued, then stop the thread."""
        if self._thread is None:
            return
        self._queue.put(None)
        self._thread.join()
        self._thread = None
        while True:  # anything submitted after the stop is answered, not left hanging
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                self._answer([item], [StoreError("the intake has stopped")])

    async def submit(self, delivery: IncomingDelivery) -> bool:
        """Commit the delivery and its job; True if new, False if its GUID was seen before."""
        if not self.running:
            raise StoreError("the intake is not running")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        self._queue.put((delivery, future, loop))
        return await future

    # -- the writer thread ---------------------------------------------------------------

    def _write_loop(self) -> None:
        stopping = False
        while not stopping:
            item = self._queue.get()
            if item is None:
                break
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
            self._commit(batch)

    def _commit(self, batch: list[_Item]) -> None:
        results: list[_Result]
        try:
            results = list(self.write([item[0] for item in batch]))
        except _FAILURES:
            results = []
            for item in batch:
                try:
                    results.extend(self.write([item[0]]))
                except _FAILURES as exc:
                    log.error(
                        "delivery not stored",
                        extra={"delivery_id": item[0].guid, "error": str(exc)},
                    )
                    results.append(StoreError(f"delivery not stored: {type(exc).__name__}: {exc}"))
        self.batches += 1
        self.rows += len(batch)
        self._answer(batch, results)
        new = sum(1 for result in results if result is True)
        if self.on_commit is not None and new:
            for loop in {item[2] for item in batch}:
                with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits
                    loop.call_soon_threadsafe(self.on_commit, new)

    @staticmethod
    def _answer(batch: list[_Item], results: list[_Result]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[bool], _Result]]] = {}
        for (_, future, loop), result in zip(batch, results, strict=True):
            by_loop.setdefault(loop, []).append((future, result))
        for loop, pending in by_loop.items():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_resolve, pending)

    def write(self, deliveries: Sequence[IncomingDelivery]) -> list[bool]:
        """Insert the deliveries not stored yet and their jobs, in one transaction; True for
        each that was new (a GUID twice in `deliveries` is new once)."""
        with self.store.pool.connection() as conn:
            return self.write_in(conn, deliveries)

    def write_in(
        self, conn: psycopg.Connection[Any], deliveries: Sequence[IncomingDelivery]
    ) -> list[bool]:
        """`write` inside the caller's transaction on `conn`.

        A GUID another transaction has inserted but not committed yet waits for it: the
        primary key then decides, so of two receivers racing one delivery, one stores it."""
        rows = sorted(deliveries, key=lambda d: d.guid)  # one lock order for every receiver
        fresh = {
            str(row[0])
            for row in conn.execute(
                "INSERT INTO deliveries (guid, event, action, hook_id, target_type,"
                " target_id, received_at, headers, body)"
                " SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[],"
                " %s::text[], %s::text[], %s::float8[], %s::text[], %b::bytea[])"
                " ON CONFLICT (guid) DO NOTHING RETURNING guid",
                (
                    [d.guid for d in rows],
                    [d.event for d in rows],
                    [d.action for d in rows],
                    [d.hook_id for d in rows],
                    [d.target_type for d in rows],
                    [d.target_id for d in rows],
                    [d.received_at for d in rows],
                    [d.headers_json for d in rows],
                    [d.body for d in rows],
                ),
            )
        }
        out: list[bool] = []
        new: list[IncomingDelivery] = []
        for d in deliveries:
            is_new = d.guid in fresh
            fresh.discard(d.guid)
            out.append(is_new)
            if is_new:
                new.append(d)
        insert_jobs(conn, self.manager, [(d.guid, d.received_at) for d in new])
        return out
