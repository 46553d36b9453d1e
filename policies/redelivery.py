"""Which of the App's recent webhook deliveries to ask GitHub to send again.

GitHub lists every attempt to deliver an event to the App (`GET /app/hook/deliveries`); all
attempts of one event share its GUID, and a redelivery is one more attempt with
`redelivery: true`. A delivery the app missed (it was down, or answered 5xx) is one whose
attempts all failed and whose GUID the store never saw. Those are redelivered, once per
pass; a GUID the store has is never redelivered again, whatever GitHub lists for it. After
`MAX_REDELIVERIES` redeliveries that failed too (a delivery the receiver refuses each time),
a GUID is left alone: trying again would only fail again.

The redeliveries of a GUID are counted twice over: the attempts GitHub lists with
`redelivery: true` (made by anyone), and the requests the app made itself, which the store
keeps for `REMEMBER_S`. The listing alone is not enough: a pass looks back only a few
intervals, so the attempts of earlier passes fall out of its window and a GUID that always
fails would be asked for again at every pass.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "DEFAULT_SINCE",
    "MAX_REDELIVERIES",
    "REMEMBER_S",
    "Action",
    "Attempt",
    "Step",
    "parse_duration",
    "plan",
]

MAX_REDELIVERIES = 3
"""Redeliveries of one GUID after which it is no longer asked for."""
DEFAULT_SINCE = "3d"
"""How far back to look by default: GitHub redelivers attempts of the past three days."""

REMEMBER_S = 4 * 86400.0
"""How long the app keeps its count of a GUID's redelivery requests after the last one: longer
than GitHub lists an attempt (three days), so no attempt that could bring the GUID back into
a listing outlives its count."""

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """Seconds in `30m`, `12h`, `3d`, `1w` or a plain number of seconds; ValueError else."""
    match = _DURATION.match(text.lower())
    if match is None or float(match.group(1)) <= 0:
        raise ValueError(f"not a duration: {text!r} (use e.g. 30m, 12h, 3d)")
    return float(match.group(1)) * _UNITS[match.group(2)]


@dataclass(frozen=True, slots=True)
class Attempt:
    """One listed delivery attempt: the fields the decision reads."""

    id: int
    guid: str
    event: str
    action: str | None
    status: str
    status_code: int
    delivered_at: float
    redelivery: bool = False

    @property
    def ok(self) -> bool:
        return 200 <= self.status_code < 300


class Action(StrEnum):
    REDELIVER = "redeliver"
    SEEN = "seen"
    """The store has the GUID: the app received it."""
    DELIVERED = "delivered"
    """GitHub delivered one attempt (2xx), to this deployment or another."""
    GAVE_UP = "gave_up"
    """Redelivered `MAX_REDELIVERIES` times already (as listed, or as the store counted the
    app's requests), and failed each time."""


@dataclass(frozen=True, slots=True)
class Step:
    """What to do about one delivery (one GUID), shown by its newest attempt."""

    attempt: Attempt
    action: Action
    attempts: int
    """How many attempts of the GUID were listed."""

    @property
    def event(self) -> str:
        a = self.attempt
        return f"{a.event}.{a.action}" if a.action else a.event


def plan(
    attempts: Iterable[Attempt],
    seen: Set[str],
    requested: Mapping[str, int] | None = None,
    *,
    max_redeliveries: int = MAX_REDELIVERIES,
) -> list[Step]:
    """One step per GUID, newest delivery first: redeliver those the app missed.

    `requested` is how many times the app has asked for each GUID again (the store's count);
    a GUID gives up at `max_redeliveries` by that count or by the redeliveries listed."""
    asked = requested or {}
    by_guid: dict[str, list[Attempt]] = {}
    for attempt in sorted(attempts, key=lambda a: (a.delivered_at, a.id), reverse=True):
        by_guid.setdefault(attempt.guid, []).append(attempt)
    steps: list[Step] = []
    for guid, tries in by_guid.items():
        newest = tries[0]
        if guid in seen:
            action = Action.SEEN
        elif any(t.ok for t in tries):
            action = Action.DELIVERED
        elif max(sum(t.redelivery for t in tries), asked.get(guid, 0)) >= max_redeliveries:
            action = Action.GAVE_UP
        else:
            action = Action.REDELIVER
        steps.append(Step(newest, action, len(tries)))
    return steps
