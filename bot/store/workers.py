"""The workers' heartbeats: one row per worker pool (a `bot serve` or `bot worker` process) on
either backend, written every few seconds by the pool (`bot.runs.heartbeat`) with the runs it
holds at that moment, deleted when the pool stops. A pool that dies leaves its row, whose beat
then ages: the operator's page marks it silent, and the runs it held with it
(`policies.ui_queue`). Rows silent for longer than `FORGET_AFTER_S` go at the next beat of any
pool. Both backends share these queries (`Storage` mixes them in); their migrations add the
table (`SQLITE_TABLE`, `POSTGRES_TABLE`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from policies.ui_queue import WorkerBeat

if TYPE_CHECKING:
    from bot.store.contract import Sql

__all__ = ["FORGET_AFTER_S", "POSTGRES_TABLE", "SQLITE_TABLE", "WorkerBeats"]

FORGET_AFTER_S = 86_400.0

SQLITE_TABLE = """
CREATE TABLE worker_beats (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at REAL NOT NULL,
    beat_at REAL NOT NULL,
    runs TEXT NOT NULL
);
"""
"""The SQLite migration step that adds the table (`runs`: the run ids held, space-separated)."""

POSTGRES_TABLE = """
CREATE TABLE worker_beats (
    id text PRIMARY KEY,
    host text NOT NULL,
    pid integer NOT NULL,
    started_at double precision NOT NULL,
    beat_at double precision NOT NULL,
    runs text NOT NULL
);
"""
"""The Postgres migration step that adds the table."""


class WorkerBeats:
    """The `worker_beats` queries; `Storage` supplies the connections and the clock."""

    clock: Callable[[], float]

    def _session(self) -> AbstractContextManager[Sql]:
        raise NotImplementedError

    def _transaction(self) -> AbstractContextManager[Sql]:
        raise NotImplementedError

    def beat(
        self, worker_id: str, *, host: str, pid: int, started_at: float, runs: Sequence[str]
    ) -> None:
        """Record that the worker is alive now and holds `runs`; forget long-silent rows."""
        now = self.clock()
        with self._transaction() as db:
            db.run(
                "INSERT INTO worker_beats (id, host, pid, started_at, beat_at, runs)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET"
                " beat_at = excluded.beat_at, runs = excluded.runs",
                (worker_id, host, pid, started_at, now, " ".join(runs)),
            )
            db.run("DELETE FROM worker_beats WHERE beat_at < ?", (now - FORGET_AFTER_S,))

    def worker_stopped(self, worker_id: str) -> None:
        """The worker stopped cleanly: its row goes (it holds nothing any more)."""
        with self._session() as db:
            db.run("DELETE FROM worker_beats WHERE id = ?", (worker_id,))

    def worker_beats(self) -> list[WorkerBeat]:
        """Every worker's last beat, the most recently started first."""
        with self._session() as db:
            rows = db.all(
                "SELECT id, host, pid, started_at, beat_at, runs FROM worker_beats"
                " ORDER BY started_at DESC, id"
            )
        return [
            WorkerBeat(
                id=str(r[0]),
                host=str(r[1]),
                pid=int(r[2]),
                started_at=float(r[3]),
                beat_at=float(r[4]),
                runs=tuple(str(r[5]).split()),
            )
            for r in rows
        ]
