"""`bot retry DELIVERY|RUN` and `bot retry --failed [--since] [--dry-run]` on a store where
one delivery's job is dead, one's run failed, one's run is running and one went well."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli import main
from bot.store.queue.base import JobStatus
from bot.store.queue.sqlite import SqliteJobQueue
from bot.store.sqlite import Store
from tests.backends import end_job, insert_delivery, take_job

NOW = time.time()
DAY = 86400.0


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    monkeypatch.chdir(tmp_path)
    for key in list(os.environ):
        if key.startswith("BOT_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("BOT_DATA_DIR", str(tmp_path / "data"))
    store = Store.open(tmp_path / "data" / "bot.sqlite3")
    queue = SqliteJobQueue(store)
    for guid, at, how in (
        ("dead", NOW - 3600, "dead"),
        ("failed", NOW - 3600, "done"),
        ("running", NOW - 3600, "done"),
        ("fine", NOW - 3600, "done"),
        ("old-dead", NOW - 3 * DAY, "dead"),
    ):
        insert_delivery(store, guid, at)
        queue.enqueue_sync(guid)
        end_job(store, take_job(store), how)
    for guid, status in (("failed", "failed"), ("running", "running"), ("fine", "succeeded")):
        run = store.create_run(
            delivery_id=guid,
            repo="o/r",
            target_kind="issue",
            number=1,
            workflow="triage",
            mode="webhook",
        )
        store.update_run(run.id, status=status)
    yield store
    store.close()


def _kinds(store: Store, guid: str) -> list[tuple[str, JobStatus]]:
    return [(j.kind, j.status) for j in SqliteJobQueue(store).jobs_for_delivery(guid)]


def test_retry_by_guid_queues_a_new_job(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["retry", "dead"]) == 0
    assert capsys.readouterr().out == "dead  retried as job retry-1: its delivery job is dead\n"
    assert _kinds(store, "dead")[-1] == ("retry-1", JobStatus.QUEUED)


def test_retry_by_run_id_requeues_that_run(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    [run] = store.runs_for_delivery("failed")
    assert main(["retry", run.id]) == 0
    out = capsys.readouterr().out
    assert (
        out == f"failed  retried as job retry-1: run {run.id} failed, runs {run.id} queued again\n"
    )
    again = store.get_run(run.id)
    assert again is not None and again.status == "queued"


def test_a_running_run_is_refused(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    [run] = store.runs_for_delivery("running")
    assert main(["retry", run.id]) == 1
    assert capsys.readouterr().out == f"running  refused: run {run.id} is running\n"
    assert _kinds(store, "running") == [("delivery", JobStatus.DONE)]


def test_nothing_failed_is_refused_and_unknown_ids_are_named(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["retry", "fine"]) == 1
    assert "fine  refused: nothing failed" in capsys.readouterr().out
    assert main(["retry", "wf_0123456789ab"]) == 2
    assert "no delivery or run wf_0123456789ab is stored" in capsys.readouterr().err


def test_failed_dry_run_lists_what_would_run_and_changes_nothing(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["retry", "--failed", "--dry-run"]) == 0
    captured = capsys.readouterr()
    assert sorted(line.split()[0] for line in captured.out.splitlines()) == ["dead", "failed"]
    assert "4 deliveries since 1d: 2 would run again" in captured.err
    assert _kinds(store, "dead") == [("delivery", JobStatus.DEAD)]


def test_failed_since_reaches_further_back_and_runs_them(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["retry", "--failed", "--since", "4d"]) == 0
    out = capsys.readouterr().out
    assert sorted(line.split()[0] for line in out.splitlines()) == ["dead", "failed", "old-dead"]
    assert _kinds(store, "old-dead")[-1] == ("retry-1", JobStatus.QUEUED)


def test_bad_arguments_are_refused(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["retry"]) == 2
    assert main(["retry", "dead", "--failed"]) == 2
    assert main(["retry", "dead", "--since", "1d"]) == 2
    assert main(["retry", "--failed", "--since", "soon"]) == 2
    assert "--since" in capsys.readouterr().err
