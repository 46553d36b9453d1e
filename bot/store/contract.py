"""The storage contract: deliveries, runs and review state, with its SQL written once.

`Storage` holds every query the worker, the executor and the commands make, in the SQL that
SQLite and Postgres share (`?` placeholders, `ON CONFLICT`, `RETURNING`); a backend supplies
only its connections (`_session`, `_transaction`) and the few words that differ between the
two (`_rowid`, `_for_update`, where a delivery's body lives). `bot.store.sqlite.Store` is the
embedded SQLite backend, `bot.store.postgres.store.PostgresStore` the scale-out one. Methods are
blocking: async code calls them from a worker thread.
"""

from __future__ import annotations

import dataclasses
import json
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar, Protocol

from bot.store.findings import FindingFates
from bot.store.learnings import Learnings
from bot.store.records import (
    REPORTER_REPLY,
    BodyMissing,
    DeliveryRecord,
    DeliverySummary,
    RunRecord,
    StoreError,
    delivery_record,
    json_object,
    new_run_id,
    optional_str,
    repository_of,
    run_record,
)
from bot.store.refusals import RefusalsTable
from bot.store.ui_access import UiAccess
from bot.store.workers import WorkerBeats
from policies.lifecycle import InstallationState
from policies.outcome import OUTCOME_STATUSES
from policies.ui_queue import StateCount

__all__ = [
    "DELIVERY_COLUMNS",
    "REPORTER_REPLY",
    "RUN_COLUMNS",
    "BodyMissing",
    "DeliveryRecord",
    "DeliverySummary",
    "RunRecord",
    "Sql",
    "Storage",
    "StoreError",
    "new_run_id",
    "storable",
    "storable_params",
]

# A run that answers a BLOCKED run but ended in these does not count as its answer: the
# question may be answered again.
_NOT_ANSWERED = ("failed", "skipped")


class Sql(Protocol):
    """One connection as the shared queries use it: `?` placeholders, rows as tuples."""

    def all(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]: ...

    def one(self, sql: str, params: Sequence[object] = ()) -> tuple[Any, ...] | None: ...

    def run(self, sql: str, params: Sequence[object] = ()) -> int:
        """Execute a statement; the number of rows it changed."""
        ...


DELIVERY_COLUMNS = (
    "guid, event, action, hook_id, target_type, target_id, received_at, headers, "
    "decision, reason, workflow, decided_at"
)
RUN_COLUMNS = (
    "id, delivery_id, repo, target_kind, number, workflow, mode, status, created_at, "
    "updated_at, outcome, args, input_tokens, output_tokens, cost, finished_at"
)
ARTIFACT_CAP = 32 * 1024 * 1024
"""The most characters of one run artifact the database keeps; the engine caps its own well
under this (transcripts at 16 MiB, the journal at 2 MiB), so only a bug meets it."""
AUTO_REVIEWS_KEPT_S = 2 * 86_400
"""How long a counted automatic review is kept: past `review.auto_pause`'s longest window."""
_BATCH = 500  # ids per `IN (...)`: far under both backends' limits on parameters
_SCAN = 500  # rows per query of a filtered listing of deliveries


# When a run's usage counts: when it ended, or (not ended) when it began.
_USED_AT = "coalesce(finished_at, created_at)"


def _newest_first(
    select: str,
    clauses: list[str],
    params: list[object],
    before: tuple[float, str] | None,
    order: tuple[str, str],
) -> tuple[str, list[object]]:
    """`select` where all `clauses` hold, newest first by `order` (a time, then a key, both
    descending), after `before` in that order; the caller adds the LIMIT's parameter."""
    at, key = order
    if before is not None:
        clauses = [*clauses, f"{at} <= ? AND ({at} < ? OR {key} < ?)"]
        params = [*params, before[0], before[0], before[1]]
    sql = select + (" WHERE " + " AND ".join(clauses) if clauses else "")
    return sql + f" ORDER BY {at} DESC, {key} DESC LIMIT ?", params


def _delivery_filter(*, event: str, decision: str) -> tuple[list[str], list[object]]:
    """The WHERE clauses (and their parameters) of deliveries of `event` and `decision` when
    given ("pending": not decided yet)."""
    where: list[str] = []
    params: list[object] = []
    if event:
        where.append("event = ?")
        params.append(event)
    if decision == "pending":
        where.append("decision IS NULL")
    elif decision:
        where.append("decision = ?")
        params.append(decision)
    return where, params


def _marks(n: int) -> str:
    return ", ".join(["?"] * n)


def storable(text: str) -> str:
    """`text` as both backends keep it: a NUL (U+0000) becomes U+FFFD.

    Postgres cannot hold a NUL in a text column and SQLite can, so a payload with one in a
    field the app stores (a signed `action`, a repository name, a skip's detail) would be
    refused on one backend only, and refused again at every retry and redelivery. Replaced
    on both, the row is the same wherever it is kept.
    """
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def storable_params(params: Sequence[object]) -> Sequence[object]:
    """The parameters of a statement with every text one `storable`."""
    if not any(isinstance(p, str) and "\x00" in p for p in params):
        return params
    return [storable(p) if isinstance(p, str) else p for p in params]


class Storage(FindingFates, WorkerBeats, Learnings, RefusalsTable, UiAccess, ABC):
    """The bot's database, whichever backend holds it. Safe to share between threads."""

    _rowid: ClassVar[str]
    """A column that orders rows of `deliveries` and `runs` by insertion."""
    _for_update: ClassVar[str]
    """What locks a selected row until the transaction ends ('' where writers serialize)."""
    _body_columns: ClassVar[str] = "body"
    """The columns after DELIVERY_COLUMNS that `_body` reads a delivery's body from."""
    _delivery_jobs: ClassVar[str]
    """A query of (delivery_id, status, attempts, max_attempts, last_error) of the delivery
    jobs of the deliveries in `{marks}`, status and attempts in the JobQueue's words (the
    job table is the backend's queue's)."""
    _queue_states: ClassVar[str]
    """A query of (workflow, state, jobs, oldest enqueued at) over the unfinished and dead
    jobs, its one parameter the time now; states as `policies.ui_queue` names them, the
    workflow '' while a job's delivery is undecided."""

    def __init__(self, *, where: str, clock: Callable[[], float] = time.time) -> None:
        self.where = where
        """Where the database is, for logs and messages (never with a password)."""
        self.clock = clock

    @abstractmethod
    def _session(self) -> AbstractContextManager[Sql]:
        """A connection whose statements each commit on their own."""

    @abstractmethod
    def _transaction(self) -> AbstractContextManager[Sql]:
        """A connection in a transaction that commits when the block ends (rolls back on error)."""

    @abstractmethod
    def ping(self) -> bool:
        """True when the database answers a query."""

    @abstractmethod
    def close(self) -> None: ...

    def _body(self, row: tuple[Any, ...], read: bool) -> bytes:
        """The body of a delivery row (its columns after DELIVERY_COLUMNS); with `read` False
        a body kept outside the row may be left empty."""
        return bytes(row[12])

    def _delivery(self, row: tuple[Any, ...], read: bool = True) -> DeliveryRecord:
        return delivery_record(row, self._body(row, read))

    # -- deliveries ----------------------------------------------------------------------

    def get_delivery(self, guid: str) -> DeliveryRecord | None:
        """The delivery with its body; BodyMissing when the row is there but the body is not."""
        with self._session() as db:
            row = db.one(
                f"SELECT {DELIVERY_COLUMNS}, {self._body_columns} FROM deliveries WHERE guid = ?",
                (guid,),
            )
        return None if row is None else self._delivery(row)

    def list_deliveries(
        self, *, limit: int | None = None, bodies: bool = True
    ) -> list[DeliveryRecord]:
        """Deliveries oldest first; with `limit`, only the most recent ones.

        With `bodies=False` a body kept outside the row (a SQLite segment file) is not read
        (the record's body is empty), which is all a listing needs.
        """
        sql = (
            f"SELECT {DELIVERY_COLUMNS}, {self._body_columns} FROM deliveries"
            f" ORDER BY received_at DESC, {self._rowid} DESC"
        )
        params: tuple[int, ...] = ()
        if limit is not None:
            sql += " LIMIT ?"
            params = (limit,)
        with self._session() as db:
            rows = db.all(sql, params)
        out = [self._delivery(row, bodies) for row in rows]
        out.reverse()
        return out

    def count_deliveries(self) -> int:
        with self._session() as db:
            row = db.one("SELECT count(*) FROM deliveries")
        return int(row[0]) if row else 0

    def seen_guids(self, guids: Iterable[str]) -> set[str]:
        """Those of `guids` that are stored (received at least once)."""
        wanted = list(dict.fromkeys(guids))
        seen: set[str] = set()
        with self._session() as db:
            for start in range(0, len(wanted), _BATCH):
                batch = wanted[start : start + _BATCH]
                rows = db.all(
                    f"SELECT guid FROM deliveries WHERE guid IN ({_marks(len(batch))})", batch
                )
                seen.update(str(row[0]) for row in rows)
        return seen

    def deliveries_in_flight(self) -> list[DeliveryRecord]:
        """Deliveries with work still ahead, oldest first: not decided yet, or with a run
        that has not finished. A body that cannot be read back is given as empty."""
        with self._session() as db:
            rows = db.all(
                f"SELECT {DELIVERY_COLUMNS}, {self._body_columns} FROM deliveries"
                " WHERE decision IS NULL OR guid IN (SELECT delivery_id FROM runs"
                f" WHERE status NOT IN ({_marks(len(OUTCOME_STATUSES))}))"
                f" ORDER BY received_at, {self._rowid}",
                OUTCOME_STATUSES,
            )
        records: list[DeliveryRecord] = []
        for row in rows:
            try:
                records.append(self._delivery(row))
            except BodyMissing:
                records.append(self._delivery(row, read=False))
        return records

    def delivery_summaries(
        self,
        *,
        limit: int | None = None,
        event: str = "",
        action: str = "",
        decision: str = "",
        since: float | None = None,
        repo: str = "",
    ) -> list[DeliverySummary]:
        """Deliveries oldest first (bodies not read), each with its job and its runs; with
        `limit`, only the most recent of those that match.

        Only those of `event` (and `action`), of `decision` ("pending": not decided yet),
        received at or after `since` (a Unix time), and of repository `repo` (the payload's
        `repository.full_name`, in any case). A repository is in the payload, not in a
        column, so a filter by repository reads the body of each row it scans (newest first,
        in batches, until `limit` rows matched).
        """
        deliveries = self._matching_deliveries(
            limit=limit, event=event, action=action, decision=decision, since=since, repo=repo
        )
        guids = [d.guid for d in deliveries]
        jobs: dict[str, tuple[Any, ...]] = {}
        with self._session() as db:
            for start in range(0, len(guids), _BATCH):
                batch = guids[start : start + _BATCH]
                for row in db.all(self._delivery_jobs.format(marks=_marks(len(batch))), batch):
                    jobs[str(row[0])] = row
        runs = self.runs_for_deliveries(guids)
        summaries: list[DeliverySummary] = []
        for delivery in deliveries:
            job = jobs.get(delivery.guid)
            summaries.append(
                DeliverySummary(
                    delivery=delivery,
                    job_status=None if job is None else str(job[1]),
                    attempts=0 if job is None else int(job[2]),
                    max_attempts=None if job is None else int(job[3]),
                    last_error=None if job is None else optional_str(job[4]),
                    runs=tuple((run.id, run.status) for run in runs.get(delivery.guid, ())),
                )
            )
        return summaries

    def _matching_deliveries(
        self,
        *,
        limit: int | None,
        event: str,
        action: str,
        decision: str,
        since: float | None,
        repo: str,
    ) -> list[DeliveryRecord]:
        """`delivery_summaries`' rows, oldest first, with empty bodies."""
        where, params = _delivery_filter(event=event, decision=decision)
        if action:
            where.append("action = ?")
            params.append(action)
        if since is not None:
            where.append("received_at >= ?")
            params.append(since)
        wanted = repo.lower()
        found: list[DeliveryRecord] = []
        before: tuple[float, str] | None = None
        while limit is None or len(found) < limit:
            sql, values = _newest_first(
                f"SELECT {DELIVERY_COLUMNS}, {self._body_columns} FROM deliveries",
                where,
                params,
                before,
                ("received_at", "guid"),
            )
            with self._session() as db:
                rows = db.all(sql, [*values, _SCAN])
            for row in rows:
                if wanted:
                    record, _readable = self._readable(row)
                    if (repository_of(record.body) or "").lower() != wanted:
                        continue
                    record = dataclasses.replace(record, body=b"")
                else:
                    record = self._delivery(row, read=False)
                found.append(record)
                if limit is not None and len(found) >= limit:
                    break
            if len(rows) < _SCAN:
                break
            last = self._delivery(rows[-1], read=False)
            before = (last.received_at, last.guid)
        found.reverse()
        return found

    def record_decision(
        self, guid: str, decision: str, *, reason: str | None = None, workflow: str | None = None
    ) -> None:
        """Store what the worker decided for a delivery ('trigger', 'skip' or 'error')."""
        with self._session() as db:
            db.run(
                "UPDATE deliveries SET decision = ?, reason = ?, workflow = ?, decided_at = ?"
                " WHERE guid = ?",
                (decision, reason, workflow, self.clock(), guid),
            )

    # -- runs ----------------------------------------------------------------------------

    def create_run(
        self,
        *,
        delivery_id: str,
        repo: str,
        target_kind: str,
        number: int,
        workflow: str,
        mode: str,
        status: str = "queued",
        run_id: str | None = None,
    ) -> RunRecord:
        """The run for (delivery, workflow); a retried job gets the run it created before.

        The unique key on (delivery_id, workflow) decides, so two workers racing on one
        delivery get the same run. `run_id` keeps a known run's id (one carried in from
        GitHub, `bot.workflows.decide.flow.carry_in`); by default a new one."""
        now = self.clock()
        with self._transaction() as db:
            db.run(
                f"INSERT INTO runs ({RUN_COLUMNS})"
                f" VALUES ({_marks(10)}, NULL, NULL, NULL, NULL, NULL, NULL)"
                " ON CONFLICT (delivery_id, workflow) DO NOTHING",
                (
                    run_id or new_run_id(),
                    delivery_id,
                    repo,
                    target_kind,
                    number,
                    workflow,
                    mode,
                    status,
                    now,
                    now,
                ),
            )
            row = db.one(
                f"SELECT {RUN_COLUMNS} FROM runs WHERE delivery_id = ? AND workflow = ?",
                (delivery_id, workflow),
            )
        assert row is not None  # inserted above, or there before
        return run_record(row)

    def get_run(self, run_id: str) -> RunRecord | None:
        with self._session() as db:
            row = db.one(f"SELECT {RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,))
        return None if row is None else run_record(row)

    def runs_for_delivery(self, delivery_id: str) -> list[RunRecord]:
        return self.runs_for_deliveries([delivery_id]).get(delivery_id, [])

    def runs_for_deliveries(self, delivery_ids: Sequence[str]) -> dict[str, list[RunRecord]]:
        """The runs each delivery started, oldest first; deliveries without runs are absent."""
        out: dict[str, list[RunRecord]] = {}
        with self._session() as db:
            for start in range(0, len(delivery_ids), _BATCH):
                part = list(delivery_ids[start : start + _BATCH])
                rows = db.all(
                    f"SELECT {RUN_COLUMNS} FROM runs WHERE delivery_id IN ({_marks(len(part))})"
                    f" ORDER BY created_at, {self._rowid}",
                    part,
                )
                for row in rows:
                    run = run_record(row)
                    out.setdefault(run.delivery_id, []).append(run)
        return out

    def runs_on_target(
        self, repo: str, target_kind: str, number: int, *, exclude: str = "", limit: int = 20
    ) -> list[RunRecord]:
        """The newest `limit` runs on one issue or pull request, newest first, but `exclude`."""
        with self._session() as db:
            rows = db.all(
                f"SELECT {RUN_COLUMNS} FROM runs"
                " WHERE repo = ? AND target_kind = ? AND number = ? AND id != ?"
                f" ORDER BY created_at DESC, {self._rowid} DESC LIMIT ?",
                (repo, target_kind, number, exclude, limit),
            )
        return [run_record(row) for row in rows]

    def latest_run(
        self, repo: str, target_kind: str, number: int, workflow: str, *, exclude_delivery: str = ""
    ) -> RunRecord | None:
        """The newest run of `workflow` on one issue or pull request, but `exclude_delivery`'s."""
        with self._session() as db:
            row = db.one(
                f"SELECT {RUN_COLUMNS} FROM runs"
                " WHERE repo = ? AND target_kind = ? AND number = ? AND workflow = ?"
                f" AND delivery_id != ? ORDER BY created_at DESC, {self._rowid} DESC LIMIT 1",
                (repo, target_kind, number, workflow, exclude_delivery),
            )
        return None if row is None else run_record(row)

    def count_runs_for_reason(
        self,
        repo: str,
        target_kind: str,
        number: int,
        workflow: str,
        reason: str,
        *,
        exclude_delivery: str = "",
    ) -> int:
        """How many runs of `workflow` on the target came from deliveries decided with `reason`
        (e.g. `REPORTER_REPLY`, which the worker records with the trigger), but
        `exclude_delivery`'s."""
        with self._session() as db:
            row = db.one(
                "SELECT count(*) FROM runs JOIN deliveries ON deliveries.guid = runs.delivery_id"
                " WHERE runs.repo = ? AND runs.target_kind = ? AND runs.number = ?"
                " AND runs.workflow = ? AND deliveries.decision = 'trigger'"
                " AND deliveries.reason = ? AND runs.delivery_id != ?",
                (repo, target_kind, number, workflow, reason, exclude_delivery),
            )
        return int(row[0]) if row else 0

    def update_run(
        self, run_id: str, *, status: str, outcome: dict[str, object] | None = None
    ) -> None:
        with self._session() as db:
            db.run(
                "UPDATE runs SET status = ?, outcome = coalesce(?, outcome), updated_at = ?"
                " WHERE id = ?",
                (
                    status,
                    None if outcome is None else json.dumps(outcome, sort_keys=True),
                    self.clock(),
                    run_id,
                ),
            )

    # -- one run per target, and stops across workers ------------------------------------

    def acquire_target(self, run: RunRecord, *, workflow: str, until: float) -> str | None:
        """Hold (repo, target, `workflow`) for `run` until `until`; None when it is held now,
        else the id of the run that holds it. A lock past its time, or held by a run that has
        ended, is taken over; a run may always take its own lock again (a retried job).

        One conditional upsert decides, so two workers racing for a free target cannot both
        win: the second waits for the first's row and then finds it live."""
        key = (run.repo, run.target_kind, run.number, workflow)
        ended = _marks(len(OUTCOME_STATUSES))
        holder: str | None = None
        with self._transaction() as db:
            for _ in range(10):  # the holder may release between the two statements
                taken = db.one(
                    "INSERT INTO target_locks (repo, target_kind, number, workflow, run_id, until)"
                    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (repo, target_kind, number, workflow)"
                    " DO UPDATE SET run_id = excluded.run_id, until = excluded.until"
                    " WHERE target_locks.run_id = excluded.run_id OR target_locks.until <= ?"
                    " OR (SELECT status FROM runs WHERE runs.id = target_locks.run_id)"
                    f" IN ({ended}) RETURNING run_id",
                    (*key, run.id, until, self.clock(), *OUTCOME_STATUSES),
                )
                if taken is not None:
                    return None
                row = db.one(
                    "SELECT run_id FROM target_locks"
                    " WHERE repo = ? AND target_kind = ? AND number = ? AND workflow = ?",
                    key,
                )
                if row is not None:
                    holder = str(row[0])
                    break
        return holder or "(being released)"

    def refresh_target(self, run_id: str, until: float) -> None:
        with self._session() as db:
            db.run("UPDATE target_locks SET until = ? WHERE run_id = ?", (until, run_id))

    def release_target(self, run_id: str) -> None:
        with self._session() as db:
            db.run("DELETE FROM target_locks WHERE run_id = ?", (run_id,))

    def request_stop(self, run_id: str, reason: str) -> None:
        """Ask whichever worker runs `run_id` to stop it (it looks every second or so)."""
        with self._session() as db:
            db.run(
                "UPDATE runs SET stop_reason = ?, updated_at = ? WHERE id = ? AND stop_reason IS NULL",
                (reason, self.clock(), run_id),
            )

    def stop_requested(self, run_id: str) -> str | None:
        with self._session() as db:
            row = db.one("SELECT stop_reason FROM runs WHERE id = ?", (run_id,))
        return None if row is None or row[0] is None else str(row[0])

    def start_attempt(self, run_id: str) -> int:
        """Count one more attempt at the run; the number of attempts started, this one too."""
        with self._transaction() as db:
            row = db.one(
                "UPDATE runs SET attempts = attempts + 1, updated_at = ? WHERE id = ?"
                " RETURNING attempts",
                (self.clock(), run_id),
            )
        return 0 if row is None else int(row[0])

    def set_run_args(self, run_id: str, args: dict[str, Any]) -> None:
        """Record the arguments the run's workflow is given (see `RunRecord.args`)."""
        with self._session() as db:
            db.run(
                "UPDATE runs SET args = ?, updated_at = ? WHERE id = ?",
                (json.dumps(args, sort_keys=True, default=str), self.clock(), run_id),
            )

    @staticmethod
    def _answering(db: Sql, blocked: RunRecord, exclude: str) -> RunRecord | None:
        # The LIKE only narrows the rows to parse: run ids are unique tokens.
        rows = db.all(
            f"SELECT {RUN_COLUMNS} FROM runs"
            " WHERE repo = ? AND target_kind = ? AND number = ? AND id != ?"
            " AND args LIKE ? ORDER BY created_at DESC",
            (blocked.repo, blocked.target_kind, blocked.number, exclude, f"%{blocked.id}%"),
        )
        for row in rows:
            run = run_record(row)
            if run.answers() == blocked.id and run.status not in _NOT_ANSWERED:
                return run
        return None

    def answered_by(self, blocked: RunRecord, *, exclude: str = "") -> RunRecord | None:
        """The run (but `exclude`) that answers `blocked`, unless it failed or was skipped."""
        with self._session() as db:
            return self._answering(db, blocked, exclude)

    def claim_answer(
        self, run_id: str, blocked: RunRecord, decision: dict[str, Any]
    ) -> RunRecord | None:
        """Record on run `run_id` that it answers `blocked` with `decision`, unless another run
        already does: that run is returned then and nothing is written. Atomic, so two
        `decide` replies at once start one follow-up: the blocked run's row is the lock."""
        with self._transaction() as db:
            db.one(f"SELECT id FROM runs WHERE id = ?{self._for_update}", (blocked.id,))
            other = self._answering(db, blocked, run_id)
            if other is not None:
                return other
            row = db.one("SELECT args FROM runs WHERE id = ?", (run_id,))
            args = (json_object(row[0]) if row is not None else None) or {}
            db.run(
                "UPDATE runs SET args = ?, updated_at = ? WHERE id = ?",
                (
                    json.dumps({**args, "decision": decision}, sort_keys=True, default=str),
                    self.clock(),
                    run_id,
                ),
            )
        return None

    # -- replays: redeliveries asked for, and one run per trigger key ----------------------

    def redelivery_requests(self, guids: Iterable[str]) -> dict[str, int]:
        """How many times each of `guids` was asked for again (absent: never)."""
        wanted = list(dict.fromkeys(guids))
        counts: dict[str, int] = {}
        with self._session() as db:
            for start in range(0, len(wanted), _BATCH):
                batch = wanted[start : start + _BATCH]
                rows = db.all(
                    "SELECT guid, requests FROM redelivery_requests"
                    f" WHERE guid IN ({_marks(len(batch))})",
                    batch,
                )
                counts.update((str(row[0]), int(row[1])) for row in rows)
        return counts

    def claim_redelivery(self, guid: str, *, at: float, limit: int) -> bool:
        """Count one more request to redeliver `guid`, unless `limit` were counted already:
        True when this one may be made. One conditional upsert decides, so processes that
        redeliver side by side never pass the limit between them."""
        with self._transaction() as db:
            row = db.one(
                "INSERT INTO redelivery_requests (guid, requests, first_at, last_at)"
                " VALUES (?, 1, ?, ?) ON CONFLICT (guid) DO UPDATE"
                " SET requests = redelivery_requests.requests + 1, last_at = excluded.last_at"
                " WHERE redelivery_requests.requests < ? RETURNING requests",
                (guid, at, at, limit),
            )
        return row is not None and int(row[0]) <= limit

    def forget_redeliveries(self, *, before: float) -> int:
        """Drop the counts of GUIDs last asked for before `before`; how many were dropped."""
        with self._session() as db:
            return db.run("DELETE FROM redelivery_requests WHERE last_at < ?", (before,))

    def claim_trigger(self, key: str, delivery_id: str) -> str:
        """The delivery that holds trigger `key`: `delivery_id` when it is the first to ask
        (or asks again: a retried job), else the one that came first. The primary key
        decides, so of two workers racing on two GUIDs of one body, one runs it."""
        with self._transaction() as db:
            db.run(
                "INSERT INTO trigger_keys (key, delivery_id, created_at) VALUES (?, ?, ?)"
                " ON CONFLICT (key) DO NOTHING",
                (key, delivery_id, self.clock()),
            )
            row = db.one("SELECT delivery_id FROM trigger_keys WHERE key = ?", (key,))
        assert row is not None  # inserted above, or there before
        return str(row[0])

    # -- installations -------------------------------------------------------------------

    def installation_state(self, installation_id: int) -> InstallationState | None:
        """What the lifecycle deliveries left the installation in; None when none came."""
        with self._session() as db:
            row = db.one("SELECT state FROM installations WHERE id = ?", (installation_id,))
        return None if row is None else InstallationState(str(row[0]))

    def set_installation_state(
        self, installation_id: int, state: InstallationState, *, delivery_id: str
    ) -> None:
        with self._session() as db:
            db.run(
                "INSERT INTO installations (id, state, delivery_id, updated_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (id) DO UPDATE SET state = excluded.state,"
                " delivery_id = excluded.delivery_id, updated_at = excluded.updated_at",
                (installation_id, state.value, delivery_id, self.clock()),
            )

    def record_run_usage(
        self,
        run_id: str,
        *,
        input_tokens: int,
        output_tokens: int,
        cost: float | None,
        finished_at: float,
    ) -> None:
        """What the run's agent calls used, once the run has ended."""
        with self._session() as db:
            db.run(
                "UPDATE runs SET input_tokens = ?, output_tokens = ?, cost = ?, finished_at = ?"
                " WHERE id = ?",
                (input_tokens, output_tokens, cost, finished_at, run_id),
            )

    # -- budgets (bot.engine.budget) and command limits (policies.command_rate) ----------

    def daily_tokens(self, installation_id: int, day: str) -> int:
        """The model tokens the installation's runs used on `day` (UTC, `YYYY-MM-DD`)."""
        with self._session() as db:
            row = db.one(
                "SELECT tokens FROM daily_tokens WHERE installation_id = ? AND day = ?",
                (installation_id, day),
            )
        return int(row[0]) if row is not None else 0

    def add_daily_tokens(self, installation_id: int, day: str, tokens: int) -> None:
        """Count `tokens` more for the installation's `day`; one upsert, so workers side by
        side never lose each other's counts."""
        with self._transaction() as db:
            db.run(
                "INSERT INTO daily_tokens (installation_id, day, tokens) VALUES (?, ?, ?)"
                " ON CONFLICT (installation_id, day) DO UPDATE"
                " SET tokens = daily_tokens.tokens + excluded.tokens",
                (installation_id, day, tokens),
            )

    def count_command(
        self, delivery_id: str, repo: str, login: str, *, at: float, window: float
    ) -> int:
        """Count the command of delivery `delivery_id` (once, however often its job runs) by
        `login` in `repo` at `at`; how many they gave in the `window` seconds up to it, this
        one included (older ones are forgotten)."""
        who = (repo.lower(), login.lower())
        with self._transaction() as db:
            db.run(
                "DELETE FROM command_uses WHERE repo = ? AND login = ? AND at <= ?",
                (*who, at - window),
            )
            db.run(
                "INSERT INTO command_uses (delivery_id, repo, login, at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (delivery_id) DO NOTHING",
                (delivery_id, *who, at),
            )
            row = db.one("SELECT COUNT(*) FROM command_uses WHERE repo = ? AND login = ?", who)
        return int(row[0]) if row is not None else 1

    def claim_command_notice(self, repo: str, login: str, *, at: float, window: float) -> bool:
        """True once per `window` seconds for `login` in `repo`: whether this command past
        the limit is the one to answer (the rest of the window's are not)."""
        who = (repo.lower(), login.lower())
        with self._transaction() as db:
            row = db.one(
                "INSERT INTO command_limit_notices (repo, login, at) VALUES (?, ?, ?)"
                " ON CONFLICT (repo, login) DO UPDATE SET at = excluded.at"
                " WHERE command_limit_notices.at <= ? RETURNING at",
                (*who, at, at - window),
            )
        return row is not None

    # -- run artifacts (bot.engine.artifacts.ArtifactMirror) ------------------------------

    def put_artifact(self, run_id: str, name: str, text: str) -> None:
        """Keep artifact `name` of the run (the last write wins); refuses one over the cap."""
        if len(text) > ARTIFACT_CAP:
            raise StoreError(f"artifact {name} of {run_id} is over {ARTIFACT_CAP} characters")
        # JSON artifacts escape a NUL already, Markdown may not (see `storable`).
        text = storable(text)
        with self._session() as db:
            db.run(
                "INSERT INTO run_artifacts (run_id, name, body, updated_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (run_id, name) DO UPDATE SET body = excluded.body,"
                " updated_at = excluded.updated_at",
                (run_id, name, text, self.clock()),
            )

    def get_artifact(self, run_id: str, name: str) -> str | None:
        with self._session() as db:
            row = db.one(
                "SELECT body FROM run_artifacts WHERE run_id = ? AND name = ?", (run_id, name)
            )
        return None if row is None else str(row[0])

    def artifact_names(self, run_id: str) -> list[str]:
        with self._session() as db:
            rows = db.all(
                "SELECT name FROM run_artifacts WHERE run_id = ? ORDER BY name", (run_id,)
            )
        return [str(row[0]) for row in rows]

    # -- review memory -------------------------------------------------------------------

    def get_review_state(self, repo: str, number: int) -> str | None:
        """The pull request's review state (JSON), or None when none was stored."""
        with self._session() as db:
            row = db.one(
                "SELECT state FROM review_states WHERE repo = ? AND number = ?", (repo, number)
            )
        return None if row is None else str(row[0])

    def put_review_state(self, repo: str, number: int, state: str) -> None:
        with self._session() as db:
            db.run(
                "INSERT INTO review_states (repo, number, state, updated_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (repo, number) DO UPDATE SET state = excluded.state,"
                " updated_at = excluded.updated_at",
                (repo, number, state, self.clock()),
            )

    # -- automatic reviews counted per pull request (review.auto_pause) --------------------

    def count_auto_review(self, repo: str, number: int, run_id: str, *, window_s: float) -> int:
        """Count the automatic review `run_id` of the pull request, once however often its job
        is retried, and say its place among those counted within `window_s` seconds before it
        (itself included). The per-pull-request counter's upsert holds its row until the
        commit, so runs counting at once, on any worker, get places one after the other.
        Counts older than `AUTO_REVIEWS_KEPT_S` are dropped as new ones come."""
        now = self.clock()
        with self._transaction() as db:
            row = db.one("SELECT seq, at FROM auto_reviews WHERE run_id = ?", (run_id,))
            if row is None:
                counter = db.one(
                    "INSERT INTO auto_review_counters (repo, number, last) VALUES (?, ?, 1)"
                    " ON CONFLICT (repo, number) DO UPDATE"
                    " SET last = auto_review_counters.last + 1 RETURNING last",
                    (repo, number),
                )
                assert counter is not None  # inserted or updated above
                row = (int(counter[0]), now)
                db.run(
                    "INSERT INTO auto_reviews (run_id, repo, number, seq, at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (run_id, repo, number, row[0], now),
                )
                db.run("DELETE FROM auto_reviews WHERE at < ?", (now - AUTO_REVIEWS_KEPT_S,))
            seq, at = int(row[0]), float(row[1])
            place = db.one(
                "SELECT count(*) FROM auto_reviews"
                " WHERE repo = ? AND number = ? AND seq <= ? AND at >= ?",
                (repo, number, seq, at - window_s),
            )
        return int(place[0]) if place else 1

    def forget_auto_reviews(self, repo: str, number: int) -> int:
        """Forget the pull request's counted automatic reviews (`resume`); how many."""
        with self._session() as db:
            return db.run("DELETE FROM auto_reviews WHERE repo = ? AND number = ?", (repo, number))

    # -- the operator page's reads -------------------------------------------------------

    def _readable(self, row: tuple[Any, ...]) -> tuple[DeliveryRecord, bool]:
        try:
            return self._delivery(row), True
        except BodyMissing:
            return self._delivery(row, read=False), False

    def deliveries_newest_first(
        self,
        *,
        event: str = "",
        decision: str = "",
        before: tuple[float, str] | None = None,
        limit: int,
    ) -> Iterator[tuple[DeliveryRecord, bool]]:
        """At most `limit` deliveries, newest first (then by GUID, descending), each with
        whether its body could be read (when not, the record's body is empty). Only those of
        `event` and `decision` when given ("pending": not decided yet), and only those after
        `before` (received at, GUID) in that order. Bodies are read as the rows are taken."""
        where, params = _delivery_filter(event=event, decision=decision)
        sql, params = _newest_first(
            f"SELECT {DELIVERY_COLUMNS}, {self._body_columns} FROM deliveries",
            where,
            params,
            before,
            ("received_at", "guid"),
        )
        with self._session() as db:
            rows = db.all(sql, [*params, limit])
        for row in rows:
            yield self._readable(row)

    def find_delivery(self, guid: str) -> tuple[DeliveryRecord, bool] | None:
        """The delivery and whether its body could be read (when not, its body is empty)."""
        with self._session() as db:
            row = db.one(
                f"SELECT {DELIVERY_COLUMNS}, {self._body_columns} FROM deliveries WHERE guid = ?",
                (guid,),
            )
        return None if row is None else self._readable(row)

    def deliveries_by_guid(self, guids: Sequence[str]) -> dict[str, tuple[DeliveryRecord, bool]]:
        """The deliveries of `guids` that are stored, by GUID, each with whether its body could
        be read (when not, its body is empty)."""
        out: dict[str, tuple[DeliveryRecord, bool]] = {}
        with self._session() as db:
            for start in range(0, len(guids), _BATCH):
                part = list(guids[start : start + _BATCH])
                rows = db.all(
                    f"SELECT {DELIVERY_COLUMNS}, {self._body_columns} FROM deliveries"
                    f" WHERE guid IN ({_marks(len(part))})",
                    part,
                )
                for row in rows:
                    record, readable = self._readable(row)
                    out[record.guid] = (record, readable)
        return out

    def artifact_of_runs(self, run_ids: Sequence[str], name: str) -> dict[str, str]:
        """The artifact `name` of each of `run_ids` that has one, by run id."""
        out: dict[str, str] = {}
        with self._session() as db:
            for start in range(0, len(run_ids), _BATCH):
                part = list(run_ids[start : start + _BATCH])
                rows = db.all(
                    "SELECT run_id, body FROM run_artifacts"
                    f" WHERE name = ? AND run_id IN ({_marks(len(part))})",
                    [name, *part],
                )
                out.update((str(r[0]), str(r[1])) for r in rows)
        return out

    def delivery_jobs(self, guids: Sequence[str]) -> dict[str, tuple[Any, ...]]:
        """The job of each delivery that has one, by GUID: (guid, status, attempts,
        max_attempts, last error)."""
        if not guids:
            return {}
        with self._session() as db:
            rows = db.all(self._delivery_jobs.format(marks=_marks(len(guids))), guids)
        return {str(row[0]): row for row in rows}

    def queue_states(self) -> list[StateCount]:
        """The jobs not done, counted per (workflow, state) (`policies.ui_queue`)."""
        with self._session() as db:
            rows = db.all(self._queue_states, (self.clock(),))
        return [
            StateCount(
                workflow=str(r[0] or ""),
                state=str(r[1]),
                jobs=int(r[2]),
                oldest_enqueued=None if r[3] is None else float(r[3]),
            )
            for r in rows
        ]

    def runs_newest_first(
        self,
        *,
        repo: str = "",
        workflow: str = "",
        status: str = "",
        before: tuple[float, str] | None = None,
        limit: int,
    ) -> list[RunRecord]:
        """At most `limit` runs, newest first (then by id, descending), of `repo`, `workflow`
        and `status` when given, after `before` (created at, run id) in that order."""
        clauses: list[str] = []
        args: list[object] = []
        for column, value in (("repo", repo), ("workflow", workflow), ("status", status)):
            if value:
                clauses.append(f"{column} = ?")
                args.append(value)
        sql, args = _newest_first(
            f"SELECT {RUN_COLUMNS} FROM runs", clauses, args, before, ("created_at", "id")
        )
        with self._session() as db:
            return [run_record(row) for row in db.all(sql, [*args, limit])]

    def run_repos_and_workflows(self) -> tuple[list[str], list[str]]:
        """The repositories and the workflows that have runs, each sorted."""
        with self._session() as db:
            repos = [str(r[0]) for r in db.all("SELECT DISTINCT repo FROM runs ORDER BY repo")]
            flows = [
                str(r[0]) for r in db.all("SELECT DISTINCT workflow FROM runs ORDER BY workflow")
            ]
        return repos, flows

    def usage_per_day(self, start: float, end: float, day: int) -> list[tuple[Any, ...]]:
        """The usage of the runs in [start, end), added up per (day of `day` seconds,
        repository, workflow): (day, repo, workflow, runs, input tokens, output tokens, cost).

        The day is whole seconds divided by whole seconds, which both backends floor alike (a
        cast of the time to an integer truncates in SQLite and rounds in Postgres: half a
        second at most, at midnight)."""
        with self._session() as db:
            return db.all(
                f"SELECT CAST({_USED_AT} AS BIGINT) / {int(day)}, repo, workflow, count(*),"
                " sum(coalesce(input_tokens, 0)), sum(coalesce(output_tokens, 0)),"
                f" sum(coalesce(cost, 0)) FROM runs WHERE {_USED_AT} >= ? AND {_USED_AT} < ?"
                " GROUP BY 1, 2, 3",
                (start, end),
            )

    def costliest_runs(self, start: float, end: float, limit: int) -> list[tuple[Any, ...]]:
        """The `limit` runs in [start, end) that cost most (most tokens first among equals):
        (id, repo, workflow, when, input tokens, output tokens, cost)."""
        with self._session() as db:
            return db.all(
                f"SELECT id, repo, workflow, {_USED_AT}, input_tokens, output_tokens, cost"
                f" FROM runs WHERE {_USED_AT} >= ? AND {_USED_AT} < ?"
                " AND (cost > 0 OR input_tokens > 0)"
                " ORDER BY coalesce(cost, 0) DESC,"
                " coalesce(input_tokens, 0) + coalesce(output_tokens, 0) DESC, id LIMIT ?",
                (start, end, limit),
            )
