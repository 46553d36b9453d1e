"""The commands' `--since` values: a duration back from now, or an ISO date or time.

A duration is what `bot redeliver --since` reads (`policies.redelivery.parse_duration`:
`30m`, `12h`, `3d`, `1w`, plain seconds); a date (`2024-05-01`) means its midnight, and a time
without an offset (`2024-05-01T08:30`) is UTC, the time the app stores and shows. The clock is
an argument: `now` is the caller's. Here and not in `policies/`, which reads no dates.
"""

from __future__ import annotations

from datetime import UTC, datetime

from policies.redelivery import parse_duration

__all__ = ["parse_since"]


def parse_since(text: str, *, now: float) -> float:
    """The Unix time `text` means: `now` minus a duration, or an ISO date or time (UTC unless
    it says otherwise). ValueError, saying what to write, for anything else."""
    try:
        return now - parse_duration(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"not a duration or a date: {text!r} (use e.g. 3d, 12h or 2024-05-01)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()
