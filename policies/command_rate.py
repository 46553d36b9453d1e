"""Commands per person per repository: `commands.per_hour` in `.github/bot.yml` (default 20).

A person's commands in one repository are counted over the last hour (the store counts each
delivery once). Past the limit a command runs nothing: the first such command of the hour
gets one short reply saying so and when the hour ends, the later ones get none, so a flood
of commands cannot make the app write a flood of replies. `stop` is never limited: stopping
a run must always work.
"""

from __future__ import annotations

from policies.event import Skip, SkipReason

WINDOW_S = 3600.0
UNLIMITED = frozenset({"stop"})
ANSWER = "answer"


def is_limited(command: str | None) -> bool:
    """Whether a trigger with this command counts against the limit (a person's command)."""
    return command is not None and command not in UNLIMITED


def limited(actor: str, count: int, per_hour: int, *, answer: bool) -> Skip | None:
    """None while `count` (this command included) is within `per_hour`; else the skip,
    marked to be answered when `answer` (the first command past the limit this hour)."""
    if count <= per_hour:
        return None
    return Skip(
        SkipReason.RATE_LIMITED,
        f"{actor} gave {count} commands here within an hour; the limit is {per_hour}",
        extra={ANSWER: "yes", "per_hour": str(per_hour)} if answer else {},
    )


def limit_reply(actor: str, per_hour: int, until: str) -> str:
    """The one reply to a person past the limit: what happened and until when (`until`, a
    time of day such as `14:05 UTC`)."""
    return (
        f"@{actor}, that is more than {per_hour} commands in this repository within an hour "
        f"(`commands.per_hour` in `.github/bot.yml`), so this one and the next ones are "
        f"ignored until about {until}. This is the only reply until then."
    )
