"""A repository's `.github/bot.yml` read by the real wiring from the fake GitHub, through the
worker: a file that cannot be read ends the delivery as an `invalid_config` skip, once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.runs.worker import Worker
from bot.store.queue.base import JobStatus
from bot.store.queue.sqlite import SqliteJobQueue, insert_job
from bot.store.sqlite import Store, transaction
from bot.wiring import build_worker_hooks
from tests.bot.test_wiring import fake, settings_for, write_config
from tests.fakes.github import FakeGitHub

__all__ = ["fake"]  # the fake GitHub fixture, shared with the wiring tests

pytestmark = pytest.mark.anyio


def issue_opened() -> bytes:
    """The fields of an `issues.opened` delivery that the worker reads."""
    user = {"login": "maint", "type": "User"}
    return json.dumps(
        {
            "action": "opened",
            "issue": {"number": 1, "title": "Crash on start", "body": "", "user": user},
            "repository": {"id": 1, "full_name": "octo/hello", "default_branch": "main"},
            "installation": {"id": 42},
            "sender": user,
        }
    ).encode()


@pytest.fixture
def store(data_dir: Path) -> Iterator[Store]:
    opened = Store.open(data_dir / "bot.sqlite3")
    yield opened
    opened.close()


def deliver(store: Store, guid: str) -> None:
    conn = store.conn()
    with transaction(conn):
        conn.execute(
            "INSERT INTO deliveries (guid, event, received_at, headers, body)"
            " VALUES (?, 'issues', 0, '{}', ?)",
            (guid, issue_opened()),
        )
        insert_job(conn, guid, 0)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        pytest.param("triage:\n  enabled: 2001-13-45\n", "line 2, column 12", id="date"),
        pytest.param("enabled: !!bool maybe\n", "line 1, column 10", id="bool-tag"),
        pytest.param("language: " + "9" * 5000 + "\n", "line 1, column 11", id="huge-int"),
    ],
)
async def test_unreadable_config_is_an_invalid_config_skip_not_a_retry(
    fake: tuple[FakeGitHub, str], data_dir: Path, store: Store, text: str, where: str
) -> None:
    gh, url = fake
    write_config(gh, "hello", text)
    hooks = build_worker_hooks(settings_for(gh, url, data_dir), store)
    queue = SqliteJobQueue(store)
    deliver(store, "g-config")
    worker = Worker(store, queue, hooks, app_slug=gh.slug)
    assert await worker.run_until_idle() == 1
    row = store.get_delivery("g-config")
    assert row is not None and row.decision == "skip"
    assert row.reason is not None and row.reason.startswith("invalid_config")
    assert f".github/bot.yml {where}:" in row.reason
    assert store.runs_for_delivery("g-config") == []
    counts = queue.counts_sync()
    assert (counts[JobStatus.DONE], counts[JobStatus.QUEUED], counts[JobStatus.DEAD]) == (1, 0, 0)
