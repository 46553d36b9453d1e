"""What the operator's page reads, through the storage contract only (either backend).

Lists are newest first and paged by cursor (`policies.ui_pages`). A delivery's repository is
in its payload, not in a column: the page reads the bodies of the rows it shows, and a filter
by repository reads bodies as it scans, at most `MAX_SCAN` rows per page (the page then offers
to scan on). Runs, their usage and their artifacts are rows and columns of the store, so a run
that ran on another machine shows the same.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import orjson

from bot.store.contract import DeliveryRecord, Storage
from bot.store.records import DECISIONS as DECISIONS  # the filter's choices, named by the store
from bot.store.records import PUBLISHED_ARTIFACT, RunRecord, optional_str
from policies.outcome import OUTCOME_STATUSES
from policies.ui_context import Context, context_of
from policies.ui_costs import DAY, RunCost, Usage
from policies.ui_pages import Cursor, encode_cursor
from policies.ui_queue import (
    QueueLine,
    WorkerBeat,
    held_by_silent,
    is_silent,
    queue_lines,
    totals,
)
from policies.ui_search import Guid, RunId, Search, Target

T = TypeVar("T")
MAX_SCAN = 5000
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

    def context(self, app_slug: str | None = None) -> Context:
        """Who sent it, the command a comment gave, its issue's or pull request's title."""
        return context_of(self.delivery.event, self.payload, app_slug)


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    rows: list[T]
    next: str | None
    """The cursor of the next page, None on the last."""
    scanned_out: bool = False
    """A filter scanned MAX_SCAN rows without filling the page; `next` goes on from there."""


def _payload(record: DeliveryRecord, readable: bool) -> dict[str, Any] | None:
    if not readable:
        return None
    try:
        # orjson: a page parses up to 50 bodies (a filter by repository, up to MAX_SCAN).
        data = orjson.loads(record.body)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def repo_of(payload: dict[str, Any] | None) -> str | None:
    repo = (payload or {}).get("repository")
    name = repo.get("full_name") if isinstance(repo, dict) else None
    return name if isinstance(name, str) else None


def deliveries_page(
    store: Storage, wanted: DeliveryFilter, before: Cursor | None, size: int
) -> Page[DeliveryRow]:
    batch = size + 1 if not wanted.repo else max(4 * size, 200)
    found: list[tuple[DeliveryRecord, dict[str, Any] | None]] = []
    scanned = 0
    cursor = before
    more = True
    while more and len(found) <= size and scanned < MAX_SCAN:
        taken = 0
        for record, readable in store.deliveries_newest_first(
            event=wanted.event,
            decision=wanted.decision,
            before=None if cursor is None else (cursor.at, cursor.key),
            limit=batch,
        ):
            taken += 1
            scanned += 1
            cursor = Cursor(at=record.received_at, key=record.guid)
            payload = _payload(record, readable)
            if not wanted.repo or repo_of(payload) == wanted.repo:
                found.append((record, payload))
                if len(found) > size:
                    break
        more = taken == batch
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
    jobs = store.delivery_jobs(guids)
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
    found = store.find_delivery(guid)
    if found is None:
        return None
    record, readable = found
    return _with_jobs(store, [(record, _payload(record, readable))])[0]


@dataclass(frozen=True, slots=True)
class RunFilter:
    repo: str = ""
    workflow: str = ""
    status: str = ""


def runs_page(
    store: Storage, wanted: RunFilter, before: Cursor | None, size: int
) -> Page[RunRecord]:
    rows = store.runs_newest_first(
        repo=wanted.repo,
        workflow=wanted.workflow,
        status=wanted.status,
        before=None if before is None else (before.at, before.key),
        limit=size + 1,
    )
    next_cursor = None
    if len(rows) > size:
        rows = rows[:size]
        next_cursor = encode_cursor(rows[-1].created_at, rows[-1].id)
    return Page(rows=rows, next=next_cursor)


def run_choices(store: Storage) -> tuple[list[str], list[str]]:
    """The repositories and the workflows that have runs, for the runs page's filters."""
    return store.run_repos_and_workflows()


def usage_by_day(store: Storage, start: float, end: float) -> list[Usage]:
    """The usage of the runs in [start, end), added up per (UTC day, repository, workflow).

    The day is whole seconds divided by whole seconds, which both backends floor alike (a
    cast of the time to an integer truncates in SQLite and rounds in Postgres: half a second
    at most, at midnight)."""
    rows = store.usage_per_day(start, end, DAY)
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
    rows = store.costliest_runs(start, end, limit)
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


@dataclass(frozen=True, slots=True)
class RunContext:
    """What the runs list shows of a run beside its record."""

    title: str | None
    actor: str | None
    outcome: str | None
    """The outcome kind (one of OUTCOME_STATUSES) once the run ended."""
    posted: str | None
    """The URL of what the run posted on GitHub, once it did."""
    silent_worker: WorkerBeat | None = None
    """The worker that holds the unfinished run and has stopped beating, if one does."""


def runs_context(store: Storage, runs: Sequence[RunRecord]) -> dict[str, RunContext]:
    """The context of each run by id, from its delivery's payload and its artifacts: two
    queries for the whole page."""
    deliveries = store.deliveries_by_guid(sorted({r.delivery_id for r in runs}))
    posted = store.artifact_of_runs([r.id for r in runs], PUBLISHED_ARTIFACT)
    stalled = held_by_silent(store.worker_beats(), store.clock())
    out: dict[str, RunContext] = {}
    for run in runs:
        found = deliveries.get(run.delivery_id)
        seen = context_of(found[0].event, _payload(*found)) if found is not None else Context()
        url = None
        if run.id in posted:
            try:
                data = json.loads(posted[run.id])
            except ValueError:
                data = None
            link = data.get("comment_url") if isinstance(data, dict) else None
            url = (
                link if isinstance(link, str) and link.startswith(("https://", "http://")) else None
            )
        out[run.id] = RunContext(
            title=seen.title,
            actor=seen.sender,
            outcome=run.status if run.status in OUTCOME_STATUSES else None,
            posted=url,
            silent_worker=None if run.status in OUTCOME_STATUSES else stalled.get(run.id),
        )
    return out


@dataclass(frozen=True, slots=True)
class QueueView:
    lines: list[QueueLine]
    totals: dict[str, int]
    workers: list[tuple[WorkerBeat, bool]]
    """Each worker and whether it has stopped beating."""
    now: float


def queue_view(store: Storage) -> QueueView:
    """The queue per workflow and the workers, as the queue page shows them."""
    now = store.clock()
    lines = queue_lines(store.queue_states(), now)
    workers = [(w, is_silent(w, now)) for w in store.worker_beats()]
    return QueueView(lines=lines, totals=totals(lines), workers=workers, now=now)


@dataclass(frozen=True, slots=True)
class Found:
    """What a search found: the page to open (a path under the prefix), or the runs of an
    issue or pull request, newest first, with their context."""

    page: str | None = None
    runs: list[RunRecord] = field(default_factory=list)
    contexts: dict[str, RunContext] = field(default_factory=dict)


def search(store: Storage, wanted: Search) -> Found:
    """Look up what `policies.ui_search.parse_search` read; only ever as query parameters."""
    if isinstance(wanted, RunId):
        return Found(page=f"/runs/{wanted.run_id}" if store.get_run(wanted.run_id) else None)
    if isinstance(wanted, Guid):
        found = store.find_delivery(wanted.guid)
        return Found(page=f"/deliveries/{urllib.parse.quote(wanted.guid)}" if found else None)
    if isinstance(wanted, Target):
        runs = sorted(
            [
                *store.runs_on_target(wanted.repo, "issue", wanted.number),
                *store.runs_on_target(wanted.repo, "pull_request", wanted.number),
            ],
            key=lambda r: (r.created_at, r.id),
            reverse=True,
        )
        return Found(runs=runs, contexts=runs_context(store, runs))
    return Found()
