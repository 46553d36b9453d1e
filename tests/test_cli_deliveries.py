"""`bot deliveries`: a header, the time each delivery was received, and filters."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.cli import main
from bot.store.sqlite import Store
from tests.backends import insert_delivery

NOW = time.time()
DAY = 86400.0


def body(repo: str) -> bytes:
    return json.dumps({"repository": {"full_name": repo}}).encode()


def iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
def stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, float]]:
    monkeypatch.chdir(tmp_path)
    for key in list(os.environ):
        if key.startswith("BOT_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("BOT_DATA_DIR", str(tmp_path / "data"))
    store = Store.open(tmp_path / "data" / "bot.sqlite3")
    times = {"old": NOW - 5 * DAY, "pr": NOW - 2 * DAY, "new": NOW - 3600}
    insert_delivery(store, "old", times["old"], body=body("acme/api"))
    insert_delivery(
        store, "pr", times["pr"], event="pull_request", action="synchronize", body=body("acme/web")
    )
    insert_delivery(store, "new", times["new"], action="closed", body=body("acme/api"))
    store.record_decision("old", "trigger", workflow="triage")
    store.record_decision("pr", "skip", reason="draft")
    store.close()
    yield times


def listed(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    assert main(["deliveries", *argv]) == 0
    return capsys.readouterr().out.splitlines()


def test_a_header_then_one_line_per_delivery_with_its_utc_time(
    stored: dict[str, float], capsys: pytest.CaptureFixture[str]
) -> None:
    header, *rows = listed(capsys)
    assert header.split() == [
        "RECEIVED",
        "(UTC)",
        "DELIVERY",
        "EVENT",
        "DECISION",
        "JOB",
        "RUNS",
        "DETAIL",
    ]
    assert [row.split()[:4] for row in rows] == [
        [iso(stored["old"]), "old", "issues.opened", "trigger"],
        [iso(stored["pr"]), "pr", "pull_request.synchronize", "skip"],
        [iso(stored["new"]), "new", "issues.closed", "pending"],
    ]
    assert rows[0].endswith("triage") and rows[1].endswith("draft")
    # The columns line up under the header.
    assert header.index("EVENT") == rows[0].index("issues.opened")
    assert header.index("DECISION") == rows[1].index("skip")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param(["--event", "issues"], ["old", "new"], id="event"),
        pytest.param(["--event", "issues.closed"], ["new"], id="event-and-action"),
        pytest.param(["--repo", "ACME/api"], ["old", "new"], id="repo"),
        pytest.param(["--decision", "pending"], ["new"], id="pending"),
        pytest.param(["--decision", "skip"], ["pr"], id="decision"),
        pytest.param(["--since", "3d"], ["pr", "new"], id="since-a-duration"),
        pytest.param(["--since", "12h"], ["new"], id="since-hours"),
        pytest.param(["--repo", "acme/api", "--limit", "1"], ["new"], id="limit-the-newest"),
    ],
)
def test_filters(
    stored: dict[str, float],
    argv: list[str],
    expected: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    _header, *rows = listed(capsys, *argv)
    assert [row.split()[1] for row in rows] == expected


def test_since_an_iso_date(stored: dict[str, float], capsys: pytest.CaptureFixture[str]) -> None:
    day = datetime.fromtimestamp(stored["pr"], UTC).strftime("%Y-%m-%d")
    _header, *rows = listed(capsys, "--since", day)
    assert [row.split()[1] for row in rows] == ["pr", "new"]


def test_json_lines_carry_the_time_both_ways(
    stored: dict[str, float], capsys: pytest.CaptureFixture[str]
) -> None:
    lines = listed(capsys, "--json", "--event", "pull_request")
    [row] = [json.loads(line) for line in lines]
    assert row["delivery_id"] == "pr" and row["received"] == iso(stored["pr"])
    assert row["received_at"] == pytest.approx(stored["pr"])


def test_a_filter_that_matches_nothing_says_so(
    stored: dict[str, float], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["deliveries", "--repo", "acme/none"]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "no stored delivery matches" in captured.err


def test_a_since_that_is_neither_a_duration_nor_a_date_is_refused(
    stored: dict[str, float], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["deliveries", "--since", "yesterday"]) == 2
    err = capsys.readouterr().err
    assert "--since: not a duration or a date: 'yesterday' (use e.g. 3d, 12h or 2024-05-01)" in err


def test_an_unknown_decision_is_refused_by_the_parser(
    stored: dict[str, float], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["deliveries", "--decision", "maybe"])
    assert exit_info.value.code == 2
    assert "argument --decision: invalid choice: 'maybe'" in capsys.readouterr().err
