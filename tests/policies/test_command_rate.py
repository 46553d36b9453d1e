"""policies.command_rate: commands per person per repository, answered once past the limit."""

from __future__ import annotations

import pytest

from policies.command_rate import ANSWER, is_limited, limit_reply, limited
from policies.config import parse_repo_config
from policies.event import SkipReason


@pytest.mark.parametrize(
    ("command", "counts"),
    [
        ("review", True),
        ("ask", True),
        ("status", True),
        ("help", True),
        ("stop", False),
        (None, False),
    ],
)
def test_every_command_but_stop_counts(command: str | None, counts: bool) -> None:
    assert is_limited(command) is counts


def test_within_the_limit_nothing_is_refused() -> None:
    assert limited("maint", 4, 4, answer=True) is None
    assert limited("maint", 1, 4, answer=False) is None


def test_past_the_limit_the_first_is_answered_and_the_rest_are_not() -> None:
    first = limited("maint", 5, 4, answer=True)
    assert first is not None and first.reason is SkipReason.RATE_LIMITED
    assert first.detail == "maint gave 5 commands here within an hour; the limit is 4"
    assert first.extra == {ANSWER: "yes", "per_hour": "4"}
    later = limited("maint", 6, 4, answer=False)
    assert later is not None and later.reason is SkipReason.RATE_LIMITED and later.extra == {}


def test_the_reply_is_short_and_says_until_when() -> None:
    text = limit_reply("maint", 4, "14:05 UTC")
    assert text.startswith("@maint, that is more than 4 commands in this repository within an hour")
    assert "`commands.per_hour`" in text and "until about 14:05 UTC" in text
    assert "only reply" in text and len(text) < 300


def test_per_hour_defaults_to_twenty() -> None:
    assert parse_repo_config(None).commands.per_hour == 20
    assert parse_repo_config("commands: {per_hour: 4}\n").commands.per_hour == 4
