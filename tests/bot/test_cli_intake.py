"""`bot replay` and `bot deliveries`, run through the real command-line entry point."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest

from bot.cli import build_parser, main
from bot.store.backend import job_queue
from bot.store.contract import Storage
from bot.store.postgres.store import PostgresStore
from bot.store.queue.sqlite import SqliteJobQueue, insert_job
from bot.store.sqlite import Store, transaction
from tests.backends import BACKENDS, end_job, insert_delivery, take_job
from tests.conftest import PAYLOADS


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No BOT_* settings from the outside and no .env file: each test sets what it needs."""
    for key in list(os.environ):
        if key.startswith("BOT_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BOT_DATA_DIR", str(tmp_path / "data"))


def comment(tmp_path: Path, body: str) -> Path:
    data = json.loads((PAYLOADS / "issue_comment" / "created.payload.json").read_text())
    data["comment"]["body"] = body
    path = tmp_path / "comment.json"
    path.write_text(json.dumps(data))
    return path


def replay(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, object], str]:
    code = main(["replay", *args, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if code == 0 else {}, captured.err


def test_commands_are_registered() -> None:
    parser = build_parser()
    args = parser.parse_args(["serve", "--host", "0.0.0.0", "--port", "9000", "--no-worker"])
    assert (args.host, args.port, args.no_worker) == ("0.0.0.0", 9000, True)
    assert parser.parse_args(["worker"]).func.__name__ == "run_worker"
    assert parser.parse_args(["deliveries", "--json"]).json is True


def test_receivers_must_be_a_positive_count(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    assert parser.parse_args(["serve", "--receivers", "3"]).receivers == 3
    assert parser.parse_args(["serve"]).receivers is None  # one per core
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "--receivers", "0"])
    assert "must be at least 1" in capsys.readouterr().err


def test_replay_issue_opened_triggers_triage_in_webhook_mode(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, result, err = replay(
        capsys, str(PAYLOADS / "issues" / "opened.payload.json"), "--event", "issues"
    )
    assert code == 0
    assert {k: result[k] for k in ("decision", "workflow", "mode")} == {
        "decision": "trigger",
        "workflow": "triage",
        "mode": "webhook",
    }
    assert "reason" in result
    assert "BOT_APP_SLUG is not set" in err and "repo-agent" in err


@pytest.mark.parametrize(
    ("permission", "decision"),
    [
        ("write", "trigger"),
        ("admin", "trigger"),
        ("read", "skip"),
        ("none", "skip"),
        (None, "skip"),
    ],
)
def test_replay_command_depends_on_permission(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, permission: str | None, decision: str
) -> None:
    path = comment(tmp_path, "@repo-agent fix the typo")
    extra = [] if permission is None else ["--permission", permission]
    code, result, _ = replay(capsys, str(path), "--event", "issue_comment", *extra)
    assert code == 0
    assert result["decision"] == decision
    if decision == "trigger":
        assert (result["workflow"], result["mode"]) == ("fix", "webhook")
    else:
        assert str(result["reason"]).startswith("no_permission")


def test_replay_uses_the_slug_from_settings(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOT_APP_SLUG", "other-bot")
    path = comment(tmp_path, "@repo-agent review")
    code, result, err = replay(
        capsys, str(path), "--event", "issue_comment", "--permission", "write"
    )
    assert code == 0 and result["decision"] == "skip"
    assert "BOT_APP_SLUG" not in err


def test_replay_with_a_config_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "bot.yml"
    config.write_text("enabled: false\n")
    code, result, _ = replay(
        capsys,
        str(PAYLOADS / "pull_request" / "opened.payload.json"),
        "--event",
        "pull_request",
        "--config",
        str(config),
    )
    assert code == 0 and result["decision"] == "skip"


def test_replay_with_an_invalid_config_says_which_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "bot.yml"
    config.write_text("review:\n  drafts: sometimes\n")
    code = main(
        [
            "replay",
            str(PAYLOADS / "issues" / "opened.payload.json"),
            "--event",
            "issues",
            "--config",
            str(config),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "line 2" in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "is not valid JSON"),
        (b"[1, 2]", "must hold a JSON object"),
        (None, "cannot read"),
    ],
)
def test_replay_bad_payload_files_give_a_clear_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: bytes | None, message: str
) -> None:
    path = tmp_path / "payload.json"
    if content is not None:
        path.write_bytes(content)
    code = main(["replay", str(path), "--event", "issues"])
    assert code == 2
    assert message in capsys.readouterr().err


def test_replay_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["replay", str(PAYLOADS / "ping" / "payload.json"), "--event", "ping"])
    assert code == 0
    assert capsys.readouterr().out.startswith("skip: unsupported_event")


def test_deliveries_lists_stored_deliveries_with_decisions(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    store = Store.open(tmp_path / "data" / "bot.sqlite3")
    queue = SqliteJobQueue(store)
    conn = store.conn()
    with transaction(conn):
        for n, (event, action) in enumerate([("issues", "opened"), ("ping", None)]):
            conn.execute(
                "INSERT INTO deliveries (guid, event, action, received_at, headers, body)"
                " VALUES (?, ?, ?, ?, '{}', x'7b7d')",
                (f"g-{n}", event, action, float(n)),
            )
            insert_job(conn, f"g-{n}", float(n))
    job = queue.claim_sync("w", 30)
    assert job is not None and job.delivery_id == "g-0"
    anyio.run(queue.fail, job.id, "w", "RetryableError: 502")
    store.record_decision("g-0", "trigger", workflow="triage")
    run = store.create_run(
        delivery_id="g-0",
        repo="octo/hello",
        target_kind="issue",
        number=1,
        workflow="triage",
        mode="webhook",
    )
    store.update_run(run.id, status="running")
    store.close()

    assert main(["deliveries", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["delivery_id"], r["event"], r["decision"], r["workflow"]) for r in rows] == [
        ("g-0", "issues", "trigger", "triage"),
        ("g-1", "ping", None, None),
    ]
    assert rows[0]["job"] == {
        "status": "queued",
        "attempts": 1,
        "max_attempts": 5,
        "last_error": "RetryableError: 502",
    }
    assert rows[0]["runs"] == [{"run_id": run.id, "status": "running"}]
    assert rows[1]["job"]["status"] == "queued" and rows[1]["job"]["attempts"] == 0
    assert rows[1]["runs"] == []
    assert main(["deliveries"]) == 0
    header, *text = capsys.readouterr().out.splitlines()
    assert header.split()[:2] == ["RECEIVED", "(UTC)"]
    text = [line.split(maxsplit=1)[1] for line in text]  # after the time it was received
    assert text[0].split() == [
        "g-0",
        "issues.opened",
        "trigger",
        "queued",
        "1/5",
        f"{run.id}:running",
        "triage",
    ]
    assert text[1].split() == ["g-1", "ping", "pending", "queued", "0/5", "-"]
    assert main(["deliveries", "--limit", "1", "--json"]) == 0
    assert [json.loads(x)["delivery_id"] for x in capsys.readouterr().out.splitlines()] == ["g-1"]


def test_deliveries_of_a_delivery_without_a_job(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    store = Store.open(tmp_path / "data" / "bot.sqlite3")
    store.conn().execute(
        "INSERT INTO deliveries (guid, event, received_at, headers, body)"
        " VALUES ('g-0', 'push', 0, '{}', x'7b7d')"
    )
    store.close()
    assert main(["deliveries", "--json"]) == 0
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (row["job"], row["runs"]) == (None, [])
    assert main(["deliveries"]) == 0
    assert "no job" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("event", "action", "reason"),
    [
        ("installation", "suspend", "installation_suspended: installation 16598467 was suspended"),
        ("installation_repositories", "removed", "repositories_removed: octocat/hello-world of installation 2"),
    ],
)  # fmt: skip
def test_replay_shows_an_installation_lifecycle_change(
    capsys: pytest.CaptureFixture[str], event: str, action: str, reason: str
) -> None:
    path = PAYLOADS / event / f"{action}.payload.json"
    code, result, _ = replay(capsys, str(path), "--event", event)
    assert code == 0
    assert result == {"decision": "lifecycle", "workflow": None, "reason": reason}
    assert main(["replay", str(path), "--event", event]) == 0
    assert capsys.readouterr().out == f"lifecycle: {reason}\n"


def test_deliveries_on_an_empty_store(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["deliveries"]) == 0
    assert "no deliveries stored" in capsys.readouterr().err


@pytest.mark.anyio
@pytest.mark.parametrize("backend", BACKENDS)
async def test_deliveries_shows_each_decision_job_and_runs_on_either_backend(
    backend: str,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    store: Storage
    if backend == "postgres":
        dsn = request.getfixturevalue("postgres_dsn")
        monkeypatch.setenv("BOT_DATABASE_URL", dsn)
        store = PostgresStore.open(dsn)
    else:
        store = Store.open(tmp_path / "data" / "bot.sqlite3")
    queue = job_queue(store)
    for n, guid in enumerate(["g-retried", "g-skipped", "g-waiting"]):
        insert_delivery(store, guid, received_at=float(n))
        assert await queue.enqueue(guid) is not None
    # g-retried: the first attempt fails, the second starts two runs and completes.
    first = take_job(store)
    assert first.delivery_id == "g-retried"
    end_job(store, first, "retry", "RuntimeError: GitHub answered 502")
    runs = [
        store.create_run(
            delivery_id="g-retried",
            repo="octo/hello",
            target_kind="issue",
            number=1,
            workflow=workflow,
            mode="webhook",
        ).id
        for workflow in ("triage", "ask")
    ]
    store.record_decision("g-retried", "trigger", reason="opened", workflow="triage")
    skipped = take_job(store)
    assert skipped.delivery_id == "g-skipped"
    store.record_decision("g-skipped", "skip", reason="bot_sender: dependabot[bot]")
    end_job(store, skipped, "done")
    store.close()

    assert main(["deliveries", "--json"]) == 0
    rows = {
        row["delivery_id"]: row for row in map(json.loads, capsys.readouterr().out.splitlines())
    }
    assert list(rows) == ["g-retried", "g-skipped", "g-waiting"]
    retried = rows["g-retried"]
    assert (retried["decision"], retried["workflow"]) == ("trigger", "triage")
    assert retried["runs"] == [{"run_id": run_id, "status": "queued"} for run_id in runs]
    assert retried["job"] == {
        "status": "queued",
        "attempts": 1,
        "max_attempts": 5,
        "last_error": "RuntimeError: GitHub answered 502",
    }
    assert (rows["g-skipped"]["decision"], rows["g-skipped"]["runs"]) == ("skip", [])
    assert rows["g-skipped"]["job"]["status"] == "done"
    assert rows["g-skipped"]["job"]["attempts"] == 1
    assert rows["g-waiting"]["decision"] is None
    assert rows["g-waiting"]["job"]["status"] == "queued"
    assert rows["g-waiting"]["job"]["attempts"] == 0

    assert main(["deliveries"]) == 0
    header, *text = capsys.readouterr().out.splitlines()
    assert header.split()[:2] == ["RECEIVED", "(UTC)"]
    text = [line.split(maxsplit=1)[1] for line in text]  # after the time it was received
    assert text[0].split() == [
        "g-retried",
        "issues.opened",
        "trigger",
        "queued",
        "1/5",
        ",".join(f"{run_id}:queued" for run_id in runs),
        "triage",
    ]
    assert text[1].split()[2:5] == ["skip", "done", "1/5"]
    assert text[2].split()[2:6] == ["pending", "queued", "0/5", "-"]
