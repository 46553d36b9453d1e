"""What the operator's page reads, through the storage contract only (either backend).

Lists are newest first and paged by cursor (`policies.ui_pages`). A delivery's repository is
in its payload, not in a column: the page reads the bodies of the rows it shows, and a filter
by repository reads bodies as it scans, at most `MAX_SCAN` rows per page (the page then offers
to scan on). Runs, their usage and their artifacts are rows and columns of the store, so a run
that ran on another machine shows the same.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import orjson

from bot.store.contract import DELIVERY_COLUMNS, RUN_COLUMNS, BodyMissing, DeliveryRecord, Storage
from bot.store.records import RunRecord, optional_str, run_record
from policies.ui_costs import DAY, RunCost, Usage
from policies.ui_pages import Cursor, encode_cursor

T = TypeVar("T")
MAX_SCAN = 5000
DECISIONS = ("trigger", "skip", "error", "pending")
RUN_STATUSES = (
    "queued",
    "running",
    "publishing",
    "succeeded",
    "no_changes",
    "needs_info",
    "blocked",
    "failed",
    "skipped",
)


@dataclass(frozen=True, slots=True)
class DeliveryFilter:
    event: str = ""
    repo: str = ""
    decision: str = ""


@dataclass(frozen=True, slots=True)
class DeliveryRow:
    delivery: DeliveryRecord
    repo: str | None
    payload: dict[str, Any] | None
    """The parsed body (None when it cannot be read or is not a JSON object)."""
    job_status: str | None
    attempts: int
    max_attempts: int | None
    last_error: str | None
    runs: tuple[RunRecord, ...]


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    rows: list[T]
    next: str | None
    """The cursor of the next page, None on the last."""
    scanned_out: bool = False
    """A filter scanned MAX_SCAN rows without filling the page; `next` goes on from there."""


def _payload(store: Storage, row: tuple[Any, ...]) -> tuple[DeliveryRecord, dict[str, Any] | None]:
    try:
        record = store._delivery(row)
    except BodyMissing:
        return store._delivery(row, read=False), None
    try:
        # orjson: a page parses up to 50 bodies (a filter by repository, up to MAX_SCAN).
        data = orjson.loads(record.body)
    except (ValueError, RecursionError):
        return record, None
    return record, data if isinstance(data, dict) else None


def repo_of(payload: dict[str, Any] | None) -> str | None:
    repo = (payload or {}).get("repository")
    name = repo.get("full_name") if isinstance(repo, dict) else None
    return name if isinstance(name, str) else None


def deliveries_page(
    store: Storage, wanted: DeliveryFilter, before: Cursor | None, size: int
) -> Page[DeliveryRow]:
    where: list[str] = []
    params: list[object] = []
    if wanted.event:
        where.append("event = ?")
        params.append(wanted.event)
    if wanted.decision == "pending":
        where.append("decision IS NULL")
    elif wanted.decision:
        where.append("decision = ?")
        params.append(wanted.decision)
    batch = size + 1 if not wanted.repo else max(4 * size, 200)
    found: list[tuple[DeliveryRecord, dict[str, Any] | None]] = []
    scanned = 0
    cursor = before
    more = True
    with store._session() as db:
        while more and len(found) <= size and scanned < MAX_SCAN:
            clauses = list(where)
            args = list(params)
            if cursor is not None:
                clauses.append("received_at <= ? AND (received_at < ? OR guid < ?)")
                args += [cursor.at, cursor.at, cursor.key]
            sql = f"SELECT {DELIVERY_COLUMNS}, {store._body_columns} FROM deliveries"
            if clauses:
                sql += " WHERE " + " AND ".join(clauses)
            sql += " ORDER BY received_at DESC, guid DESC LIMIT ?"
            rows = db.all(sql, [*args, batch])
            more = len(rows) == batch
            for row in rows:
                scanned += 1
                cursor = Cursor(at=float(row[6]), key=str(row[0]))
                record, payload = _payload(store, row)
                if not wanted.repo or repo_of(payload) == wanted.repo:
                    found.append((record, payload))
                    if len(found) > size:
                        break
            if not wanted.repo:
                break
    has_next = len(found) > size
    found = found[:size]
    scanned_out = not has_next and more and bool(wanted.repo) and scanned >= MAX_SCAN
    next_cursor: str | None = None
    if has_next and found:
        last = found[-1][0]
        next_cursor = encode_cursor(last.received_at, last.guid)
    elif scanned_out and cursor is not None:
        next_cursor = encode_cursor(cursor.at, cursor.key)
    return Page(rows=_with_jobs(store, found), next=next_cursor, scanned_out=scanned_out)


def _with_jobs(
    store: Storage, found: Sequence[tuple[DeliveryRecord, dict[str, Any] | None]]
) -> list[DeliveryRow]:
    guids = [record.guid for record, _ in found]
    jobs: dict[str, tuple[Any, ...]] = {}
    if guids:
        with store._session() as db:
            marks = ", ".join(["?"] * len(guids))
            for row in db.all(store._delivery_jobs.format(marks=marks), guids):
                jobs[str(row[0])] = row
    runs = store.runs_for_deliveries(guids)
    out: list[DeliveryRow] = []
    for record, payload in found:
        job = jobs.get(record.guid)
        out.append(
            DeliveryRow(
                delivery=record,
                repo=repo_of(payload),
                payload=payload,
                job_status=None if job is None else str(job[1]),
                attempts=0 if job is None else int(job[2]),
                max_attempts=None if job is None else int(job[3]),
                last_error=None if job is None else optional_str(job[4]),
                runs=tuple(runs.get(record.guid, ())),
            )
        )
    return out


def delivery(store: Storage, guid: str) -> DeliveryRow | None:
    with store._session() as db:
        row = db.one(
            f"SELECT {DELIVERY_COLUMNS}, {store._body_columns} FROM deliveries WHERE guid = ?",
            (guid,),
        )
    if row is None:
        return None
    return _with_jobs(store, [_payload(store, row)])[0]


@dataclass(frozen=True, slots=True)
class RunFilter:
    repo: str = ""
    workflow: str = ""
    status: str = ""


def runs_page(
    store: Storage, wanted: RunFilter, before: Cursor | None, size: int
) -> Page[RunRecord]:
    clauses: list[str] = []
    args: list[object] = []
    for column, value in (
        ("repo", wanted.repo),
        ("workflow", wanted.workflow),
        ("status", wanted.status),
    ):
        if value:
            clauses.append(f"{column} = ?")
            args.append(value)
    if before is not None:
        clauses.append("created_at <= ? AND (created_at < ? OR id < ?)")
        args += [before.at, before.at, before.key]
    sql = f"SELECT {RUN_COLUMNS} FROM runs"
    if clauses:
        sql += " WHERE " + " AND ".join(clauses)
    sql += " ORDER BY created_at DESC, id DESC LIMIT ?"
    with store._session() as db:
        rows = [run_record(row) for row in db.all(sql, [*args, size + 1])]
    next_cursor = None
    if len(rows) > size:
        rows = rows[:size]
        next_cursor = encode_cursor(rows[-1].created_at, rows[-1].id)
    return Page(rows=rows, next=next_cursor)


def run_choices(store: Storage) -> tuple[list[str], list[str]]:
    """The repositories and the workflows that have runs, for the runs page's filters."""
    with store._session() as db:
        repos = [str(r[0]) for r in db.all("SELECT DISTINCT repo FROM runs ORDER BY repo")]
        flows = [str(r[0]) for r in db.all("SELECT DISTINCT workflow FROM runs ORDER BY workflow")]
    return repos, flows


# When a run's usage counts: when it ended, or (not ended) when it began.
_AT = "coalesce(finished_at, created_at)"


def usage_by_day(store: Storage, start: float, end: float) -> list[Usage]:
    """The usage of the runs in [start, end), added up per (UTC day, repository, workflow).

    The day is whole seconds divided by whole seconds, which both backends floor alike (a
    cast of the time to an integer truncates in SQLite and rounds in Postgres: half a second
    at most, at midnight)."""
    with store._session() as db:
        rows = db.all(
            f"SELECT CAST({_AT} AS BIGINT) / {DAY}, repo, workflow, count(*),"
            " sum(coalesce(input_tokens, 0)), sum(coalesce(output_tokens, 0)),"
            f" sum(coalesce(cost, 0)) FROM runs WHERE {_AT} >= ? AND {_AT} < ?"
            " GROUP BY 1, 2, 3",
            (start, end),
        )
    return [
        Usage(
            day=int(r[0]),
            repo=str(r[1]),
            workflow=str(r[2]),
            runs=int(r[3]),
            input_tokens=int(r[4] or 0),
            output_tokens=int(r[5] or 0),
            cost=float(r[6] or 0.0),
        )
        for r in rows
    ]


def costliest_runs(store: Storage, start: float, end: float, limit: int) -> list[RunCost]:
    """The `limit` runs in [start, end) that cost most (most tokens first among equals)."""
    with store._session() as db:
        rows = db.all(
            f"SELECT id, repo, workflow, {_AT}, input_tokens, output_tokens, cost FROM runs"
            f" WHERE {_AT} >= ? AND {_AT} < ? AND (cost > 0 OR input_tokens > 0)"
            " ORDER BY coalesce(cost, 0) DESC,"
            " coalesce(input_tokens, 0) + coalesce(output_tokens, 0) DESC, id LIMIT ?",
            (start, end, limit),
        )
    return [
        RunCost(
            run_id=str(r[0]),
            repo=str(r[1]),
            workflow=str(r[2]),
            at=float(r[3]),
            input_tokens=int(r[4] or 0),
            output_tokens=int(r[5] or 0),
            cost=float(r[6] or 0.0),
        )
        for r in rows
    ]


def artifact_json(store: Storage, run_id: str, name: str) -> Any:
    """A JSON artifact of the run, parsed; None when absent or unreadable."""
    text = store.get_artifact(run_id, name)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None
