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

import threading
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from procrastinate.exceptions import ConnectorException

from bot.intake.delivery_writer import GroupCommit, IncomingDelivery, QueuedDelivery, Result
from bot.log import get_logger
from bot.store.contract import StoreError
from bot.store.postgres.connection import PgConn
from bot.store.postgres.store import PostgresStore
from bot.store.queue.postgres import PostgresJobHistory, insert_jobs, job_manager
from bot.store.retry import retry_in

log = get_logger(__name__)

_FAILURES = (psycopg.Error, ConnectorException)


class PostgresIntake(GroupCommit):
    """The webhook route's `IntakeWriter` on Postgres. `submit` is awaited from the loop."""

    def __init__(
        self,
        store: PostgresStore,
        *,
        on_commit: Callable[[int], None] | None = None,
        max_batch: int = 512,
    ) -> None:
        super().__init__(max_batch=max_batch, on_commit=on_commit)
        self.store = store
        self.manager = job_manager(store)
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._write_batches, name="pg-intake", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Write what is queued, then stop the thread."""
        if self._thread is None:
            return
        self._queue.put(None)
        self._thread.join()
        self._thread = None
        self._answer_leftovers()

    # -- the writer thread ---------------------------------------------------------------

    def _store(self, batch: list[QueuedDelivery]) -> list[Result]:
        try:
            return list(self.write([item[0] for item in batch]))
        except _FAILURES:
            pass
        results: list[Result] = []
        for item in batch:
            try:
                results.extend(self.write([item[0]]))
            except _FAILURES as exc:
                log.error(
                    "delivery not stored",
                    extra={"delivery_id": item[0].guid, "error": str(exc)},
                )
                results.append(StoreError(f"delivery not stored: {type(exc).__name__}: {exc}"))
        return results

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
        stored: list[IncomingDelivery] = []
        for d in deliveries:
            is_new = d.guid in fresh
            fresh.discard(d.guid)
            out.append(is_new)
            if is_new:
                new.append(d)
            else:
                stored.append(d)
        insert_jobs(conn, self.manager, [(d.guid, d.received_at) for d in new])
        # A GUID stored before whose work failed is run again (bot.store.retry): GitHub's
        # Redeliver keeps the GUID. Only those GUIDs cost the lookup.
        again = self._run_again(conn, stored)
        for i, d in enumerate(deliveries):
            if not out[i] and d.guid in again:
                again.discard(d.guid)
                out[i] = True
        return out

    def _run_again(
        self, conn: psycopg.Connection[Any], stored: Sequence[IncomingDelivery]
    ) -> set[str]:
        if not stored:
            return set()
        done = retry_in(
            PgConn(conn),
            PostgresJobHistory(self.manager),
            sorted({d.guid for d in stored}),
            now=max(d.received_at for d in stored),
            source="redelivery",
        )
        return {r.guid for r in done if r.kind is not None}
