"""`bot doctor`'s database check: SQLite opens and migrates in a writable place; Postgres
answers and its schema is this bot's version."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from bot.ops import doctor
from bot.ops.checks import CheckResult
from bot.ops.doctor_database import check_database
from bot.store.postgres.schema import SCHEMA_VERSION as PG_SCHEMA_VERSION
from bot.store.postgres.store import PostgresStore
from bot.store.sqlite import MIGRATIONS, SCHEMA_VERSION

ROOT = Path(__file__).resolve().parents[2]
DOCTOR = (sys.executable, "-m", "bot.cli", "doctor", "--skip-model")


async def checked(environ: dict[str, str]) -> CheckResult:
    return await check_database(doctor.load_context(environ))


@pytest.mark.anyio
async def test_a_fresh_sqlite_database_is_created_and_migrated(tmp_path: Path) -> None:
    result = await checked({"BOT_DATA_DIR": str(tmp_path / "data")})
    path = tmp_path / "data" / "bot.sqlite3"
    assert result.status == "ok", result.line()
    assert result.detail == f"SQLite at {path}: schema version {SCHEMA_VERSION} (this bot's)"
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


@pytest.mark.anyio
async def test_an_older_sqlite_database_is_migrated_and_says_from_what(tmp_path: Path) -> None:
    path = tmp_path / "elsewhere" / "bot.db"
    path.parent.mkdir()
    with sqlite3.connect(path) as conn:
        conn.executescript(MIGRATIONS[0])
        conn.execute("PRAGMA user_version=1")
    result = await checked({"BOT_DATA_DIR": str(tmp_path), "BOT_DATABASE_URL": f"sqlite:///{path}"})
    assert result.status == "ok", result.line()
    assert f"migrated from version 1 to {SCHEMA_VERSION}" in result.detail


@pytest.mark.anyio
async def test_a_newer_sqlite_database_fails_with_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "data" / "bot.sqlite3"
    path.parent.mkdir()
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    result = await checked({"BOT_DATA_DIR": str(tmp_path / "data")})
    assert result.status == "fail"
    assert f"schema version {SCHEMA_VERSION + 1} is newer than this bot" in result.detail
    assert "upgrade the bot" in result.detail


def test_a_read_only_data_dir_fails_with_a_clear_fix(tmp_path: Path) -> None:
    """Run as root, a mode bit stops nothing: the data dir is a read-only mount instead (in a
    user namespace, through bubblewrap, which the sandbox needs anyway)."""
    data = tmp_path / "data"
    data.mkdir()
    bwrap = shutil.which("bwrap")
    assert bwrap is not None, "bubblewrap is needed (the sandbox's own tests need it too)"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOT_")}
    env.update(BOT_DATA_DIR=str(data), PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [bwrap, "--dev-bind", "/", "/", "--ro-bind", str(data), str(data), "--", *DOCTOR],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    line = next(x for x in done.stdout.splitlines() if " database:" in x)
    assert done.returncode == 1
    assert line == (
        f"FAIL  database: {data} is not writable (Read-only file system): the SQLite database, "
        f"its write-ahead log and its bodies folder live there -> make {data} writable by "
        "this user, or set BOT_DATA_DIR (or BOT_DATABASE_URL=sqlite:///PATH) to a writable "
        "place"
    )
    assert list(data.iterdir()) == []


@pytest.mark.anyio
async def test_a_migrated_postgres_is_ok(postgres_dsn: str) -> None:
    PostgresStore.open(postgres_dsn).close()
    result = await checked({"BOT_DATABASE_URL": postgres_dsn})
    assert result.status == "ok", result.line()
    assert result.detail.endswith(f"schema version {PG_SCHEMA_VERSION} (this bot's)")
    assert result.detail.startswith("Postgres at postgresql://")


@pytest.mark.anyio
async def test_a_postgres_behind_this_bot_warns_and_is_not_migrated_by_the_check(
    postgres_dsn: str,
) -> None:
    PostgresStore.open(postgres_dsn).close()
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("UPDATE bot_schema SET version = 3")
    result = await checked({"BOT_DATABASE_URL": postgres_dsn})
    assert result.status == "warn"
    assert f"schema version 3, this bot's is {PG_SCHEMA_VERSION}" in result.detail
    assert "`bot serve` or `bot worker` migrates it when it starts" in result.fix
    with psycopg.connect(postgres_dsn) as conn:
        row = conn.execute("SELECT version FROM bot_schema").fetchone()
    assert row == (3,)


@pytest.mark.anyio
async def test_a_postgres_never_migrated_warns(postgres_dsn: str) -> None:
    result = await checked({"BOT_DATABASE_URL": postgres_dsn})
    assert result.status == "warn"
    assert f"not migrated yet (this bot's schema is version {PG_SCHEMA_VERSION})" in result.detail


@pytest.mark.anyio
async def test_a_postgres_newer_than_this_bot_fails(postgres_dsn: str) -> None:
    PostgresStore.open(postgres_dsn).close()
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("UPDATE bot_schema SET version = %s", (PG_SCHEMA_VERSION + 1,))
    result = await checked({"BOT_DATABASE_URL": postgres_dsn})
    assert result.status == "fail"
    assert "is newer than this bot" in result.detail and "upgrade the bot" in result.fix


@pytest.mark.anyio
async def test_an_unreachable_postgres_fails_without_showing_the_password() -> None:
    dsn = "postgresql://bot:pg-sekret-42@127.0.0.1:1/bot"
    result = await checked({"BOT_DATABASE_URL": dsn})
    assert result.status == "fail"
    assert "cannot connect to Postgres at postgresql://bot@127.0.0.1:1/bot" in result.detail
    assert "pg-sekret-42" not in result.line()
    assert "BOT_DATABASE_URL" in result.fix


@pytest.mark.anyio
async def test_unreadable_settings_fail_the_check() -> None:
    ctx = doctor.DoctorContext(settings=None, settings_error="bad")
    result = await check_database(ctx)
    assert result.status == "fail" and "fix the settings first" in result.fix


@pytest.mark.anyio
async def test_the_check_runs_under_bot_doctor(tmp_path: Path) -> None:
    ctx = doctor.load_context({"BOT_DATA_DIR": str(tmp_path / "data")})
    names = [r.name for r in await doctor.run_checks(ctx, doctor.CHECKS)]
    assert names.index("database") == names.index("data dir") + 1
