"""The embedded backend: SQLite (WAL) holds deliveries, runs and the job table in one file.

The queries are `bot.store.contract.Storage`'s; this module adds the file, its connections (one per
thread), its versioned schema, and the bodies that the intake keeps in segment files.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bot.log import get_logger
from bot.store.contract import (
    REPORTER_REPLY,
    BodyMissing,
    DeliveryRecord,
    DeliverySummary,
    RunRecord,
    Storage,
    StoreError,
    new_run_id,
    storable_params,
)
from bot.store.findings import SQLITE_TABLE as FINDINGS_TABLE
from bot.store.learnings import NUMBERS_TABLE as LEARNING_NUMBERS
from bot.store.learnings import SQLITE_TABLE as LEARNINGS_TABLE
from bot.store.segments import SegmentError, bodies_dir, read_body
from bot.store.ui_access import SQLITE_STEP as UI_ACCESS
from bot.store.workers import SQLITE_TABLE as WORKER_BEATS

__all__ = [
    "MIGRATIONS",
    "REPORTER_REPLY",
    "SCHEMA_VERSION",
    "BodyMissing",
    "DeliveryRecord",
    "DeliverySummary",
    "RunRecord",
    "Store",
    "StoreError",
    "connect",
    "migrate",
    "new_run_id",
    "transaction",
]

log = get_logger(__name__)

# The operator page's signed-in sessions (bot/ui/auth.py): a cookie signs in only while its
# session's row is here; signing out deletes it, and expired rows go at the next sign-in.
UI_SESSIONS = """
CREATE TABLE ui_sessions (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL
);
CREATE INDEX ui_sessions_expiry ON ui_sessions (expires_at);
"""

# The fencing token of a job's lease: each claim increments it, and a worker asks whether its
# own claim's token still holds the job before every model call and GitHub write.
JOB_LEASE_TOKENS = """
ALTER TABLE jobs ADD COLUMN lease_token INTEGER NOT NULL DEFAULT 0;
"""

# How often each missed delivery was asked for again, kept past GitHub's three days of
# attempts (policies.redelivery); and which delivery holds each trigger's key, so one command
# or automatic trigger runs once whatever the GUID it came under (policies.triggers.run_key).
REPLAY_GUARDS = """
    CREATE TABLE redelivery_requests (
        guid TEXT PRIMARY KEY,
        requests INTEGER NOT NULL,
        first_at REAL NOT NULL,
        last_at REAL NOT NULL
    );
    CREATE INDEX redelivery_requests_last ON redelivery_requests (last_at);
    CREATE TABLE trigger_keys (
        key TEXT PRIMARY KEY,
        delivery_id TEXT NOT NULL,
        created_at REAL NOT NULL
    );
"""

# Run budgets (bot.engine.budget): the model tokens each installation's runs used per UTC
# day; and commands per person per repository (policies.command_rate), with when each was
# last told that it passed the hour's limit.
BUDGET_LEDGER = """
    CREATE TABLE daily_tokens (
        installation_id INTEGER NOT NULL,
        day TEXT NOT NULL,
        tokens INTEGER NOT NULL,
        PRIMARY KEY (installation_id, day)
    );
    CREATE TABLE command_uses (
        delivery_id TEXT PRIMARY KEY,
        repo TEXT NOT NULL,
        login TEXT NOT NULL,
        at REAL NOT NULL
    );
    CREATE INDEX command_uses_who ON command_uses (repo, login, at);
    CREATE TABLE command_limit_notices (
        repo TEXT NOT NULL,
        login TEXT NOT NULL,
        at REAL NOT NULL,
        PRIMARY KEY (repo, login)
    );
"""

# The automatic reviews counted per pull request (`review.auto_pause`): each run once, in the
# order the per-pull-request counter gave it, forgotten on `resume`.
AUTO_REVIEWS = """
    CREATE TABLE auto_review_counters (
        repo TEXT NOT NULL,
        number INTEGER NOT NULL,
        last INTEGER NOT NULL,
        PRIMARY KEY (repo, number)
    );
    CREATE TABLE auto_reviews (
        run_id TEXT PRIMARY KEY,
        repo TEXT NOT NULL,
        number INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        at REAL NOT NULL
    );
    CREATE INDEX auto_reviews_target ON auto_reviews (repo, number, seq);
    CREATE INDEX auto_reviews_at ON auto_reviews (at);
"""

# Each entry migrates the schema from version i to i + 1; never edit one that has shipped.
# Deliveries run again (bot.store.retry: who asked, when, why) with an index to find a
# delivery's jobs of every kind; and the refused delivery attempts (bot.intake.refusals: the
# newest REFUSALS_KEPT of them, never a body or a signature).
RETRIES_AND_REFUSALS = """
CREATE INDEX jobs_delivery ON jobs (delivery_id);
CREATE TABLE retries (
    delivery_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    source TEXT NOT NULL,
    reason TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (delivery_id, kind)
);
CREATE TABLE refusals (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    source TEXT NOT NULL,
    event TEXT NOT NULL,
    guid TEXT,
    status INTEGER NOT NULL,
    reason TEXT NOT NULL
);
"""

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
    # A body kept in a segment file (bot/store/segments.py): `body` is then empty. Rows written
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
    # Run artifacts (journal, details, transcripts, report, handoffs) beside the run folder,
    # and what each run used once it ended.
    """
    CREATE TABLE run_artifacts (
        run_id TEXT NOT NULL,
        name TEXT NOT NULL,
        body TEXT NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (run_id, name)
    );
    ALTER TABLE runs ADD COLUMN input_tokens INTEGER;
    ALTER TABLE runs ADD COLUMN output_tokens INTEGER;
    ALTER TABLE runs ADD COLUMN cost REAL;
    ALTER TABLE runs ADD COLUMN finished_at REAL;
    """,
    UI_SESSIONS,
    JOB_LEASE_TOKENS,
    REPLAY_GUARDS,
    FINDINGS_TABLE,
    BUDGET_LEDGER,
    AUTO_REVIEWS,
    WORKER_BEATS,
    LEARNINGS_TABLE,
    RETRIES_AND_REFUSALS,
    LEARNING_NUMBERS,
    UI_ACCESS,
)
SCHEMA_VERSION = len(MIGRATIONS)


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


class _Conn:
    """`bot.store.contract.Sql` over a sqlite3 connection (text parameters as `storable_params`)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def all(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, storable_params(params)).fetchall()

    def one(self, sql: str, params: Sequence[object] = ()) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self.conn.execute(sql, storable_params(params)).fetchone()
        return row

    def run(self, sql: str, params: Sequence[object] = ()) -> int:
        return self.conn.execute(sql, storable_params(params)).rowcount


class Store(Storage):
    """The bot's database file.

    Each thread gets its own connection, so the store may be shared by the event loop's
    thread pool, the intake writer and command-line tools at once.
    """

    _rowid = "rowid"
    _for_update = ""  # BEGIN IMMEDIATE already serializes writers
    _body_columns = "body, body_segment, body_offset, body_length"
    _delivery_jobs = (
        "SELECT delivery_id, status, attempts, max_attempts, last_error FROM jobs"
        " WHERE kind = 'delivery' AND delivery_id IN ({marks})"
    )

    _queue_states = (
        "SELECT coalesce(d.workflow, ''), CASE WHEN j.status = 'queued' AND j.attempts > 0"
        " THEN 'failed' WHEN j.status = 'queued' AND j.run_after > ? THEN 'deferred'"
        " ELSE j.status END, count(*), min(j.created_at)"
        " FROM jobs AS j LEFT JOIN deliveries AS d ON d.guid = j.delivery_id"
        " WHERE j.status IN ('queued', 'running', 'dead') GROUP BY 1, 2"
    )

    def __init__(self, path: Path, *, clock: Callable[[], float] = time.time) -> None:
        super().__init__(where=str(path), clock=clock)
        self.path = path
        self.bodies = bodies_dir(path)
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

    @contextmanager
    def _session(self) -> Iterator[_Conn]:
        yield _Conn(self.conn())

    @contextmanager
    def _transaction(self) -> Iterator[_Conn]:
        conn = self.conn()
        with transaction(conn):
            yield _Conn(conn)

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

    def _body(self, row: tuple[Any, ...], read: bool) -> bytes:
        """Inline, or (when `read`) from the segment file the intake appended it to."""
        body = bytes(row[12])
        if row[13] is not None and read:
            try:
                body = read_body(self.bodies, int(row[13]), int(row[14]), int(row[15]))
            except SegmentError as exc:
                raise BodyMissing(f"the body of delivery {row[0]} cannot be read: {exc}") from None
        return body

    def checkpoint(self) -> None:
        """Copy committed WAL pages into the database without waiting on anyone."""
        self.conn().execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
