"""`bot backup DEST` and `bot restore SRC`: the embedded database with its delivery bodies.

With Postgres configured both refuse and print the `pg_dump` / `pg_restore` commands to use
instead (the URL stays in the environment variable: its password is never printed).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from bot.ops.backup import BackupError, backup, restore
from bot.settings import Settings, SettingsError, load_settings


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    make = subparsers.add_parser(
        "backup",
        help="copy the database and its delivery bodies into a new folder (safe while it runs)",
    )
    make.add_argument("dest", type=Path, metavar="DEST", help="a folder that does not exist yet")
    make.set_defaults(func=run_backup)
    put = subparsers.add_parser(
        "restore",
        help="put a folder made by `bot backup` in place as the configured database (stop the "
        "app first)",
    )
    put.add_argument("src", type=Path, metavar="SRC", help="a folder made by `bot backup`")
    put.add_argument(
        "--force",
        action="store_true",
        help="move a database already there aside (renamed *.before-restore-<time>)",
    )
    put.set_defaults(func=run_restore)


def _fail(message: str) -> int:
    print(f"bot: {message}", file=sys.stderr)
    return 1


def _settings() -> Settings | None:
    try:
        return load_settings()
    except SettingsError as exc:
        _fail(str(exc))
        return None


def _postgres(what: str, command: str) -> int:
    return _fail(
        f"BOT_DATABASE_URL names a Postgres database, which `bot {what}` does not handle; use "
        f"Postgres's own tool:\n\n    {command}\n"
    )


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB"


def run_backup(args: argparse.Namespace) -> int:
    settings = _settings()
    if settings is None:
        return 1
    if settings.uses_postgres:
        dest = shlex.quote(str(args.dest))
        return _postgres(
            "backup", f'pg_dump --format=custom --file={dest} --dbname="$BOT_DATABASE_URL"'
        )
    try:
        done = backup(settings.sqlite_path, args.dest)
    except BackupError as exc:
        return _fail(str(exc))
    print(
        f"backed up {done.deliveries} deliveries ({done.segment_bodies} bodies in "
        f"{done.segments} segment files), {_mib(done.size)}, to {done.dest}"
    )
    if done.missing:
        return _fail(
            f"{done.missing} bodies the database lists were already missing from "
            f"{settings.sqlite_path.name}-bodies/: the backup has the rest"
        )
    return 0


def run_restore(args: argparse.Namespace) -> int:
    settings = _settings()
    if settings is None:
        return 1
    if settings.uses_postgres:
        src = shlex.quote(str(args.src))
        return _postgres(
            "restore", f'pg_restore --clean --if-exists --dbname="$BOT_DATABASE_URL" {src}'
        )
    try:
        done = restore(args.src, settings.sqlite_path, force=args.force)
    except BackupError as exc:
        return _fail(str(exc))
    for path in done.moved_aside:
        print(f"moved aside: {path}")
    print(
        f"restored {done.deliveries} deliveries ({done.segments} segment files) to {done.database}"
    )
    return 0
