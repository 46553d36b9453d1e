"""Refused delivery attempts and recorded retries, as both backends keep them.

`refusals` holds the newest `REFUSALS_KEPT` delivery attempts the webhook route refused (when,
from which address, the event header, the GUID when well-formed, the status and the reason;
never a body or a signature): `bot.intake.refusals` writes them in batches, trimming the
table in the same transaction. `retries` holds each run-again of a delivery
(`bot.store.retry`). `Storage` mixes these queries in; the migration that adds both tables
is the backends' `RETRIES_AND_REFUSALS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.store.contract import Sql
    from bot.store.retry import RetryRecord

__all__ = ["REFUSALS_KEPT", "Refusal", "RefusalsTable", "insert_refusals"]

REFUSALS_KEPT = 10_000
"""Rows the `refusals` table keeps at most: the newest."""
_BATCH = 500


@dataclass(frozen=True, slots=True)
class Refusal:
    """One refused attempt. `event` is the header as sent (printable, cut), `guid` only when
    it had a GUID's shape."""

    at: float
    source: str
    event: str
    guid: str | None
    status: int
    reason: str


def insert_refusals(db: Sql, rows: Sequence[Refusal]) -> None:
    """Add `rows` and trim the table to its newest REFUSALS_KEPT, in the caller's transaction."""
    for start in range(0, len(rows), _BATCH):
        batch = rows[start : start + _BATCH]
        values: list[object] = []
        for r in batch:
            # `Sql` makes the texts storable (no NUL).
            values.extend((r.at, r.source, r.event, r.guid, r.status, r.reason))
        db.run(
            "INSERT INTO refusals (at, source, event, guid, status, reason) VALUES "
            + ", ".join(["(?, ?, ?, ?, ?, ?)"] * len(batch)),
            values,
        )
    # Ids only grow, so the newest rows are the largest ids (Postgres may leave gaps: then
    # fewer are kept, never more).
    db.run("DELETE FROM refusals WHERE id <= (SELECT max(id) FROM refusals) - ?", (REFUSALS_KEPT,))


class RefusalsTable:
    """The queries of `refusals` and `retries`, mixed into `Storage`."""

    def _session(self) -> AbstractContextManager[Sql]:
        raise NotImplementedError

    def _transaction(self) -> AbstractContextManager[Sql]:
        raise NotImplementedError

    def record_refusals(self, rows: Sequence[Refusal]) -> None:
        with self._transaction() as db:
            insert_refusals(db, rows)

    def recent_refusals(self, *, limit: int = 100, status: int | None = None) -> list[Refusal]:
        """The newest refusals (of `status` when given), newest first."""
        where, params = ("", [limit]) if status is None else (" WHERE status = ?", [status, limit])
        with self._session() as db:
            rows: list[tuple[Any, ...]] = db.all(
                "SELECT at, source, event, guid, status, reason FROM refusals"
                f"{where} ORDER BY id DESC LIMIT ?",
                params,
            )
        return [
            Refusal(
                float(r[0]),
                str(r[1]),
                str(r[2]),
                None if r[3] is None else str(r[3]),
                int(r[4]),
                str(r[5]),
            )
            for r in rows
        ]

    def count_refusals(self) -> int:
        with self._session() as db:
            row = db.one("SELECT count(*) FROM refusals")
        return 0 if row is None else int(row[0])

    def retries_of(self, guid: str) -> list[RetryRecord]:
        """The retries recorded for a delivery, oldest first."""
        from bot.store.retry import retries_of

        with self._session() as db:
            return retries_of(db, guid)
