"""The result message, line by line, and the terminal-text sanitizer."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.engine import AgentDetails, RunDetails, build_result_message, strip_terminal
from bot.engine.report import format_elapsed, result_json


def details(**kw: object) -> RunDetails:
    base = RunDetails(run_id="wf_0123456789ab", name="review", started_at=1000.0)
    base.phases = [{"title": "Scan", "detail": ""}, {"title": "Report", "detail": ""}]
    base.status = "completed"
    base.finished_at = 1065.0
    for key, value in kw.items():
        setattr(base, key, value)
    return base


def test_message_follows_the_reference_layout() -> None:
    ok = AgentDetails(
        1,
        "scan:a.py",
        "Scan",
        "explorer",
        state="done",
        ledger="settled",
        acceptance={"status": "accepted"},
    )
    replayed = AgentDetails(2, "scan:b.py", "Scan", "explorer", state="done", replayed=True)
    failed = AgentDetails(
        3,
        "fix",
        "Report",
        "implementer",
        state="error",
        error="acceptance rejected: tests-pass",
        acceptance={"status": "rejected"},
        worktree_branch="bot/fix-6789ab-3",
        worktree_path="/data/repos/x.git/bot-worktrees/wf_0123456789ab/3",
        worktree_cleanup={
            "commits": 2,
            "branch": "bot/fix-6789ab-3",
            "reason": "uncommitted changes",
        },
        worktree_handoff="worktrees/agent-3.json",
    )
    d = details(
        agents=[ok, replayed, failed],
        logs=["scanned 2 files"],
        logs_dropped=4,
        resumed_from="wf_aaaaaaaaaaaa",
        resume_note=None,
        has_result=True,
        result={"verified": 1},
    )
    text = build_result_message(d, Path("/data/runs/wf_0123456789ab"))
    assert text.splitlines() == [
        'Workflow "review" completed - 2/3 agents ok, 1 failed across 2 phase(s) in 1m05s.',
        "Run dir: /data/runs/wf_0123456789ab",
        "Resumed from wf_aaaaaaaaaaaa: replayed 1/3 agent call(s), ran 2 for real.",
        "",
        "Log:",
        "  (4 earlier line(s) dropped)",
        "  scanned 2 files",
        "",
        "Isolated worktrees:",
        "- [fix] 2 commits on bot/fix-6789ab-3; kept at "
        "/data/repos/x.git/bot-worktrees/wf_0123456789ab/3 (uncommitted changes); "
        "handoff worktrees/agent-3.json",
        "",
        "Agents:",
        "- [scan:a.py] (Scan) ok · acceptance accepted",
        "- [scan:b.py] (Scan) ok (replayed)",
        "- [fix] (Report) FAILED · acceptance rejected - acceptance rejected: tests-pass",
        "",
        "Result:",
        "{",
        '  "verified": 1',
        "}",
    ]


def test_message_strips_model_text_and_reports_errors() -> None:
    agent = AgentDetails(1, "a", None, "explorer", state="error", error="bad\x1b[2J\u202eevil")
    d = details(
        status="failed",
        error="Stopped\x07 by user",
        agents=[agent],
        resume_note="journal unreadable (JSONDecodeError); every call runs for real",
    )
    text = build_result_message(d, Path("/r"))
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
    assert "Error: Stopped by user" in text
    assert "Resume: journal unreadable" in text
    assert "- [a] FAILED - badevil" in text
    assert "Result:" not in text


def test_result_is_capped() -> None:
    long_list = result_json(list(range(2000)))
    assert long_list.count("\n") <= 601 and long_list.endswith("full value in result.json)")
    wide = result_json("x" * 30_000)
    assert len(wide) < 24 * 1024 + 100 and "truncated" in wide


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        pytest.param("plain\ttext\nnext", "plain\ttext\nnext", id="plain"),
        pytest.param("\x1b[31mred\x1b[0m", "red", id="csi"),
        pytest.param("a\x1b]0;title\x07b", "ab", id="osc-bel"),
        pytest.param("a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\b", "alinkb", id="osc-st"),
        pytest.param("over\rwrite", "over\nwrite", id="carriage-return"),
        pytest.param("zero\u200bwidth\u2060joiner", "zerowidthjoiner", id="format-chars"),
        pytest.param("bidi \u202eevil\u202c", "bidi evil", id="bidi"),
        pytest.param("ctl\x00\x08\x7f\x9b31m", "ctl", id="controls"),
        pytest.param("line\u2028sep", "line\nsep", id="line-separator"),
        pytest.param("ünïcødé ✓ 漢字", "ünïcødé ✓ 漢字", id="visible-unicode"),
    ],
)
def test_strip_terminal(raw: str, clean: str) -> None:
    assert strip_terminal(raw) == clean


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0s"), (59, "59s"), (65, "1m05s"), (3600 + 180, "1h03m")]
)
def test_format_elapsed(seconds: int, text: str) -> None:
    assert format_elapsed(100.0, 100.0 + seconds) == text
