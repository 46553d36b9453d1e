"""bot/ui/auth.py: the sign-in limiter and the security headers."""

from __future__ import annotations

from bot.ui.auth import SignInLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_five_failures_in_a_minute_block_that_address_only() -> None:
    clock = Clock()
    limiter = SignInLimiter(max_failures=5, window=60.0, clock=clock)
    for _ in range(4):
        limiter.failed("10.0.0.1")
    assert limiter.blocked_for("10.0.0.1") == 0.0
    clock.now = 10.0
    limiter.failed("10.0.0.1")
    assert limiter.blocked_for("10.0.0.1") == 50.0
    assert limiter.blocked_for("10.0.0.2") == 0.0
    clock.now = 60.0  # the first four aged out
    assert limiter.blocked_for("10.0.0.1") == 0.0


def test_an_address_that_keeps_failing_stays_limited_in_bounded_memory() -> None:
    clock = Clock()
    limiter = SignInLimiter(max_failures=3, window=60.0, clock=clock)
    for second in range(100):
        clock.now = float(second)
        limiter.failed("a")
    # The last three count: the limit lasts until the oldest of them (at 97 s) ages out.
    assert limiter.blocked_for("a") == 60.0 - (99.0 - 97.0)
    clock.now = 156.5
    assert limiter.blocked_for("a") == 0.5
    clock.now = 157.0
    assert limiter.blocked_for("a") == 0.0
