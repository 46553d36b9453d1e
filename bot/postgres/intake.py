"""The intake on Postgres: a delivery and its job commit in one transaction before the answer.

Each request writes its own transaction on a pooled connection: the delivery row, inserted
unless its GUID is there already (the primary key decides, so two receivers given the same
delivery store it once and answer one of them 202, the other 200), and, when it is new, its
job through procrastinate's deferral in the same transaction. Postgres flushes the commits
of concurrent transactions together, so requests arriving at once share a disk flush without
a writer thread of our own (SQLite's `bot.delivery_writer` needs one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import anyio.to_thread
import psycopg
from procrastinate.exceptions import ConnectorException

from bot.delivery_writer import IncomingDelivery
from bot.log import get_logger
from bot.postgres.store import PostgresStore
from bot.queue.postgres import insert_jobs, job_manager
from bot.storage import StoreError

log = get_logger(__name__)


class PostgresIntake:
    """The webhook route's `IntakeWriter` on Postgres."""

    def __init__(
        self, store: PostgresStore, *, on_commit: Callable[[int], None] | None = None
    ) -> None:
        self.store = store
        self.manager = job_manager(store)
        self.on_commit = on_commit
        self._running = False
        self.rows = 0

    @property
    def running(self) -> bool:
        return self._running

    def start(self) -> None:
        self._running = True

    def stop(self) -> None:
        # Nothing is buffered: every answered request was committed before its answer.
        self._running = False

    async def submit(self, delivery: IncomingDelivery) -> bool:
        """Commit the delivery and its job; True if new, False if its GUID was seen before."""
        if not self._running:
            raise StoreError("the intake is not running")
        try:
            (is_new,) = await anyio.to_thread.run_sync(self.write, [delivery])
        except (psycopg.Error, ConnectorException) as exc:
            raise StoreError(f"delivery not stored: {type(exc).__name__}: {exc}") from exc
        self.rows += 1
        if is_new and self.on_commit is not None:
            self.on_commit(1)
        return is_new

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
        fresh = {
            str(row[0])
            for row in conn.execute(
                "INSERT INTO deliveries (guid, event, action, hook_id, target_type,"
                " target_id, received_at, headers, body)"
                " SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[],"
                " %s::text[], %s::text[], %s::float8[], %s::text[], %s::bytea[])"
                " ON CONFLICT (guid) DO NOTHING RETURNING guid",
                (
                    [d.guid for d in deliveries],
                    [d.event for d in deliveries],
                    [d.action for d in deliveries],
                    [d.hook_id for d in deliveries],
                    [d.target_type for d in deliveries],
                    [d.target_id for d in deliveries],
                    [d.received_at for d in deliveries],
                    [d.headers_json for d in deliveries],
                    [d.body for d in deliveries],
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
