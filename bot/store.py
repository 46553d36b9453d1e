"""Persistence in SQLite (WAL): deliveries, runs and the job table, with a versioned schema."""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.log import get_logger
from bot.segments import SegmentError, bodies_dir, read_body
from policies.lifecycle import InstallationState
from policies.outcome import OUTCOME_STATUSES

log = get_logger(__name__)

# Each entry migrates the schema from version i to i + 1; never edit one that has shipped.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE deliveries (
        guid TEXT PRIMARY KEY,
        event TEXT NOT NULL,
        action TEXT,
        hook_id TEXT,
        target_type TEXT,
        target_id TEXT,
        received_at REAL NOT NULL,
        headers TEXT NOT NULL,
        body BLOB NOT NULL,
        decision TEXT,
        reason TEXT,
        workflow TEXT,
        decided_at REAL
    );
    CREATE INDEX deliveries_received ON deliveries (received_at);
    CREATE TABLE jobs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL,
        delivery_id TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'queued',
        attempts INTEGER NOT NULL DEFAULT 0,
        max_attempts INTEGER NOT NULL DEFAULT 5,
        run_after REAL NOT NULL,
        lease_owner TEXT,
        lease_until REAL,
        last_error TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        UNIQUE (kind, delivery_id)
    );
    CREATE INDEX jobs_ready ON jobs (status, run_after);
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        delivery_id TEXT NOT NULL,
        repo TEXT NOT NULL,
        target_kind TEXT NOT NULL,
        number INTEGER NOT NULL,
        workflow TEXT NOT NULL,
        mode TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        outcome TEXT
    );
    CREATE UNIQUE INDEX runs_delivery_workflow ON runs (delivery_id, workflow);
    """,
    # A body kept in a segment file (bot/segments.py): `body` is then empty. Rows written
    # before this version keep their body inline, with these columns NULL.
    """
    ALTER TABLE deliveries ADD COLUMN body_segment INTEGER;
    ALTER TABLE deliveries ADD COLUMN body_offset INTEGER;
    ALTER TABLE deliveries ADD COLUMN body_length INTEGER;
    """,
    # A pull request's review memory (policies.review_state.ReviewState as JSON).
    """
    CREATE TABLE review_states (
        repo TEXT NOT NULL,
        number INTEGER NOT NULL,
        state TEXT NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (repo, number)
    );
    """,
    # The arguments a run's workflow was given (JSON), so `decide` can resume it with the
    # same prompts; a follow-up's carry `decision.blocked_run`, the run it answers.
    """
    ALTER TABLE runs ADD COLUMN args TEXT;
    """,
    # How many attempts started the run: a run found `running` when an attempt starts was
    # interrupted (its worker died); after three of those it is given up.
    """
    ALTER TABLE runs ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
    """,
    # What GitHub said of each installation (policies.lifecycle.InstallationState); one not
    # listed is active. `delivery_id` is the delivery that set the state.
    """
    CREATE TABLE installations (
        id INTEGER PRIMARY KEY,
        state TEXT NOT NULL,
        delivery_id TEXT,
        updated_at REAL NOT NULL
    );
    """,
    # One run per (repository, issue or pull request, workflow) at a time, held like a job's
    # lease; and a stop asked of a run, which whichever worker runs it acts on.
    """
    CREATE TABLE target_locks (
        repo TEXT NOT NULL,
        target_kind TEXT NOT NULL,
        number INTEGER NOT NULL,
        workflow TEXT NOT NULL,
        run_id TEXT NOT NULL,
        until REAL NOT NULL,
        PRIMARY KEY (repo, target_kind, number, workflow)
    );
    ALTER TABLE runs ADD COLUMN stop_reason TEXT;
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)

REPORTER_REPLY = "reporter_reply"
"""The decision reason of a delivery whose run is triage again after the reporter's reply."""


class StoreError(RuntimeError):
    """The database cannot be opened or has a schema this version does not know."""


class BodyMissing(StoreError):
    """A delivery's row is stored but its body cannot be read back from its segment file."""


@dataclass(frozen=True, slots=True)
class DeliveryRecord:
    """One stored delivery: the raw body and headers plus the decision once made."""

    guid: str
    event: str
    action: str | None
    hook_id: str | None
    target_type: str | None
    target_id: str | None
    received_at: float
    headers: dict[str, str]
    body: bytes
    decision: str | None = None
    reason: str | None = None
    workflow: str | None = None
    decided_at: float | None = None


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One workflow execution started by a delivery."""

    id: str
    delivery_id: str
    repo: str
    target_kind: str
    number: int
    workflow: str
    mode: str
    status: str
    created_at: float
    updated_at: float
    outcome: dict[str, object] | None = None
    args: dict[str, Any] | None = None
    """The workflow's arguments as given to the engine (None when not recorded)."""

    def answers(self) -> str | None:
        """The id of the BLOCKED run this run answers (a `decide` follow-up), else None."""
        decision = (self.args or {}).get("decision")
        blocked = decision.get("blocked_run") if isinstance(decision, dict) else None
        return blocked if isinstance(blocked, str) else None


@dataclass(frozen=True, slots=True)
class DeliverySummary:
    """A delivery as `bot deliveries` shows it: its decision (on `delivery`, whose body is
    not read), its job and the runs it started."""

    delivery: DeliveryRecord
    job_status: str | None
    """queued, running, done, dead or cancelled; None when no job was made for it."""
    attempts: int
    max_attempts: int | None
    last_error: str | None
    runs: tuple[tuple[str, str], ...]
    """(run id, status) of each run the delivery started, oldest first."""


# A run that answers a BLOCKED run but ended in these does not count as its answer: the
# question may be answered again.
_NOT_ANSWERED = ("failed", "skipped")
_BATCH = 500  # values bound in one `IN (...)`, well under SQLite's limit


def new_run_id() -> str:
    return "wf_" + secrets.token_hex(6)


def connect(path: Path, *, timeout: float = 10.0) -> sqlite3.Connection:
    """A connection in autocommit mode with WAL and the pragmas every user of the file shares."""
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    # In WAL mode NORMAL survives a killed process; only a power loss may drop the last commits.
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


@contextmanager
def transaction(conn: sqlite3.Connection, *, immediate: bool = True) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the schema to SCHEMA_VERSION; refuse a database newer than this code."""
    with transaction(conn):
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"database schema version {version} is newer than this bot ({SCHEMA_VERSION}); "
                "upgrade the bot or point BOT_DATABASE_URL at another file"
            )
        for step in range(version, SCHEMA_VERSION):
            for statement in MIGRATIONS[step].split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version={step + 1}")
    return SCHEMA_VERSION


_DELIVERY_COLUMNS = (
    "guid, event, action, hook_id, target_type, target_id, received_at, headers, body, "
    "decision, reason, workflow, decided_at, body_segment, body_offset, body_length"
)
_RUN_COLUMNS = (
    "id, delivery_id, repo, target_kind, number, workflow, mode, status, created_at, "
    "updated_at, outcome, args"
)


def _delivery(row: tuple[Any, ...], folder: Path | None) -> DeliveryRecord:
    """The record for a row; `folder` holds the segments, None to leave a segment body empty."""
    body = bytes(row[8])
    if row[13] is not None and folder is not None:
        try:
            body = read_body(folder, int(row[13]), int(row[14]), int(row[15]))
        except SegmentError as exc:
            raise BodyMissing(f"the body of delivery {row[0]} cannot be read: {exc}") from None
    return DeliveryRecord(
        guid=str(row[0]),
        event=str(row[1]),
        action=_opt(row[2]),
        hook_id=_opt(row[3]),
        target_type=_opt(row[4]),
        target_id=_opt(row[5]),
        received_at=float(row[6]),
        headers=json.loads(str(row[7])),
        body=body,
        decision=_opt(row[9]),
        reason=_opt(row[10]),
        workflow=_opt(row[11]),
        decided_at=None if row[12] is None else float(row[12]),
    )


def _run(row: tuple[Any, ...]) -> RunRecord:
    return RunRecord(
        id=str(row[0]),
        delivery_id=str(row[1]),
        repo=str(row[2]),
        target_kind=str(row[3]),
        number=int(row[4]),
        workflow=str(row[5]),
        mode=str(row[6]),
        status=str(row[7]),
        created_at=float(row[8]),
        updated_at=float(row[9]),
        outcome=None if row[10] is None else json.loads(str(row[10])),
        args=_json_object(row[11]),
    )


def _json_object(value: object) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        data = json.loads(str(value))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _opt(value: object) -> str | None:
    return None if value is None else str(value)


class Store:
    """The bot's database file. Methods are blocking; call them from a worker thread in async code.

    Each thread gets its own connection, so the store may be shared by the event loop's
    thread pool, the intake writer and command-line tools at once.
    """

    def __init__(self, path: Path, *, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.bodies = bodies_dir(path)
        self.clock = clock
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []

    @classmethod
    def open(cls, path: Path, *, clock: Callable[[], float] = time.time) -> Store:
        """Create the file and its directory if needed and migrate the schema."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            store = cls(path, clock=clock)
            migrate(store.conn())
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the database at {path}: {exc}") from exc
        return store

    def conn(self) -> sqlite3.Connection:
        """This thread's connection."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path)
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def close(self) -> None:
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()

    def ping(self) -> bool:
        """True when the database answers a query."""
        try:
            self.conn().execute("SELECT 1 FROM deliveries LIMIT 1").fetchall()
        except sqlite3.Error:
            return False
        return True

    # -- deliveries ----------------------------------------------------------------------

    def get_delivery(self, guid: str) -> DeliveryRecord | None:
        """The delivery with its body; BodyMissing when the row is there but the body is not."""
        row = (
            self.conn()
            .execute(f"SELECT {_DELIVERY_COLUMNS} FROM deliveries WHERE guid = ?", (guid,))
            .fetchone()
        )
        return None if row is None else _delivery(row, self.bodies)

    def list_deliveries(
        self, *, limit: int | None = None, bodies: bool = True
    ) -> list[DeliveryRecord]:
        """Deliveries oldest first; with `limit`, only the most recent ones.

        With `bodies=False` a body kept in a segment file is not read (the record's body is
        empty), which is all a listing needs.
        """
        sql = f"SELECT {_DELIVERY_COLUMNS} FROM deliveries ORDER BY received_at DESC, rowid DESC"
        params: tuple[int, ...] = ()
        if limit is not None:
            sql += " LIMIT ?"
            params = (limit,)
        folder = self.bodies if bodies else None
        rows = [_delivery(row, folder) for row in self.conn().execute(sql, params)]
        rows.reverse()
        return rows

    def count_deliveries(self) -> int:
        return int(self.conn().execute("SELECT count(*) FROM deliveries").fetchone()[0])

    def seen_guids(self, guids: Iterable[str]) -> set[str]:
        """Those of `guids` that are stored (received at least once)."""
        wanted = list(dict.fromkeys(guids))
        seen: set[str] = set()
        for start in range(0, len(wanted), _BATCH):
            batch = wanted[start : start + _BATCH]
            rows = self.conn().execute(
                f"SELECT guid FROM deliveries WHERE guid IN ({','.join('?' * len(batch))})",
                batch,
            )
            seen.update(str(row[0]) for row in rows)
        return seen

    def deliveries_in_flight(self) -> list[DeliveryRecord]:
        """Deliveries with work still ahead, oldest first: not decided yet, or with a run
        that has not finished. A body that cannot be read back is given as empty."""
        finished = ",".join("?" * len(OUTCOME_STATUSES))
        rows = (
            self.conn()
            .execute(
                f"SELECT {_DELIVERY_COLUMNS} FROM deliveries WHERE decision IS NULL"
                f" OR guid IN (SELECT delivery_id FROM runs WHERE status NOT IN ({finished}))"
                " ORDER BY received_at, rowid",
                tuple(OUTCOME_STATUSES),
            )
            .fetchall()
        )
        records: list[DeliveryRecord] = []
        for row in rows:
            try:
                records.append(_delivery(row, self.bodies))
            except BodyMissing:
                records.append(_delivery(row, None))
        return records

    def delivery_summaries(self, *, limit: int | None = None) -> list[DeliverySummary]:
        """`list_deliveries(limit=..., bodies=False)`, each with its job and its runs."""
        deliveries = self.list_deliveries(limit=limit, bodies=False)
        jobs: dict[str, tuple[Any, ...]] = {}
        runs: dict[str, list[tuple[str, str]]] = {}
        guids = [d.guid for d in deliveries]
        for start in range(0, len(guids), _BATCH):
            batch = guids[start : start + _BATCH]
            marks = ",".join("?" * len(batch))
            for row in self.conn().execute(
                "SELECT delivery_id, status, attempts, max_attempts, last_error FROM jobs"
                f" WHERE kind = 'delivery' AND delivery_id IN ({marks})",
                batch,
            ):
                jobs[str(row[0])] = row
            for row in self.conn().execute(
                f"SELECT delivery_id, id, status FROM runs WHERE delivery_id IN ({marks})"
                " ORDER BY created_at, rowid",
                batch,
            ):
                runs.setdefault(str(row[0]), []).append((str(row[1]), str(row[2])))
        summaries: list[DeliverySummary] = []
        for delivery in deliveries:
            job = jobs.get(delivery.guid)
            summaries.append(
                DeliverySummary(
                    delivery=delivery,
                    job_status=None if job is None else str(job[1]),
                    attempts=0 if job is None else int(job[2]),
                    max_attempts=None if job is None else int(job[3]),
                    last_error=None if job is None else _opt(job[4]),
                    runs=tuple(runs.get(delivery.guid, ())),
                )
            )
        return summaries

    def record_decision(
        self, guid: str, decision: str, *, reason: str | None = None, workflow: str | None = None
    ) -> None:
        """Store what the worker decided for a delivery ('trigger', 'skip' or 'error')."""
        self.conn().execute(
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
    ) -> RunRecord:
        """The run for (delivery, workflow); a retried job gets the run it created before."""
        conn = self.conn()
        now = self.clock()
        with transaction(conn):
            row = conn.execute(
                f"SELECT {_RUN_COLUMNS} FROM runs WHERE delivery_id = ? AND workflow = ?",
                (delivery_id, workflow),
            ).fetchone()
            if row is not None:
                return _run(row)
            run_id = new_run_id()
            conn.execute(
                f"INSERT INTO runs ({_RUN_COLUMNS})"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL)",
                (run_id, delivery_id, repo, target_kind, number, workflow, mode, status, now, now),
            )
        return RunRecord(
            run_id, delivery_id, repo, target_kind, number, workflow, mode, status, now, now
        )

    def get_run(self, run_id: str) -> RunRecord | None:
        row = (
            self.conn()
            .execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,))
            .fetchone()
        )
        return None if row is None else _run(row)

    def runs_for_delivery(self, delivery_id: str) -> list[RunRecord]:
        rows = self.conn().execute(
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE delivery_id = ? ORDER BY created_at",
            (delivery_id,),
        )
        return [_run(row) for row in rows]

    def runs_on_target(
        self, repo: str, target_kind: str, number: int, *, exclude: str = "", limit: int = 20
    ) -> list[RunRecord]:
        """The newest `limit` runs on one issue or pull request, newest first, but `exclude`."""
        rows = self.conn().execute(
            f"SELECT {_RUN_COLUMNS} FROM runs"
            " WHERE repo = ? AND target_kind = ? AND number = ? AND id != ?"
            " ORDER BY created_at DESC LIMIT ?",
            (repo, target_kind, number, exclude, limit),
        )
        return [_run(row) for row in rows]

    def latest_run(
        self, repo: str, target_kind: str, number: int, workflow: str, *, exclude_delivery: str = ""
    ) -> RunRecord | None:
        """The newest run of `workflow` on one issue or pull request, but `exclude_delivery`'s."""
        row = (
            self.conn()
            .execute(
                f"SELECT {_RUN_COLUMNS} FROM runs"
                " WHERE repo = ? AND target_kind = ? AND number = ? AND workflow = ?"
                " AND delivery_id != ? ORDER BY created_at DESC, rowid DESC LIMIT 1",
                (repo, target_kind, number, workflow, exclude_delivery),
            )
            .fetchone()
        )
        return None if row is None else _run(row)

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
        row = (
            self.conn()
            .execute(
                "SELECT count(*) FROM runs JOIN deliveries ON deliveries.guid = runs.delivery_id"
                " WHERE runs.repo = ? AND runs.target_kind = ? AND runs.number = ?"
                " AND runs.workflow = ? AND deliveries.decision = 'trigger'"
                " AND deliveries.reason = ? AND runs.delivery_id != ?",
                (repo, target_kind, number, workflow, reason, exclude_delivery),
            )
            .fetchone()
        )
        return int(row[0])

    def update_run(
        self, run_id: str, *, status: str, outcome: dict[str, object] | None = None
    ) -> None:
        self.conn().execute(
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
        ended, is taken over; a run may always take its own lock again (a retried job)."""
        key = (run.repo, run.target_kind, run.number, workflow)
        conn = self.conn()
        with transaction(conn):
            row = conn.execute(
                "SELECT l.run_id, l.until, r.status FROM target_locks l"
                " LEFT JOIN runs r ON r.id = l.run_id"
                " WHERE l.repo = ? AND l.target_kind = ? AND l.number = ? AND l.workflow = ?",
                key,
            ).fetchone()
            if row is not None:
                holder, held_until, status = str(row[0]), float(row[1]), row[2]
                live = held_until > self.clock() and status not in OUTCOME_STATUSES
                if holder != run.id and live:
                    return holder
            conn.execute(
                "INSERT INTO target_locks (repo, target_kind, number, workflow, run_id, until)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (repo, target_kind, number, workflow)"
                " DO UPDATE SET run_id = excluded.run_id, until = excluded.until",
                (*key, run.id, until),
            )
        return None

    def refresh_target(self, run_id: str, until: float) -> None:
        self.conn().execute("UPDATE target_locks SET until = ? WHERE run_id = ?", (until, run_id))

    def release_target(self, run_id: str) -> None:
        self.conn().execute("DELETE FROM target_locks WHERE run_id = ?", (run_id,))

    def request_stop(self, run_id: str, reason: str) -> None:
        """Ask whichever worker runs `run_id` to stop it (it looks every second or so)."""
        self.conn().execute(
            "UPDATE runs SET stop_reason = ?, updated_at = ? WHERE id = ? AND stop_reason IS NULL",
            (reason, self.clock(), run_id),
        )

    def stop_requested(self, run_id: str) -> str | None:
        row = self.conn().execute("SELECT stop_reason FROM runs WHERE id = ?", (run_id,)).fetchone()
        return None if row is None or row[0] is None else str(row[0])

    def start_attempt(self, run_id: str) -> int:
        """Count one more attempt at the run; the number of attempts started, this one too."""
        conn = self.conn()
        with transaction(conn):
            conn.execute(
                "UPDATE runs SET attempts = attempts + 1, updated_at = ? WHERE id = ?",
                (self.clock(), run_id),
            )
            row = conn.execute("SELECT attempts FROM runs WHERE id = ?", (run_id,)).fetchone()
        return 0 if row is None else int(row[0])

    def set_run_args(self, run_id: str, args: dict[str, Any]) -> None:
        """Record the arguments the run's workflow is given (see `RunRecord.args`)."""
        self.conn().execute(
            "UPDATE runs SET args = ?, updated_at = ? WHERE id = ?",
            (json.dumps(args, sort_keys=True, default=str), self.clock(), run_id),
        )

    def _answering(self, blocked: RunRecord, exclude: str) -> RunRecord | None:
        # The LIKE only narrows the rows to parse: run ids are unique tokens.
        rows = self.conn().execute(
            f"SELECT {_RUN_COLUMNS} FROM runs"
            " WHERE repo = ? AND target_kind = ? AND number = ? AND id != ?"
            " AND args LIKE ? ORDER BY created_at DESC",
            (blocked.repo, blocked.target_kind, blocked.number, exclude, f"%{blocked.id}%"),
        )
        for row in rows:
            run = _run(row)
            if run.answers() == blocked.id and run.status not in _NOT_ANSWERED:
                return run
        return None

    def answered_by(self, blocked: RunRecord, *, exclude: str = "") -> RunRecord | None:
        """The run (but `exclude`) that answers `blocked`, unless it failed or was skipped."""
        return self._answering(blocked, exclude)

    def claim_answer(
        self, run_id: str, blocked: RunRecord, decision: dict[str, Any]
    ) -> RunRecord | None:
        """Record on run `run_id` that it answers `blocked` with `decision`, unless another run
        already does: that run is returned then and nothing is written. Atomic, so two
        `decide` replies at once start one follow-up."""
        conn = self.conn()
        with transaction(conn):
            other = self._answering(blocked, run_id)
            if other is not None:
                return other
            row = conn.execute("SELECT args FROM runs WHERE id = ?", (run_id,)).fetchone()
            args = (_json_object(row[0]) if row is not None else None) or {}
            conn.execute(
                "UPDATE runs SET args = ?, updated_at = ? WHERE id = ?",
                (
                    json.dumps({**args, "decision": decision}, sort_keys=True, default=str),
                    self.clock(),
                    run_id,
                ),
            )
        return None

    # -- installations -------------------------------------------------------------------

    def installation_state(self, installation_id: int) -> InstallationState | None:
        """What the lifecycle deliveries left the installation in; None when none came."""
        row = (
            self.conn()
            .execute("SELECT state FROM installations WHERE id = ?", (installation_id,))
            .fetchone()
        )
        return None if row is None else InstallationState(str(row[0]))

    def set_installation_state(
        self, installation_id: int, state: InstallationState, *, delivery_id: str
    ) -> None:
        self.conn().execute(
            "INSERT INTO installations (id, state, delivery_id, updated_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (id) DO UPDATE SET state = excluded.state,"
            " delivery_id = excluded.delivery_id, updated_at = excluded.updated_at",
            (installation_id, state.value, delivery_id, self.clock()),
        )

    # -- review memory -------------------------------------------------------------------

    def get_review_state(self, repo: str, number: int) -> str | None:
        """The pull request's review state (JSON), or None when none was stored."""
        row = (
            self.conn()
            .execute(
                "SELECT state FROM review_states WHERE repo = ? AND number = ?", (repo, number)
            )
            .fetchone()
        )
        return None if row is None else str(row[0])

    def put_review_state(self, repo: str, number: int, state: str) -> None:
        self.conn().execute(
            "INSERT INTO review_states (repo, number, state, updated_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (repo, number) DO UPDATE SET state = excluded.state,"
            " updated_at = excluded.updated_at",
            (repo, number, state, self.clock()),
        )

    def checkpoint(self) -> None:
        """Copy committed WAL pages into the database without waiting on anyone."""
        self.conn().execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
