"""policies/ui_timeline.py: lanes for concurrent agent calls."""

from __future__ import annotations

import pytest

from policies.ui_timeline import CallSpan, lay_out, tick_step


def span(index: int, start: float | None, end: float | None, state: str = "done") -> CallSpan:
    return CallSpan(index=index, label=f"c{index}", state=state, started_at=start, finished_at=end)


@pytest.mark.parametrize(
    ("calls", "lanes", "expected"),
    [
        pytest.param(
            [span(0, 0, 1), span(1, 1, 2), span(2, 2, 3)], 1, [0, 0, 0], id="a-chain-shares-a-lane"
        ),
        pytest.param(
            [span(0, 0, 4), span(1, 1, 2), span(2, 2, 3)],
            2,
            [0, 1, 1],
            id="a-barrier-free-pipeline",
        ),
        pytest.param([span(0, 0, 4), span(1, 0, 4), span(2, 0, 4)], 3, [0, 1, 2], id="all-at-once"),
        pytest.param(
            [span(1, 5, 6), span(0, 0, 1)], 1, [0, 0], id="order-of-input-does-not-matter"
        ),
    ],
)
def test_lanes(calls: list[CallSpan], lanes: int, expected: list[int]) -> None:
    timeline = lay_out(calls, now=100.0)
    assert timeline.lanes == lanes
    by_index = {bar.call.index: bar.lane for bar in timeline.bars}
    assert [by_index[i] for i in sorted(by_index)] == expected


def test_a_running_call_ends_now_and_a_pending_one_is_left_out() -> None:
    timeline = lay_out([span(0, 10, None, "running"), span(1, None, None, "pending")], now=15.0)
    assert [bar.call.index for bar in timeline.bars] == [0]
    assert timeline.bars[0].running
    assert timeline.bars[0].start == 0.0 and timeline.bars[0].end == 5.0
    assert timeline.origin == 10.0 and timeline.span == 5.0


def test_no_started_call() -> None:
    timeline = lay_out([span(0, None, None, "pending")], now=1.0)
    assert timeline.bars == () and timeline.lanes == 0


@pytest.mark.parametrize(
    ("span_seconds", "step"),
    [
        pytest.param(10.0, 2.0, id="ten-seconds"),
        pytest.param(0.5, 0.1, id="half-a-second"),
        pytest.param(600.0, 100.0, id="ten-minutes"),
    ],
)
def test_tick_step(span_seconds: float, step: float) -> None:
    assert tick_step(span_seconds) == pytest.approx(step)
