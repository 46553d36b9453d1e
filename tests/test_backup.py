"""`bot backup` and `bot restore`: the database and its body segments, while deliveries arrive.

`bot serve --no-worker` receives signed deliveries of mixed sizes (bodies of 2 KiB and more
live in segment files, the others in their rows) from a thread while `bot backup` runs as the
operator would run it; the backup is restored into an empty data directory and every body it
lists is read back. Then the refusals: a destination that exists, one on a read-only file
system, a data directory that has a database or one a running server has open, an unfinished
or damaged backup, and Postgres.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from bot.store.contract import BodyMissing
from bot.store.sqlite import Store
from tests.fakes._github_state import shared_private_key_pem
from tests.scripted import RunningBot, bot_env, delivery_headers, running_bot

pytestmark = pytest.mark.slow

SECRET = "whsec-backup-0123456789"
SIZES = (120, 1500, 2047, 2048, 2049, 9000, 70_000, 400_000)
"""Body sizes around the 2 KiB line between a row and a segment, and well past it."""


def env_for(root: Path, data: Path | None = None, **extra: str) -> dict[str, str]:
    env = bot_env(
        root,
        github_url="http://127.0.0.1:9",
        llm_url="http://127.0.0.1:9/v1",
        app_id=1,
        private_key_pem=shared_private_key_pem(),
        webhook_secret=SECRET,
        extra_env={"BOT_APP_SLUG": "repo-agent", **extra},
    )
    if data is not None:
        env["BOT_DATA_DIR"] = str(data)
    return env


def bot(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *args],
        cwd=root,
        env=env or env_for(root),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def body_of(n: int) -> bytes:
    size = SIZES[n % len(SIZES)]
    head = json.dumps({"action": "opened", "n": n, "zen": ""}).encode()
    return head[:-2] + b"x" * max(0, size - len(head)) + b'"}'


@dataclass
class Poster:
    """Posts signed deliveries one after another until stopped; records what got its 202."""

    url: str
    acked: dict[str, bytes] = field(default_factory=dict)
    acked_before: set[str] = field(default_factory=set)
    """GUIDs whose 202 came back before `mark()` was called."""
    stop: threading.Event = field(default_factory=threading.Event)
    count: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    errors: list[str] = field(default_factory=list)

    def mark(self) -> None:
        self.acked_before = set(self.acked)

    def run(self) -> None:
        n = 0
        with httpx.Client(timeout=30) as client:
            while not self.stop.is_set():
                guid, body = f"backup-{n:05d}", body_of(n)
                n += 1
                headers = delivery_headers("issues", guid, SECRET, body)
                answer = client.post(f"{self.url}/webhooks/github", content=body, headers=headers)
                if answer.status_code != 202:
                    self.errors.append(f"{guid}: {answer.status_code} {answer.text}")
                    return
                self.acked[guid] = body
                self.count.release()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, RunningBot, Poster]]:
    """`bot serve` in `root/data`, the deliveries it acknowledged, and a backup at
    `root/backup` made while more arrived."""
    root = tmp_path_factory.mktemp("backup")
    with running_bot(
        root,
        github_url="http://127.0.0.1:9",
        llm_url="http://127.0.0.1:9/v1",
        app_id=1,
        private_key_pem=shared_private_key_pem(),
        webhook_secret=SECRET,
        extra_env={"BOT_APP_SLUG": "repo-agent"},
        serve_args=("--no-worker", "--receivers", "1"),
    ) as running:
        poster = Poster(running.url)
        thread = threading.Thread(target=poster.run, daemon=True)
        thread.start()
        try:
            for _ in range(3 * len(SIZES)):  # a few of every size before the backup starts
                assert poster.count.acquire(timeout=60), poster.errors
            poster.mark()
            done = bot(root, "backup", str(root / "backup"))
            assert done.returncode == 0, done.stderr
            assert "backed up" in done.stdout
            for _ in range(len(SIZES)):  # and more after it
                assert poster.count.acquire(timeout=60), poster.errors
        finally:
            poster.stop.set()
            thread.join(timeout=60)
        assert not poster.errors
        yield root, running, poster


def test_a_backup_taken_while_deliveries_arrive_restores_every_body(
    served: tuple[Path, RunningBot, Poster],
) -> None:
    root, _, poster = served
    restored = root / "restored"
    done = bot(root, "restore", str(root / "backup"), env=env_for(root, restored))
    assert done.returncode == 0, done.stderr
    assert f"to {restored / 'bot.sqlite3'}" in done.stdout

    store = Store.open(restored / "bot.sqlite3")
    try:
        listed = [str(row[0]) for row in store.conn().execute("SELECT guid FROM deliveries")]
        in_segments = (
            store.conn()
            .execute("SELECT count(*) FROM deliveries WHERE body_segment IS NOT NULL")
            .fetchone()[0]
        )
        assert poster.acked_before <= set(listed)  # every delivery acknowledged before it began
        assert set(listed) <= set(poster.acked)
        assert 0 < in_segments < len(listed)  # bodies in rows and in segments both
        for guid in listed:
            record = store.get_delivery(guid)
            assert record is not None and record.body == poster.acked[guid], guid
    finally:
        store.close()


def test_the_database_file_alone_loses_the_large_bodies(
    served: tuple[Path, RunningBot, Poster],
) -> None:
    """Why the segments go with it: the database copied the way the README used to say."""
    root, running, _ = served
    alone = root / "alone" / "bot.sqlite3"
    alone.parent.mkdir()
    with sqlite3.connect(running.db) as source, sqlite3.connect(alone) as copy:
        source.backup(copy)
    store = Store.open(alone)
    try:
        guid = (
            store.conn()
            .execute("SELECT guid FROM deliveries WHERE body_segment IS NOT NULL LIMIT 1")
            .fetchone()[0]
        )
        with pytest.raises(BodyMissing):
            store.get_delivery(guid)
    finally:
        store.close()


def listing(path: Path) -> dict[str, bytes]:
    if path.is_file():
        return {"": path.read_bytes()}
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize("kind", ["folder", "empty-folder", "file", "a-backup"])
def test_an_existing_destination_is_refused_and_left_as_it_was(
    served: tuple[Path, RunningBot, Poster], kind: str
) -> None:
    root, _, _ = served
    dest = root / f"exists-{kind}"
    if kind == "file":
        dest.write_text("keep me\n")
    elif kind == "a-backup":
        dest = root / "backup"
    else:
        dest.mkdir()
        if kind == "folder":
            (dest / "keep.txt").write_text("keep me\n")
    before = listing(dest)
    done = bot(root, "backup", str(dest))
    assert done.returncode == 1
    assert f"bot: {dest} already exists: a backup goes to a new path" in done.stderr
    assert listing(dest) == before


def test_a_read_only_destination_is_a_clear_error(
    served: tuple[Path, RunningBot, Poster],
) -> None:
    root, _, _ = served
    read_only = root / "read-only"
    read_only.mkdir()
    dest = read_only / "backup"
    # A read-only mount of its own (root ignores file modes), in a mount namespace of this
    # command only.
    script = 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" "$1" && shift && exec "$@"'
    command = ["unshare", "-rm", "sh", "-c", script, "sh", str(read_only)]
    done = subprocess.run(
        [*command, sys.executable, "-m", "bot.cli", "backup", str(dest)],
        cwd=root,
        env=env_for(root),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr == f"bot: cannot create {dest}: Read-only file system\n"
    assert not dest.exists()


def test_restore_refuses_a_data_directory_with_a_database(
    served: tuple[Path, RunningBot, Poster],
) -> None:
    root, _, _ = served
    data = root / "occupied"
    data.mkdir()
    (data / "bot.sqlite3-wal").write_bytes(b"a stale log that must not meet another database")
    before = listing(data)
    done = bot(root, "restore", str(root / "backup"), env=env_for(root, data))
    assert done.returncode == 1
    assert "already has a database (bot.sqlite3-wal): restore into an empty data" in done.stderr
    assert listing(data) == before

    forced = bot(root, "restore", "--force", str(root / "backup"), env=env_for(root, data))
    assert forced.returncode == 0, forced.stderr
    (aside,) = [p for p in data.iterdir() if ".before-restore-" in p.name]
    assert aside.name.startswith("bot.sqlite3-wal.before-restore-")
    assert aside.read_bytes() == before["bot.sqlite3-wal"]
    assert f"moved aside: {aside}" in forced.stdout
    assert not (data / "bot.sqlite3-wal").exists() and (data / "bot.sqlite3").is_file()


def test_restore_refuses_a_database_a_running_server_has_open(
    served: tuple[Path, RunningBot, Poster],
) -> None:
    root, running, _ = served
    before = listing(running.db.parent / "bot.sqlite3-bodies")
    done = bot(root, "restore", "--force", str(root / "backup"))
    assert done.returncode == 1
    assert f"{running.db} is open in a running process" in done.stderr
    assert running.db.is_file() and not list(running.db.parent.glob("*.before-restore-*"))
    assert listing(running.db.parent / "bot.sqlite3-bodies") == before


def test_restore_refuses_an_unfinished_or_damaged_backup(
    served: tuple[Path, RunningBot, Poster],
) -> None:
    root, _, _ = served
    unfinished = root / "unfinished"
    shutil.copytree(root / "backup", unfinished)
    (unfinished / "backup.json").unlink()
    done = bot(root, "restore", str(unfinished), env=env_for(root, root / "target-1"))
    assert done.returncode == 1 and "is not a finished backup" in done.stderr

    damaged = root / "damaged"
    shutil.copytree(root / "backup", damaged)
    segment = sorted((damaged / "bot.sqlite3-bodies").iterdir())[0]
    data = bytearray(segment.read_bytes())
    data[len(data) // 2] ^= 0xFF
    segment.write_bytes(bytes(data))
    done = bot(root, "restore", str(damaged), env=env_for(root, root / "target-2"))
    assert done.returncode == 1
    assert f"{segment} is not the file that was backed up" in done.stderr
    assert not (root / "target-1").exists() and not (root / "target-2").exists()


def test_with_postgres_both_refuse_and_name_the_tools_without_the_password(
    served: tuple[Path, RunningBot, Poster],
) -> None:
    root, _, _ = served
    url = "postgresql://bot:pg-pass-0123456789@127.0.0.1:5432/bot"
    env = env_for(root, root / "pg", BOT_DATABASE_URL=url)
    made = bot(root, "backup", str(root / "pg.dump"), env=env)
    assert made.returncode == 1
    assert "pg_dump --format=custom --file=" in made.stderr
    assert '--dbname="$BOT_DATABASE_URL"' in made.stderr
    put = bot(root, "restore", str(root / "pg.dump"), env=env)
    assert put.returncode == 1 and "pg_restore --clean --if-exists" in put.stderr
    for done in (made, put):
        assert "pg-pass-0123456789" not in done.stdout + done.stderr
    assert not (root / "pg.dump").exists() and not (root / "pg").exists()


def test_backup_files_are_the_users_only(served: tuple[Path, RunningBot, Poster]) -> None:
    root, _, _ = served
    backup = root / "backup"
    assert os.stat(backup).st_mode & 0o077 == 0
    for path in backup.rglob("*"):
        assert os.stat(path).st_mode & 0o077 == 0, path
