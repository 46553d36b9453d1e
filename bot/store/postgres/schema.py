"""The Postgres schema, migrated by the app: procrastinate's job tables beside ours.

Versioned like the SQLite schema (`bot.store.sqlite.MIGRATIONS`): each step migrates from version i
to i + 1 and is never edited once shipped. Step 1 is procrastinate's own schema, as the
pinned version ships it; upgrading the pin means adding procrastinate's migration files for
the versions in between as new steps, and `migrate` refuses a database whose procrastinate
schema came from another version than the installed one. Every process runs `migrate` when
it opens the database; an advisory lock lets the first one do the work while the others wait.
"""

from __future__ import annotations

from typing import Any

import procrastinate
import psycopg
from procrastinate.schema import SchemaManager

from bot.store.contract import StoreError
from bot.store.findings import POSTGRES_TABLE as FINDINGS_TABLE
from bot.store.learnings import NUMBERS_TABLE as LEARNING_NUMBERS
from bot.store.learnings import POSTGRES_TABLE as LEARNINGS_TABLE
from bot.store.ui_access import POSTGRES_STEP as UI_ACCESS
from bot.store.workers import POSTGRES_TABLE as WORKER_BEATS

# A fixed key for pg_advisory_xact_lock: one migration at a time per database.
_LOCK = 0x626F745F736368  # "bot_sch"

OWN_TABLES = """
CREATE TABLE deliveries (
    guid text PRIMARY KEY,
    seq bigserial NOT NULL,
    event text NOT NULL,
    action text,
    hook_id text,
    target_type text,
    target_id text,
    received_at double precision NOT NULL,
    headers text NOT NULL,
    body bytea NOT NULL,
    decision text,
    reason text,
    workflow text,
    decided_at double precision
);
CREATE INDEX deliveries_received ON deliveries (received_at, seq);
CREATE TABLE runs (
    id text PRIMARY KEY,
    seq bigserial NOT NULL,
    delivery_id text NOT NULL,
    repo text NOT NULL,
    target_kind text NOT NULL,
    number integer NOT NULL,
    workflow text NOT NULL,
    mode text NOT NULL,
    status text NOT NULL,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL,
    outcome text,
    args text,
    attempts integer NOT NULL DEFAULT 0,
    stop_reason text,
    CONSTRAINT runs_delivery_workflow UNIQUE (delivery_id, workflow)
);
CREATE INDEX runs_target ON runs (repo, target_kind, number, created_at);
-- One run per (repository, issue or pull request, workflow) at a time, held like a lease.
CREATE TABLE target_locks (
    repo text NOT NULL,
    target_kind text NOT NULL,
    number integer NOT NULL,
    workflow text NOT NULL,
    run_id text NOT NULL,
    until double precision NOT NULL,
    PRIMARY KEY (repo, target_kind, number, workflow)
);
CREATE INDEX target_locks_run ON target_locks (run_id);
-- What GitHub said of each installation (policies.lifecycle.InstallationState).
CREATE TABLE installations (
    id bigint PRIMARY KEY,
    state text NOT NULL,
    delivery_id text,
    updated_at double precision NOT NULL
);
CREATE TABLE review_states (
    repo text NOT NULL,
    number integer NOT NULL,
    state text NOT NULL,
    updated_at double precision NOT NULL,
    PRIMARY KEY (repo, number)
);
-- What the JobQueue contract keeps beside procrastinate's job row: the unique key that
-- dedupes a delivery's job for good (procrastinate's queueing_lock only holds while a job
-- waits), the attempts allowed, and the lease of the worker that holds it.
CREATE TABLE bot_jobs (
    job_id bigint PRIMARY KEY REFERENCES procrastinate_jobs (id) ON DELETE CASCADE,
    kind text NOT NULL,
    delivery_id text NOT NULL,
    max_attempts integer NOT NULL,
    enqueued_at double precision NOT NULL,
    lease_owner text,
    lease_until double precision,
    last_error text,
    CONSTRAINT bot_jobs_delivery UNIQUE (kind, delivery_id)
);
CREATE INDEX bot_jobs_leases ON bot_jobs (lease_until) WHERE lease_until IS NOT NULL;
"""

# Run artifacts beside the run folder, so a run resumed or read on another machine finds them;
# and what each run used once it ended.
RUN_ARTIFACTS = """
CREATE TABLE run_artifacts (
    run_id text NOT NULL,
    name text NOT NULL,
    body text NOT NULL,
    updated_at double precision NOT NULL,
    PRIMARY KEY (run_id, name)
);
ALTER TABLE runs ADD COLUMN input_tokens bigint;
ALTER TABLE runs ADD COLUMN output_tokens bigint;
ALTER TABLE runs ADD COLUMN cost double precision;
ALTER TABLE runs ADD COLUMN finished_at double precision;
"""

# The dead jobs, for the metrics read at each scrape (`PostgresJobQueue.stats_sync`): the
# other states it counts have procrastinate's partial indexes, and without one of its own
# this count would read every job ever finished.
DEAD_JOBS_INDEX = """
CREATE INDEX bot_jobs_dead ON procrastinate_jobs (queue_name) WHERE status = 'failed';
"""

# The operator page's signed-in sessions (bot/ui/auth.py): a cookie signs in only while its
# session's row is here; signing out deletes it, and expired rows go at the next sign-in.
UI_SESSIONS = """
CREATE TABLE ui_sessions (
    id text PRIMARY KEY,
    created_at double precision NOT NULL,
    expires_at double precision NOT NULL
);
CREATE INDEX ui_sessions_expiry ON ui_sessions (expires_at);
"""

# The fencing token of a job's lease (`bot.store.queue.fence`): each claim increments it.
JOB_LEASE_TOKENS = """
ALTER TABLE bot_jobs ADD COLUMN lease_token bigint NOT NULL DEFAULT 0;
"""

# How often each missed delivery was asked for again, kept past GitHub's three days of
# attempts (policies.redelivery); and which delivery holds each trigger's key, so one command
# or automatic trigger runs once whatever the GUID it came under (policies.triggers.run_key).
REPLAY_GUARDS = """
CREATE TABLE redelivery_requests (
    guid text PRIMARY KEY,
    requests integer NOT NULL,
    first_at double precision NOT NULL,
    last_at double precision NOT NULL
);
CREATE INDEX redelivery_requests_last ON redelivery_requests (last_at);
CREATE TABLE trigger_keys (
    key text PRIMARY KEY,
    delivery_id text NOT NULL,
    created_at double precision NOT NULL
);
"""

# Run budgets (bot.engine.budget) and commands per person per repository: as in SQLite.
BUDGET_LEDGER = """
CREATE TABLE daily_tokens (
    installation_id bigint NOT NULL,
    day text NOT NULL,
    tokens bigint NOT NULL,
    PRIMARY KEY (installation_id, day)
);
CREATE TABLE command_uses (
    delivery_id text PRIMARY KEY,
    repo text NOT NULL,
    login text NOT NULL,
    at double precision NOT NULL
);
CREATE INDEX command_uses_who ON command_uses (repo, login, at);
CREATE TABLE command_limit_notices (
    repo text NOT NULL,
    login text NOT NULL,
    at double precision NOT NULL,
    PRIMARY KEY (repo, login)
);
"""

# The automatic reviews counted per pull request (`review.auto_pause`): each run once, in the
# order the per-pull-request counter gave it (its row lock orders runs counting at once),
# forgotten on `resume`.
AUTO_REVIEWS = """
CREATE TABLE auto_review_counters (
    repo text NOT NULL,
    number integer NOT NULL,
    last bigint NOT NULL,
    PRIMARY KEY (repo, number)
);
CREATE TABLE auto_reviews (
    run_id text PRIMARY KEY,
    repo text NOT NULL,
    number integer NOT NULL,
    seq bigint NOT NULL,
    at double precision NOT NULL
);
CREATE INDEX auto_reviews_target ON auto_reviews (repo, number, seq);
CREATE INDEX auto_reviews_at ON auto_reviews (at);
"""

# Jobs run by procrastinate's worker (`bot.runs.procrastinate_pool`), which holds a running
# job by its heartbeat (`procrastinate_workers`): the lease columns of our own claim loop go
# (their index with them). procrastinate counts a deferral (a target held by another run) as
# an attempt, and the contract does not, so the deferrals are counted here and taken off.
JOB_DEFERRALS = """
ALTER TABLE bot_jobs ADD COLUMN deferrals integer NOT NULL DEFAULT 0;
DROP INDEX bot_jobs_leases;
ALTER TABLE bot_jobs DROP COLUMN lease_owner, DROP COLUMN lease_until, DROP COLUMN lease_token;
"""

# Deliveries run again (bot.store.retry: who asked, when, why) with an index to find a
# delivery's jobs of every kind; and the refused delivery attempts (bot.intake.refusals: the
# newest REFUSALS_KEPT of them, never a body or a signature).
RETRIES_AND_REFUSALS = """
CREATE INDEX bot_jobs_delivery_id ON bot_jobs (delivery_id);
CREATE TABLE retries (
    delivery_id text NOT NULL,
    kind text NOT NULL,
    source text NOT NULL,
    reason text NOT NULL,
    at double precision NOT NULL,
    PRIMARY KEY (delivery_id, kind)
);
CREATE TABLE refusals (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at double precision NOT NULL,
    source text NOT NULL,
    event text NOT NULL,
    guid text,
    status integer NOT NULL,
    reason text NOT NULL
);
"""

MIGRATIONS: tuple[str, ...] = (
    SchemaManager.get_schema(),
    OWN_TABLES,
    RUN_ARTIFACTS,
    DEAD_JOBS_INDEX,
    UI_SESSIONS,
    JOB_LEASE_TOKENS,
    REPLAY_GUARDS,
    FINDINGS_TABLE,
    BUDGET_LEDGER,
    AUTO_REVIEWS,
    JOB_DEFERRALS,
    WORKER_BEATS,
    LEARNINGS_TABLE,
    RETRIES_AND_REFUSALS,
    LEARNING_NUMBERS,
    UI_ACCESS,
)
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: psycopg.Connection[Any]) -> int:
    """Bring the schema to SCHEMA_VERSION in one transaction; refuse a newer database."""
    installed = procrastinate.__version__
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS bot_schema"
            " (version integer NOT NULL, procrastinate text NOT NULL)"
        )
        row = conn.execute("SELECT version, procrastinate FROM bot_schema").fetchone()
        version, recorded = (0, installed) if row is None else (int(row[0]), str(row[1]))
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"database schema version {version} is newer than this bot ({SCHEMA_VERSION}); "
                "upgrade the bot or point BOT_DATABASE_URL at another database"
            )
        if version >= 1 and recorded != installed:
            raise StoreError(
                f"the database's job tables are procrastinate {recorded}'s, and this bot runs "
                f"procrastinate {installed}; install the version the bot pins"
            )
        for step in range(version, SCHEMA_VERSION):
            # No parameters: psycopg sends the step's statements as one simple query.
            conn.execute(MIGRATIONS[step].encode())
        if row is None:
            conn.execute(
                "INSERT INTO bot_schema (version, procrastinate) VALUES (%s, %s)",
                (SCHEMA_VERSION, installed),
            )
        elif version != SCHEMA_VERSION:
            conn.execute("UPDATE bot_schema SET version = %s", (SCHEMA_VERSION,))
    return SCHEMA_VERSION
