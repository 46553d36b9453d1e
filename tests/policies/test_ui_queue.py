"""`policies.ui_queue`: the queue page's lines and the silent workers."""

from __future__ import annotations

from policies.ui_queue import (
    SILENT_AFTER_S,
    STATES,
    QueueLine,
    StateCount,
    WorkerBeat,
    held_by_silent,
    is_silent,
    queue_lines,
    totals,
)


def test_lines_per_workflow_count_every_state_and_the_oldest_wait() -> None:
    lines = queue_lines(
        [
            StateCount("review", "queued", 2, 90.0),
            StateCount("review", "failed", 1, 40.0),
            StateCount("review", "running", 3, 10.0),  # running: not waiting
            StateCount("review", "dead", 4, 1.0),  # dead: not waiting
            StateCount("", "queued", 1, 99.0),
            StateCount("fix", "running", 1, 50.0),
            StateCount("fix", "bogus", 9, 0.0),  # a state the page does not know
        ],
        now=100.0,
    )
    assert [line.workflow for line in lines] == ["", "fix", "review"]
    assert lines[2] == QueueLine(
        "review",
        {"queued": 2, "deferred": 0, "failed": 1, "running": 3, "dead": 4},
        oldest_wait=60.0,
    )
    assert lines[1].oldest_wait is None and lines[1].counts["running"] == 1
    assert lines[0].oldest_wait == 1.0
    assert totals(lines) == {"queued": 3, "deferred": 0, "failed": 1, "running": 4, "dead": 4}
    assert tuple(lines[0].counts) == STATES


def beat(worker_id: str, at: float, *runs: str) -> WorkerBeat:
    return WorkerBeat(worker_id, "host", 1, 0.0, at, runs)


def test_a_run_is_marked_only_when_its_worker_stopped_beating_and_no_live_one_holds_it() -> None:
    now = 1000.0
    alive = beat("alive", now - SILENT_AFTER_S, "wf_a", "wf_moved")
    gone = beat("gone", now - SILENT_AFTER_S - 0.1, "wf_b", "wf_moved")
    assert not is_silent(alive, now) and is_silent(gone, now)
    assert held_by_silent([alive, gone], now) == {"wf_b": gone}
    assert held_by_silent([gone], now) == {"wf_b": gone, "wf_moved": gone}
    assert held_by_silent([], now) == {}
