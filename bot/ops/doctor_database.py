"""The database check for `bot doctor`: can this bot open its store, at its schema's version?

SQLite (the default): the database's folder must be writable (the database, its write-ahead
log and its bodies folder are written there; a read-only data dir is named with the fix), and
the database must open and migrate, as `bot serve` would do at start: the check reports the
version it found and the version it migrated to, and a database newer than this bot fails.
Postgres (`BOT_DATABASE_URL=postgresql://...`): the server must answer, and its schema version
(`bot_schema`) is compared with this bot's (`bot.store.postgres.schema.SCHEMA_VERSION`)
without migrating: older, or never migrated, is a warning (`bot serve` or `bot worker`
migrates it when it starts); newer, or job tables of another procrastinate version, fail,
and so does a bot installed without the `postgres` extra (the line `bot serve` would fail
with). The DSN is shown without its password.
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from bot.ops.checks import CheckResult
from bot.store.backend import require_postgres
from bot.store.contract import StoreError
from bot.store.sqlite import SCHEMA_VERSION, Store

if TYPE_CHECKING:
    from bot.ops.checks import DoctorContext

NAME = "database"


def _sqlite_version(path: Path) -> int | None:
    """The schema version of an existing database file, read without writing (None if absent)."""
    if not path.is_file():
        return None
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            return int(conn.execute("PRAGMA user_version").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error:
        return None  # Store.open says what is wrong with it


def sqlite_result(path: Path) -> CheckResult:
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".doctor-"):
            pass
    except OSError as exc:
        return CheckResult(
            NAME,
            "fail",
            f"{folder} is not writable ({exc.strerror}): the SQLite database, its write-ahead "
            "log and its bodies folder live there",
            f"make {folder} writable by this user, or set BOT_DATA_DIR (or "
            "BOT_DATABASE_URL=sqlite:///PATH) to a writable place",
        )
    before = _sqlite_version(path)
    try:
        store = Store.open(path)
    except StoreError as exc:
        return CheckResult(
            NAME, "fail", str(exc), "fix the file named above, or point BOT_DATABASE_URL elsewhere"
        )
    try:
        answered = store.ping()
    finally:
        store.close()
    if not answered:
        return CheckResult(NAME, "fail", f"SQLite at {path} does not answer a query")
    detail = f"SQLite at {path}: schema version {SCHEMA_VERSION} (this bot's)"
    if before is not None and before < SCHEMA_VERSION:
        detail += f", migrated from version {before} to {SCHEMA_VERSION}"
    return CheckResult(NAME, "ok", detail)


def postgres_result(dsn: str) -> CheckResult:
    try:
        require_postgres()
    except StoreError as exc:
        return CheckResult(NAME, "fail", str(exc))
    # Imported only here: an embedded deployment never loads psycopg (`bot.store.backend`).
    import procrastinate
    import psycopg

    from bot.store.postgres.connection import connect, display_dsn
    from bot.store.postgres.schema import SCHEMA_VERSION as CURRENT

    where = f"Postgres at {display_dsn(dsn)}"
    try:
        conn = connect(dsn)
    except StoreError as exc:
        return CheckResult(
            NAME,
            "fail",
            str(exc),
            "check BOT_DATABASE_URL, that the server runs and that it accepts this user",
        )
    try:
        try:
            row = conn.execute("SELECT version, procrastinate FROM bot_schema").fetchone()
        except psycopg.errors.UndefinedTable:
            row = None
    except psycopg.Error as exc:
        return CheckResult(NAME, "fail", f"{where}: {str(exc).strip()}", "check its permissions")
    finally:
        conn.close()
    start = "`bot serve` or `bot worker` migrates it when it starts"
    if row is None:
        return CheckResult(
            NAME,
            "warn",
            f"{where}: not migrated yet (this bot's schema is version {CURRENT})",
            start,
        )
    version, recorded = int(row[0]), str(row[1])
    if version > CURRENT:
        return CheckResult(
            NAME,
            "fail",
            f"{where}: schema version {version} is newer than this bot ({CURRENT})",
            "upgrade the bot, or point BOT_DATABASE_URL at another database",
        )
    if recorded != procrastinate.__version__:
        return CheckResult(
            NAME,
            "fail",
            f"{where}: its job tables are procrastinate {recorded}'s, this bot runs "
            f"procrastinate {procrastinate.__version__}",
            "install the procrastinate version the bot pins",
        )
    if version < CURRENT:
        return CheckResult(
            NAME, "warn", f"{where}: schema version {version}, this bot's is {CURRENT}", start
        )
    return CheckResult(NAME, "ok", f"{where}: schema version {CURRENT} (this bot's)")


async def check_database(ctx: DoctorContext) -> CheckResult:
    settings = ctx.settings
    if settings is None:
        return CheckResult(NAME, "fail", "settings unreadable", "fix the settings first")
    dsn = settings.database_dsn
    if settings.uses_postgres and dsn is not None:
        return await anyio.to_thread.run_sync(postgres_result, dsn)
    return await anyio.to_thread.run_sync(sqlite_result, settings.sqlite_path)
