"""The run timeline's layout: one lane per concurrent agent call, bars from start to end.

A call goes into the first lane whose last bar ended before it started, so calls that ran one
after another share a lane and calls that overlapped get lanes of their own: a pipeline without
a barrier shows as bars that start while others still run. A call still running ends at `now`;
a call that has not started yet is left out (it has no place on the time axis).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CallSpan:
    """One agent call as the run's details record it."""

    index: int
    label: str
    state: str
    """pending, running, done or error."""
    started_at: float | None
    finished_at: float | None
    replayed: bool = False
    phase: str | None = None


@dataclass(frozen=True, slots=True)
class Bar:
    call: CallSpan
    lane: int
    start: float
    """Seconds since the timeline's origin."""
    end: float
    running: bool


@dataclass(frozen=True, slots=True)
class Timeline:
    bars: tuple[Bar, ...]
    lanes: int
    origin: float
    """The earliest start (seconds since the epoch); 0 when there are no bars."""
    span: float
    """Seconds from the origin to the latest end (at least a tenth of a second)."""


def lay_out(calls: Sequence[CallSpan], now: float) -> Timeline:
    """Lanes for `calls` (in any order); see the module's docstring."""
    started = sorted(
        (c for c in calls if c.started_at is not None),
        key=lambda c: (c.started_at or 0.0, c.index),
    )
    if not started:
        return Timeline(bars=(), lanes=0, origin=0.0, span=0.1)
    origin = float(started[0].started_at or 0.0)
    lane_ends: list[float] = []
    bars: list[Bar] = []
    for call in started:
        start = float(call.started_at or 0.0)
        running = call.finished_at is None
        end = max(start, now if running else float(call.finished_at or start))
        lane = next((i for i, last in enumerate(lane_ends) if last <= start), len(lane_ends))
        if lane == len(lane_ends):
            lane_ends.append(end)
        else:
            lane_ends[lane] = end
        bars.append(
            Bar(call=call, lane=lane, start=start - origin, end=end - origin, running=running)
        )
    span = max(0.1, max(bar.end for bar in bars))
    return Timeline(bars=tuple(bars), lanes=len(lane_ends), origin=origin, span=span)


def tick_step(span: float, ticks: int = 8) -> float:
    """A round step (1, 2 or 5 times a power of ten seconds) giving at most about `ticks`
    ticks across `span` seconds."""
    raw = max(span, 1e-3) / max(ticks, 1)
    step = 0.001
    while True:
        for factor in (1, 2, 5):
            if step * factor >= raw:
                return step * factor
        step *= 10
