"""Run budgets: the limits a run gets, and whether its next model call may start.

A run's limits are the repository's (`budget.max_tokens`, `budget.max_cost_usd` in
`.github/bot.yml`) capped by the operator's (`BOT_MAX_RUN_TOKENS`, `BOT_MAX_RUN_COST_USD`):
the smaller of the two where both are set, whichever is set otherwise. `BOT_DAILY_TOKENS`
caps what one installation's runs use in a UTC day, all runs together.

`refusal` is asked before every model call with what that call is about to send (its input,
estimated from its text) and what the run has spent and holds for calls in flight: None lets
it start, a sentence saying which budget it would pass refuses it. A refused call never
reaches the model; the workflow that asked stops starting calls and says what was left.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

CHARS_PER_TOKEN = 4
"""A conservative estimate for English and code (tokenizers give 3.5 to 4.5)."""
BUDGET_REACHED = "budget reached"
_N = TypeVar("_N", int, float)


@dataclass(frozen=True, slots=True)
class BudgetLimits:
    """What one run may use; None: no limit of that kind."""

    max_tokens: int | None = None
    max_cost_usd: float | None = None
    daily_tokens: int | None = None

    @property
    def unlimited(self) -> bool:
        return self.max_tokens is None and self.max_cost_usd is None and self.daily_tokens is None


@dataclass(frozen=True, slots=True)
class Spent:
    """What counts against the limits: the run's tokens and cost (used, plus held for calls in
    flight), and its installation's tokens today (every run's, this one's included)."""

    tokens: int = 0
    cost: float = 0.0
    daily: int = 0


def _smaller(repo: _N | None, operator: _N | None) -> _N | None:
    if repo is None:
        return operator
    if operator is None:
        return repo
    return min(repo, operator)


def run_limits(
    *,
    repo_tokens: int | None,
    repo_cost: float | None,
    operator_tokens: int | None,
    operator_cost: float | None,
    daily_tokens: int | None,
) -> BudgetLimits:
    """The repository's limits capped by the operator's (see the module docstring)."""
    return BudgetLimits(
        max_tokens=_smaller(repo_tokens, operator_tokens),
        max_cost_usd=_smaller(repo_cost, operator_cost),
        daily_tokens=daily_tokens,
    )


def estimate_tokens(chars: int) -> int:
    """The tokens a text of `chars` characters is about to cost, rounded up."""
    return max(1, -(-chars // CHARS_PER_TOKEN))


def refusal(
    limits: BudgetLimits, spent: Spent, *, tokens: int, cost: float | None = None
) -> str | None:
    """None when a call sending about `tokens` (costing about `cost`, when priced) fits every
    limit; else why it may not start, beginning with "budget reached"."""
    if limits.max_tokens is not None and spent.tokens + tokens > limits.max_tokens:
        return (
            f"{BUDGET_REACHED}: the run's {limits.max_tokens:,} tokens (used {spent.tokens:,}; "
            f"the next model call would send about {tokens:,})"
        )
    if limits.max_cost_usd is not None and spent.cost + (cost or 0.0) > limits.max_cost_usd:
        return (
            f"{BUDGET_REACHED}: the run's ${limits.max_cost_usd:.2f} (spent ${spent.cost:.4f}"
            + (f"; the next model call would cost about ${cost:.4f})" if cost else ")")
        )
    if limits.daily_tokens is not None and spent.daily + tokens > limits.daily_tokens:
        return (
            f"{BUDGET_REACHED}: this installation's {limits.daily_tokens:,} tokens for today "
            f"(used {spent.daily:,}; the next model call would send about {tokens:,})"
        )
    return None


def stopped_summary(workflow: str, reason: str) -> str:
    """What a run that its budget stopped says instead of a result (fix, ask, triage): its
    agents' partial work is neither posted nor pushed."""
    what = {
        "fix": "Nothing was pushed and no pull request was opened",
        "ask": "The question was not answered",
        "triage": "The issue was not triaged",
    }.get(workflow, "The run did not finish")
    return (
        f"**Stopped: {reason}.** {what}: the run started no more model calls once its "
        "budget was reached, and what it had done is not published half-checked. Raise "
        "`budget` in `.github/bot.yml` (within the operator's caps), or run it again later "
        "when the day's limit is the one reached."
    )
