"""`bot replay` and `bot deliveries`, run through the real command-line entry point."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bot.cli import build_parser, main
from bot.store import Store, transaction
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
    conn = store.conn()
    with transaction(conn):
        for n, (event, action) in enumerate([("issues", "opened"), ("ping", None)]):
            conn.execute(
                "INSERT INTO deliveries (guid, event, action, received_at, headers, body)"
                " VALUES (?, ?, ?, ?, '{}', x'7b7d')",
                (f"g-{n}", event, action, float(n)),
            )
    store.record_decision("g-0", "trigger", workflow="triage")
    store.close()

    assert main(["deliveries", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["delivery_id"], r["event"], r["decision"], r["workflow"]) for r in rows] == [
        ("g-0", "issues", "trigger", "triage"),
        ("g-1", "ping", None, None),
    ]
    assert main(["deliveries"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert "issues.opened" in text[0] and "trigger" in text[0] and "triage" in text[0]
    assert "pending" in text[1]
    assert main(["deliveries", "--limit", "1", "--json"]) == 0
    assert [json.loads(x)["delivery_id"] for x in capsys.readouterr().out.splitlines()] == ["g-1"]


def test_deliveries_on_an_empty_store(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["deliveries"]) == 0
    assert "no deliveries stored" in capsys.readouterr().err
