"""Which missed webhook deliveries to ask GitHub for again."""

from __future__ import annotations

import pytest

from policies.redelivery import MAX_REDELIVERIES, Action, Attempt, parse_duration, plan


def attempt(
    n: int, guid: str, code: int, *, redelivery: bool = False, action: str | None = "opened"
) -> Attempt:
    return Attempt(
        n, guid, "issues", action, "OK" if code < 300 else "failed", code, float(n), redelivery
    )


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("3d", 259200.0),
        ("12h", 43200.0),
        ("30m", 1800.0),
        ("90", 90.0),
        ("45s", 45.0),
        ("1w", 604800.0),
        (" 1.5H ", 5400.0),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "3 days", "-1d", "0", "d"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


def test_one_step_per_delivery_newest_first() -> None:
    attempts = [
        attempt(1, "missed", 502),
        attempt(2, "received", 502),
        attempt(3, "delivered", 200),
        attempt(4, "retried-ok", 502),
        attempt(5, "retried-ok", 200, redelivery=True),
        attempt(6, "ping", 500, action=None),
    ]
    steps = plan(attempts, {"received"})
    assert [(s.attempt.guid, s.action, s.attempts) for s in steps] == [
        ("ping", Action.REDELIVER, 1),
        ("retried-ok", Action.DELIVERED, 2),
        ("delivered", Action.DELIVERED, 1),
        ("received", Action.SEEN, 1),
        ("missed", Action.REDELIVER, 1),
    ]
    assert steps[0].event == "issues" and steps[-1].event == "issues.opened"
    assert steps[1].attempt.id == 5  # shown by its newest attempt


def test_a_seen_guid_is_never_redelivered_whatever_github_lists() -> None:
    attempts = [attempt(n, "g", 502, redelivery=n > 1) for n in range(1, 3)]
    assert [s.action for s in plan(attempts, {"g"})] == [Action.SEEN]


def test_redeliveries_that_keep_failing_stop_after_the_cap() -> None:
    tries = [attempt(0, "g", 400)]
    for n in range(1, MAX_REDELIVERIES + 1):
        assert [s.action for s in plan(tries, set())] == [Action.REDELIVER]
        tries.append(attempt(n, "g", 400, redelivery=True))
    assert [s.action for s in plan(tries, set())] == [Action.GAVE_UP]
    assert [s.action for s in plan(tries, set(), max_redeliveries=5)] == [Action.REDELIVER]


def test_the_store_s_count_caps_a_guid_whose_redeliveries_left_the_listing() -> None:
    # A pass that looks back two intervals sees the latest redelivery only.
    listed = [attempt(9, "g", 503, redelivery=True), attempt(9, "h", 503, redelivery=True)]
    requested = {"g": MAX_REDELIVERIES, "h": MAX_REDELIVERIES - 1}
    steps = {s.attempt.guid: s.action for s in plan(listed, set(), requested)}
    assert steps == {"g": Action.GAVE_UP, "h": Action.REDELIVER}
    assert [s.action for s in plan(listed[:1], set())] == [Action.REDELIVER]
