"""`bot replay --delivery GUID`: a delivery skipped for missing settings is queued again, once;
every other delivery is refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot.cli import main
from bot.store.queue.base import JobStatus
from bot.store.queue.sqlite import SqliteJobQueue, insert_job
from bot.store.sqlite import Store, transaction


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Store:
    for key in list(os.environ):
        if key.startswith("BOT_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BOT_DATA_DIR", str(tmp_path / "data"))
    (tmp_path / "data").mkdir()
    opened = Store.open(tmp_path / "data" / "bot.sqlite3")
    conn = opened.conn()
    with transaction(conn):
        for guid in ("g-skipped", "g-ran", "g-other-skip"):
            conn.execute(
                "INSERT INTO deliveries (guid, event, received_at, headers, body)"
                " VALUES (?, 'issues', 0, '{}', ?)",
                (guid, b"{}"),
            )
            insert_job(conn, guid, 0)
    opened.record_decision("g-skipped", "skip", reason="not_configured: missing a model")
    opened.record_decision("g-ran", "trigger", workflow="triage")
    opened.record_decision("g-other-skip", "skip", reason="draft: pull request #2 is a draft")
    queue = SqliteJobQueue(opened)
    while (job := queue.claim_sync("w", 60)) is not None:
        queue.complete_sync(job.id, "w")
    return opened


def test_a_not_configured_delivery_is_queued_again_once(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", "--delivery", "g-skipped"]) == 0
    out = capsys.readouterr()
    assert "queued g-skipped again" in out.out
    assert "still lack GitHub App credentials and a model" in out.err  # none here either
    jobs = SqliteJobQueue(store).jobs_for_delivery("g-skipped")
    assert [(job.kind, job.status) for job in jobs] == [
        ("delivery", JobStatus.DONE),
        ("replay-1", JobStatus.QUEUED),
    ]
    # Its job waits: asking again queues nothing more.
    assert main(["replay", "--delivery", "g-skipped"]) == 2
    assert "queued already" in capsys.readouterr().err
    assert len(SqliteJobQueue(store).jobs_for_delivery("g-skipped")) == 2


@pytest.mark.parametrize(
    ("guid", "said"),
    [
        pytest.param("g-ran", "was decided trigger", id="ran"),
        pytest.param("g-other-skip", "was decided skip (draft: pull request #2", id="other-skip"),
        pytest.param("g-nowhere", "no delivery g-nowhere is stored", id="unknown"),
    ],
)
def test_any_other_delivery_is_refused(
    store: Store, capsys: pytest.CaptureFixture[str], guid: str, said: str
) -> None:
    assert main(["replay", "--delivery", guid]) == 2
    assert said in capsys.readouterr().err
    assert len(SqliteJobQueue(store).jobs_for_delivery(guid)) <= 1


def test_a_payload_and_a_delivery_are_not_given_together(
    store: Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["replay", str(tmp_path / "x.json"), "--delivery", "g-skipped"]) == 2
    assert main(["replay", str(tmp_path / "x.json")]) == 2
    assert "--event" in capsys.readouterr().err
