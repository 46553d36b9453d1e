"""Running a stored delivery again: the part both backends share (`policies.retry` decides).

`retry_in` works inside the caller's transaction, so the intake can run a GUID GitHub sends
again in the same commit that would have acknowledged it, and `bot retry` and the operator
page can do the same in their own. It reads the deliveries' jobs (through the backend's
`JobHistory`: the job tables are the backend queue's) and runs, and for each one the verdict
lets through: adds a `retry-<n>` job, sets its failed runs back to `queued` (their outcome
and stop cleared, so the executor runs them again under the same run id and the same
markers on GitHub: what they posted is edited, not posted twice), and records the retry (`retries`: when,
who asked, why). A job that already exists for that kind (a retry that raced this one) adds
nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from policies.retry import Verdict, next_kind, verdict

if TYPE_CHECKING:
    from bot.store.contract import Sql

__all__ = ["SOURCES", "JobHistory", "Retried", "RetryRecord", "retries_of", "retry_in"]

SOURCES = ("cli", "ui", "redelivery")
"""Who asks for a retry: `bot retry`, the operator's page, GitHub sending the GUID again."""

_BATCH = 500


class JobHistory(Protocol):
    """A backend queue's view of its jobs, inside the caller's transaction on `db`."""

    def jobs_of(self, db: Sql, guids: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
        """(kind, status) of each delivery's jobs, oldest first, status in JobQueue words."""
        ...

    def add_job(self, db: Sql, guid: str, kind: str, now: float) -> bool:
        """Add a job of `kind` for `guid`; False when one exists already."""
        ...


@dataclass(frozen=True, slots=True)
class Retried:
    """What `retry_in` did with one delivery: the verdict, the job kind it added (None when
    none), and the runs it set back to queued."""

    guid: str
    verdict: Verdict
    kind: str | None = None
    runs: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RetryRecord:
    guid: str
    kind: str
    source: str
    reason: str
    at: float


def _marks(n: int) -> str:
    return ", ".join(["?"] * n)


def _runs_of(db: Sql, guids: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = {}
    for start in range(0, len(guids), _BATCH):
        batch = list(guids[start : start + _BATCH])
        rows = db.all(
            f"SELECT delivery_id, id, status FROM runs WHERE delivery_id IN ({_marks(len(batch))})"
            " ORDER BY created_at, id",
            batch,
        )
        for guid, run_id, status in rows:
            out.setdefault(str(guid), []).append((str(run_id), str(status)))
    return out


def retry_in(
    db: Sql,
    history: JobHistory,
    guids: Sequence[str],
    *,
    now: float,
    source: str,
    dry_run: bool = False,
) -> list[Retried]:
    """Run again those of the stored deliveries `guids` the verdict lets through (see the
    module docstring); with `dry_run`, only say which. One `Retried` per GUID, in order."""
    if source not in SOURCES:
        raise ValueError(f"unknown retry source {source!r}")
    wanted = list(dict.fromkeys(guids))
    jobs = history.jobs_of(db, wanted)
    runs = _runs_of(db, wanted)
    out: list[Retried] = []
    for guid in wanted:
        said = verdict(jobs.get(guid, []), runs.get(guid, []))
        if not said.retry or dry_run:
            out.append(Retried(guid, said))
            continue
        kind = next_kind(jobs.get(guid, []))
        if not history.add_job(db, guid, kind, now):
            out.append(Retried(guid, Verdict(False, f"a {kind} job exists already")))
            continue
        reset = [
            str(row[0])
            for row in db.all(
                # `finished_at` stays (or is its last update): the executor reads it as
                # "ran before", not a first attempt: its comment and check are looked up and
                # edited.
                "UPDATE runs SET status = 'queued', outcome = NULL, stop_reason = NULL,"
                " attempts = 0, finished_at = coalesce(finished_at, updated_at), updated_at = ?"
                " WHERE delivery_id = ? AND status = 'failed' RETURNING id",
                (now, guid),
            )
        ]
        db.run(
            "INSERT INTO retries (delivery_id, kind, source, reason, at) VALUES (?, ?, ?, ?, ?)",
            (guid, kind, source, said.reason, now),  # `Sql` makes texts storable
        )
        out.append(Retried(guid, said, kind, tuple(sorted(reset))))
    return out


def retries_of(db: Sql, guid: str) -> list[RetryRecord]:
    """The retries recorded for a delivery, oldest first."""
    rows: list[tuple[Any, ...]] = db.all(
        "SELECT delivery_id, kind, source, reason, at FROM retries WHERE delivery_id = ?"
        " ORDER BY at, kind",
        (guid,),
    )
    return [RetryRecord(str(r[0]), str(r[1]), str(r[2]), str(r[3]), float(r[4])) for r in rows]
