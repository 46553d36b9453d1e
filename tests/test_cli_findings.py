"""`bot findings`: every posted finding's fate, the figures, `--repo` and `--json`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bot.cli import main
from bot.store.sqlite import Store
from policies.finding_fates import FindingFate


def fate(repo: str, number: int, fp: str, outcome: str, pull: str, **kw: object) -> FindingFate:
    fields: dict[str, object] = {
        "repo": repo,
        "number": number,
        "fingerprint": fp,
        "path": "calc.py",
        "category": "bug",
        "severity": "high",
        "title": f"Title {fp}",
        "outcome": outcome,
        "pull": pull,
    }
    fields.update(kw)
    return FindingFate(**fields)  # type: ignore[arg-type]


@pytest.fixture
def stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for key in list(os.environ):
        if key.startswith("BOT_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("BOT_DATA_DIR", str(tmp_path / "data"))
    store = Store.open(tmp_path / "data" / "bot.sqlite3")
    store.put_finding_fates(
        "acme/api",
        3,
        [
            fate("acme/api", 3, "f1", "fixed", "merged", actor="b" * 40, how="re-check"),
            fate("acme/api", 3, "f2", "dismissed", "merged", actor="maint", how="👎"),
            fate("acme/api", 3, "f3", "open_at_close", "merged", category="style", severity="low"),
        ],
    )
    store.put_finding_fates("acme/web", 9, [fate("acme/web", 9, "f4", "open", "open")])
    store.close()


def test_json_lists_fates_and_figures(stored: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["findings", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(f["repo"], f["fingerprint"], f["outcome"]) for f in out["findings"]] == [
        ("acme/api", "f1", "fixed"),
        ("acme/api", "f2", "dismissed"),
        ("acme/api", "f3", "open_at_close"),
        ("acme/web", "f4", "open"),
    ]
    assert out["findings"][1]["actor"] == "maint" and out["findings"][1]["how"] == "👎"
    figures = out["figures"]
    assert figures["total"]["posted"] == 4
    assert figures["repos"]["acme/api"]["resolution_rate"] == pytest.approx(1 / 3)
    assert figures["repos"]["acme/web"]["resolution_rate"] is None  # not closed yet
    assert figures["categories"]["style"]["open_at_close"] == 1
    assert figures["severities"]["high"]["posted"] == 3


def test_repo_keeps_one_repository(stored: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["findings", "--repo", "ACME/web", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [f["fingerprint"] for f in out["findings"]] == ["f4"]
    assert list(out["figures"]["repos"]) == ["acme/web"]


def test_text_names_who_and_how(stored: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["findings"]) == 0
    text = capsys.readouterr().out
    assert "acme/api#3      high     bug          dismissed (👎 by @maint): Title f2" in text
    assert "fixed (re-check): Title f1" in text
    assert "by @bbbb" not in text  # a head is not a person
    all_line = [line for line in text.splitlines() if line.startswith("all ")]
    assert all_line and all_line[0].split()[1:] == ["4", "1", "1", "0", "1", "33%"]


def test_nothing_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BOT_DATA_DIR", str(tmp_path / "data"))
    assert main(["findings"]) == 0
    assert capsys.readouterr().out.strip() == "No findings recorded yet."


def test_text_keeps_terminal_controls_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file name may hold anything git allows: escape sequences never reach the terminal."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BOT_DATA_DIR", str(tmp_path / "data"))
    store = Store.open(tmp_path / "data" / "bot.sqlite3")
    evil = "\x1b]0;owned\x07\x1b[2J"
    store.put_finding_fates(
        "acme/api",
        1,
        [fate("acme/api", 1, "f1", "open", "open", path=f"a{evil}.py", title=f"T{evil}\nx")],
    )
    store.close()
    assert main(["findings"]) == 0
    text = capsys.readouterr().out
    assert "\x1b" not in text and "\x07" not in text
    assert "open: T x (a.py)" in text
    assert main(["findings", "--json"]) == 0
    raw = capsys.readouterr().out
    assert "\x1b" not in raw and json.loads(raw)["findings"][0]["path"] == f"a{evil}.py"
