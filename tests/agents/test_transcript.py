"""The bounded transcript: the first entry, a note of what was dropped, the newest entries."""

from __future__ import annotations

import json

from bot.agents.transcript import Transcript


def test_keeps_first_and_newest_within_caps() -> None:
    t = Transcript(entry_cap=50, total_cap=1000, max_entries=200)
    t.add("user", "the task " + "x" * 200)
    for i in range(100):
        t.add("tool", f"result {i} " + "y" * 100, name="read_file")
    entries = t.entries()
    assert entries[0]["role"] == "user"
    assert (
        entries[0]["content"].startswith("the task ")
        and "more characters]" in entries[0]["content"]
    )
    assert entries[1] == {"role": "note", "content": f"{t.dropped} older entries dropped"}
    assert entries[-1]["content"].startswith("result 99 ")
    kept = [int(e["content"].split()[1]) for e in entries[2:]]
    assert kept == list(range(100 - len(kept), 100))
    assert t.dropped == 100 - len(kept) > 0
    assert len(json.dumps(entries)) < 1500


def test_entry_count_cap() -> None:
    t = Transcript(max_entries=5)
    for i in range(10):
        t.add("assistant", f"turn {i}")
    entries = t.entries()
    assert [e["content"] for e in entries] == [
        "turn 0",
        "5 older entries dropped",
        "turn 6",
        "turn 7",
        "turn 8",
        "turn 9",
    ]


def test_nothing_dropped_means_no_note() -> None:
    t = Transcript()
    t.add("user", "task")
    t.add("assistant", "", tool_calls=[{"name": "grep", "arguments": "{}"}])
    assert t.entries() == [
        {"role": "user", "content": "task"},
        {"role": "assistant", "tool_calls": [{"name": "grep", "arguments": "{}"}]},
    ]
