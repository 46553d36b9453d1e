"""Back up and restore the embedded database: SQLite's file and its body segments, together.

A delivery body of 2 KiB or more is not in the database file: the intake appends it to a
segment file in `<database>-bodies/` (`bot.store.segments`), and the row keeps (segment,
offset, length). A copy of the file alone loses those bodies. `backup` copies both, and
consistently, while the app runs and writes:

1. The database first, with SQLite's online backup API in a single step, that is inside one
   read transaction: the copy is the database as of one commit, whatever commits meanwhile.
2. Then the segments. They are only ever appended to, and the intake appends a batch's bodies
   *before* the transaction that points at them commits. So every body the copy points at was
   in its segment before the copy was taken, and a segment read after it holds that body.
   Each segment the copy points at is copied up to the end of the last body it points at
   there; the bytes past that are bodies committed after the copy (or never committed), which
   nothing in the copy reads. A segment found shorter than that is damage in the source: it
   is counted (`missing`), never hidden.
3. `backup.json` last, with the size and SHA-256 of each file: a folder without it is an
   interrupted backup, which `restore` refuses.

The destination must not exist: it is created (private to the user) and never overwritten;
when the backup fails half-way, what it had written is removed again.

`restore` checks the backup's files against its `backup.json`, then puts the database and its
segments at the configured path. It never overwrites: an existing database there (or its
`-wal`, `-shm` or bodies) makes it refuse, unless `force`, which moves them aside with one
suffix, `.before-restore-<time>`. It refuses, `force` or not, while a process has that database
open (`database_in_use`): stop `bot serve` and `bot worker` first; a process started during the
restore is not noticed. The database is written under a temporary name and renamed into place
last, so an interrupted restore leaves no half database behind.

The App's private key (`app.pem`) and `.env` are not in a backup: they are secrets, kept
wherever the operator keeps those. Mirrors are caches; run artifacts are in the database.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.store.segments import bodies_dir, segment_path

__all__ = [
    "MANIFEST",
    "BackupDone",
    "BackupError",
    "RestoreDone",
    "backup",
    "database_in_use",
    "restore",
]

MANIFEST = "backup.json"
DATABASE = "bot.sqlite3"
FORMAT = 1
_CHUNK = 1 << 20
_SHM_DMS_BYTE = 128
"""SQLite's unix VFS: every connection to a WAL database holds a read lock on this byte of the
`-shm` file while it is open (the "DMS" lock of os_unix.c)."""


class BackupError(Exception):
    """A backup or restore that cannot be made; the message says what to do."""


@dataclass(frozen=True, slots=True)
class BackupDone:
    dest: Path
    deliveries: int
    segment_bodies: int
    """Deliveries whose body is in a segment file rather than in the row."""
    segments: int
    size: int
    """Bytes written, the database included."""
    missing: int
    """Bodies the database points at that the source's segments no longer hold."""


@dataclass(frozen=True, slots=True)
class RestoreDone:
    database: Path
    deliveries: int
    segments: int
    moved_aside: tuple[Path, ...]


# -- files ------------------------------------------------------------------------------------


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _chunks(path: Path, length: int | None = None) -> Iterator[bytes]:
    """The bytes of `path` (the first `length` of them) in chunks; shorter if the file is."""
    with path.open("rb") as src:
        left = length
        while left is None or left > 0:
            chunk = src.read(_CHUNK if left is None else min(_CHUNK, left))
            if not chunk:
                return
            if left is not None:
                left -= len(chunk)
            yield chunk


def _write_new(dest: Path, chunks: Iterator[bytes]) -> tuple[int, str]:
    """Create `dest` (never an existing file; readable by the user only) from `chunks`,
    synced to disk; its size and SHA-256."""
    digest = hashlib.sha256()
    size = 0
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as out:
        for chunk in chunks:
            out.write(chunk)
            digest.update(chunk)
            size += len(chunk)
        out.flush()
        os.fsync(out.fileno())
    return size, digest.hexdigest()


def _digest(path: Path) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    for chunk in _chunks(path):
        digest.update(chunk)
        size += len(chunk)
    return size, digest.hexdigest()


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


# -- backup -----------------------------------------------------------------------------------


def _open_existing(database: Path) -> sqlite3.Connection:
    """A connection to `database` that never creates it."""
    uri = database.resolve().as_uri() + "?mode=rw"
    return sqlite3.connect(uri, uri=True, timeout=30, isolation_level=None)


def _snapshot(database: Path, copy: Path) -> dict[int, int]:
    """Copy the database to `copy` as of one commit; the end of the last body it points at,
    by segment."""
    os.close(os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    with closing(_open_existing(database)) as source, closing(sqlite3.connect(copy)) as target:
        source.backup(target)  # pages=-1: one step, one read transaction on the source
        target.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
        if target.execute("PRAGMA quick_check").fetchone() != ("ok",):
            raise BackupError(f"the copy of {database} fails SQLite's integrity check")
        rows = target.execute(
            "SELECT body_segment, MAX(body_offset + body_length) FROM deliveries"
            " WHERE body_segment IS NOT NULL GROUP BY body_segment"
        ).fetchall()
    return {int(segment): int(end) for segment, end in rows}


def _counts(copy: Path) -> tuple[int, int]:
    with closing(sqlite3.connect(copy)) as db:
        row = db.execute("SELECT count(*), count(body_segment) FROM deliveries").fetchone()
    return int(row[0]), int(row[1])


def backup(database: Path, dest: Path, *, now: float | None = None) -> BackupDone:
    """Copy `database` and the segments it points at into the new folder `dest`.

    Safe while the app runs (see the module docstring). BackupError when there is no database,
    when `dest` exists, or when it cannot be written; nothing is left at `dest` then.
    """
    if not database.is_file():
        raise BackupError(f"there is no database at {database}: nothing to back up")
    if dest.exists() or dest.is_symlink():
        raise BackupError(
            f"{dest} already exists: a backup goes to a new path and never overwrites one"
        )
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.mkdir(mode=0o700)
    except FileExistsError:
        raise BackupError(
            f"{dest} already exists: a backup goes to a new path and never overwrites one"
        ) from None
    except OSError as exc:
        raise BackupError(f"cannot create {dest}: {_why(exc)}") from None
    try:
        return _backup_into(database, dest, now=time.time() if now is None else now)
    except BaseException as exc:
        shutil.rmtree(dest, ignore_errors=True)
        if isinstance(exc, OSError):
            raise BackupError(f"cannot write the backup to {dest}: {_why(exc)}") from None
        if isinstance(exc, sqlite3.Error):
            raise BackupError(f"cannot copy the database {database}: {exc}") from None
        raise


def _backup_into(database: Path, dest: Path, *, now: float) -> BackupDone:
    copy = dest / DATABASE
    ends = _snapshot(database, copy)
    source_bodies, bodies = bodies_dir(database), bodies_dir(copy)
    segments: list[dict[str, Any]] = []
    missing = 0
    if ends:
        bodies.mkdir(mode=0o700)
    for segment, end in sorted(ends.items()):
        source = segment_path(source_bodies, segment)
        chunks = _chunks(source, end) if source.is_file() else iter(())
        size, sha = _write_new(segment_path(bodies, segment), chunks)
        if size < end:
            with closing(sqlite3.connect(copy)) as db:
                (short,) = db.execute(
                    "SELECT count(*) FROM deliveries WHERE body_segment = ?"
                    " AND body_offset + body_length > ?",
                    (segment, size),
                ).fetchone()
            missing += int(short)
        segments.append({"name": source.name, "size": size, "sha256": sha})
    if ends:
        _fsync_dir(bodies)
    deliveries, segment_bodies = _counts(copy)
    db_size, db_sha = _digest(copy)
    manifest = {
        "format": FORMAT,
        "made_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        "source": str(database.resolve()),
        "database": {"name": DATABASE, "size": db_size, "sha256": db_sha},
        "segments": segments,
        "deliveries": deliveries,
        "segment_bodies": segment_bodies,
        "missing": missing,
    }
    text = json.dumps(manifest, indent=2) + "\n"
    _write_new(dest / MANIFEST, iter([text.encode()]))
    _fsync_dir(dest)
    return BackupDone(
        dest=dest,
        deliveries=deliveries,
        segment_bodies=segment_bodies,
        segments=len(segments),
        size=db_size + sum(int(s["size"]) for s in segments),
        missing=missing,
    )


# -- restore ----------------------------------------------------------------------------------


def database_in_use(database: Path) -> bool:
    """Whether another process has the WAL database `database` open.

    Asks for a write lock on the byte of its `-shm` file that each open connection holds a
    read lock on. POSIX locks are per process: this process's own connections do not count,
    and it must not hold one to the file (closing this descriptor would drop their locks).
    """
    shm = database.with_name(database.name + "-shm")
    try:
        fd = os.open(shm, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return False  # the last connection to close removes it
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, _SHM_DMS_BYTE)
    except OSError:
        return True
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, _SHM_DMS_BYTE)
        return False
    finally:
        os.close(fd)


def _manifest(src: Path) -> dict[str, Any]:
    path = src / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BackupError(
            f"{src} is not a finished backup: it has no {MANIFEST} (`bot backup` writes it last)"
        ) from None
    except (OSError, ValueError) as exc:
        raise BackupError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BackupError(f"{path} is not a backup this version of the app can restore")
    return data


def _checked(src: Path, manifest: dict[str, Any]) -> list[tuple[Path, str]]:
    """The backup's files as (path, name to restore under), each checked against the manifest."""
    files: list[tuple[Path, str]] = [(src / DATABASE, "database")]
    entries = [manifest.get("database")]
    segments = manifest.get("segments")
    if not isinstance(segments, list):
        raise BackupError(f"{src / MANIFEST} lists no segments")
    for entry in segments:
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or "/" in name or not name.endswith(".bin"):
            raise BackupError(f"{src / MANIFEST} names a segment it should not: {name!r}")
        files.append((bodies_dir(src / DATABASE) / name, name))
        entries.append(entry)
    for (path, _), entry in zip(files, entries, strict=True):
        if not isinstance(entry, dict):
            raise BackupError(f"{src / MANIFEST} does not describe {path.name}")
        try:
            size, sha = _digest(path)
        except OSError as exc:
            raise BackupError(f"the backup is incomplete: {path}: {_why(exc)}") from None
        if (size, sha) != (entry.get("size"), entry.get("sha256")):
            raise BackupError(
                f"{path} is not the file that was backed up (size or SHA-256 differs): the "
                "backup was changed or damaged since"
            )
    return files


def _present(database: Path) -> list[Path]:
    wal = database.with_name(database.name + "-wal")
    shm = database.with_name(database.name + "-shm")
    return [p for p in (database, wal, shm, bodies_dir(database)) if p.exists() or p.is_symlink()]


def _move_aside(paths: list[Path], now: float) -> tuple[Path, ...]:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    moved = []
    for path in paths:
        target = path.with_name(f"{path.name}.before-restore-{stamp}")
        if target.exists():
            raise BackupError(f"{target} exists already; move it away and restore again")
        path.rename(target)
        moved.append(target)
    return tuple(moved)


def restore(
    src: Path, database: Path, *, force: bool = False, now: float | None = None
) -> RestoreDone:
    """Put the backup in folder `src` in place as `database` with its segments.

    BackupError when the backup is unfinished or damaged, when a database is there already
    (unless `force`: then it is moved aside), or while a process has it open.
    """
    manifest = _manifest(src)
    files = _checked(src, manifest)
    present = _present(database)
    if present and database_in_use(database):
        raise BackupError(
            f"{database} is open in a running process (`bot serve` or `bot worker`): stop it "
            "before restoring"
        )
    if present and not force:
        names = ", ".join(p.name for p in present)
        raise BackupError(
            f"{database.parent} already has a database ({names}): restore into an empty data "
            "directory, or pass --force to move the current one aside"
        )
    try:
        database.parent.mkdir(parents=True, exist_ok=True)
        moved = _move_aside(present, time.time() if now is None else now)
    except OSError as exc:
        raise BackupError(f"cannot prepare {database.parent}: {_why(exc)}") from None
    bodies = bodies_dir(database)
    partial = database.with_name(database.name + ".restoring")
    made = False
    try:
        bodies.mkdir(mode=0o700)
        made = True
        for path, name in files[1:]:
            _write_new(bodies / name, _chunks(path))
        _fsync_dir(bodies)
        partial.unlink(missing_ok=True)  # left by an interrupted restore
        _write_new(partial, _chunks(files[0][0]))
        partial.rename(database)  # the last step: before it, no database is there
    except OSError as exc:
        partial.unlink(missing_ok=True)
        if made:
            shutil.rmtree(bodies, ignore_errors=True)
        aside = f"; the database that was there is at {moved[0]}" if moved else ""
        raise BackupError(f"cannot restore into {database.parent}: {_why(exc)}{aside}") from None
    _fsync_dir(database.parent)
    return RestoreDone(
        database=database,
        deliveries=int(manifest.get("deliveries") or 0),
        segments=len(files) - 1,
        moved_aside=moved,
    )
