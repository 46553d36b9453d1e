"""A run's budget while it runs: what it used, what its calls in flight hold, and the day's
tokens of its installation, asked before every model request (`policies.budget` decides).

The runner calls `admit` before each request with the tokens that request is about to send;
an admitted request holds its estimate until `settle` replaces it with what it really used,
so calls running side by side cannot pass the budget together. Once one request is refused
the budget stays reached: the run starts no more model calls (`reached` says why), and the
workflow says what it did not do. With `BOT_DAILY_TOKENS` the installation's tokens of the
UTC day are read from the store at every `admit` and added to it at every `settle`, so runs on
other workers count too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

import anyio.to_thread

from bot.engine.types import Usage
from bot.log import get_logger
from policies.budget import BudgetLimits, Spent, refusal

log = get_logger("bot.engine")


class DailyTokens(Protocol):
    """Where the tokens of each installation's day are counted (the store)."""

    def daily_tokens(self, installation_id: int, day: str) -> int: ...

    def add_daily_tokens(self, installation_id: int, day: str, tokens: int) -> None: ...


def utc_day(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d")


class RunBudget:
    """One run's budget (implements `bot.engine.types.BudgetGate`)."""

    def __init__(
        self,
        limits: BudgetLimits,
        *,
        ledger: DailyTokens | None = None,
        installation_id: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.limits = limits
        self.ledger = ledger if installation_id is not None else None
        self.installation_id = installation_id
        self.clock = clock
        self.used_tokens = 0
        self.used_cost = 0.0
        self.held_tokens = 0
        self.held_cost = 0.0
        self.daily = 0
        self.reached: str | None = None
        self.refused = 0
        """Model requests refused (none of them reached the model)."""

    def _spent(self) -> Spent:
        return Spent(
            tokens=self.used_tokens + self.held_tokens,
            cost=self.used_cost + self.held_cost,
            daily=self.daily + self.held_tokens,
        )

    def check(self, tokens: int) -> str | None:
        """Whether a call sending about `tokens` may start, without holding anything: the
        engine asks before it starts an agent call."""
        if self.reached is None:
            self.reached = refusal(self.limits, self._spent(), tokens=tokens)
        if self.reached is not None:
            self.refused += 1
        return self.reached

    async def admit(self, tokens: int, cost: float | None) -> str | None:
        if self.reached is None and self.limits.daily_tokens is not None and self.ledger:
            ledger, installation, day = self.ledger, self.installation_id, utc_day(self.clock())
            assert installation is not None
            self.daily = await anyio.to_thread.run_sync(ledger.daily_tokens, installation, day)
        if self.reached is None:
            self.reached = refusal(self.limits, self._spent(), tokens=tokens, cost=cost)
            if self.reached is not None:
                log.info("budget reached", extra={"reason": self.reached})
        if self.reached is not None:
            self.refused += 1
            return self.reached
        self.held_tokens += tokens
        self.held_cost += cost or 0.0
        return None

    async def settle(self, tokens: int, cost: float | None, usage: Usage) -> None:
        self.held_tokens = max(0, self.held_tokens - tokens)
        self.held_cost = max(0.0, self.held_cost - (cost or 0.0))
        self.used_tokens += usage.total
        self.used_cost += usage.cost or 0.0
        if self.ledger is not None and usage.total:
            ledger, installation, day = self.ledger, self.installation_id, utc_day(self.clock())
            assert installation is not None
            await anyio.to_thread.run_sync(ledger.add_daily_tokens, installation, day, usage.total)
            self.daily += usage.total
