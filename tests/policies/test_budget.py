"""policies.budget: the limits a run gets, whether its next model call may start, and what a
run stopped by its budget says; and `budget` in `.github/bot.yml`."""

from __future__ import annotations

import pytest

from policies.budget import (
    BudgetLimits,
    Spent,
    estimate_tokens,
    refusal,
    run_limits,
    stopped_summary,
)
from policies.config import ConfigError, parse_repo_config


@pytest.mark.parametrize(
    ("repo", "operator", "expected"),
    [
        pytest.param((None, None), (None, None), BudgetLimits(), id="none"),
        pytest.param((5000, None), (None, None), BudgetLimits(5000), id="repo-only"),
        pytest.param((None, None), (8000, 2.0), BudgetLimits(8000, 2.0), id="operator-only"),
        pytest.param((5000, 3.0), (8000, 2.0), BudgetLimits(5000, 2.0), id="smaller-of-each"),
        pytest.param((90000, 0.5), (8000, 2.0), BudgetLimits(8000, 0.5), id="repo-asks-more"),
    ],
)
def test_the_repository_is_capped_by_the_operator(
    repo: tuple[int | None, float | None],
    operator: tuple[int | None, float | None],
    expected: BudgetLimits,
) -> None:
    limits = run_limits(
        repo_tokens=repo[0],
        repo_cost=repo[1],
        operator_tokens=operator[0],
        operator_cost=operator[1],
        daily_tokens=None,
    )
    assert limits == expected
    assert limits.unlimited is (expected == BudgetLimits())


def test_the_daily_cap_is_the_operators_and_makes_a_budget() -> None:
    limits = run_limits(
        repo_tokens=None, repo_cost=None, operator_tokens=None, operator_cost=None, daily_tokens=9
    )
    assert limits == BudgetLimits(daily_tokens=9) and not limits.unlimited


@pytest.mark.parametrize(
    ("limits", "spent", "tokens", "cost", "expected"),
    [
        pytest.param(
            BudgetLimits(), Spent(10**9, 10.0**6, 10**9), 10**6, 5.0, None, id="unlimited"
        ),
        pytest.param(BudgetLimits(1000), Spent(600), 400, None, None, id="exactly-fits"),
        pytest.param(
            BudgetLimits(1000),
            Spent(600),
            401,
            None,
            "budget reached: the run's 1,000 tokens (used 600; the next model call would send "
            "about 401)",
            id="tokens",
        ),
        pytest.param(
            BudgetLimits(max_cost_usd=1.0), Spent(cost=0.5), 10, 0.5, None, id="cost-fits"
        ),
        pytest.param(
            BudgetLimits(max_cost_usd=1.0),
            Spent(cost=0.9),
            10,
            0.2,
            "budget reached: the run's $1.00 (spent $0.9000; the next model call would cost "
            "about $0.2000)",
            id="cost",
        ),
        pytest.param(
            BudgetLimits(max_cost_usd=1.0),
            Spent(cost=1.5),
            10,
            None,
            "budget reached: the run's $1.00 (spent $1.5000)",
            id="cost-spent-unpriced-call",
        ),
        pytest.param(
            BudgetLimits(daily_tokens=5000),
            Spent(tokens=10, daily=4990),
            11,
            None,
            "budget reached: this installation's 5,000 tokens for today (used 4,990; the next "
            "model call would send about 11)",
            id="daily",
        ),
        pytest.param(
            BudgetLimits(daily_tokens=5000), Spent(daily=4989), 11, None, None, id="daily-fits"
        ),
    ],
)
def test_refusal(
    limits: BudgetLimits, spent: Spent, tokens: int, cost: float | None, expected: str | None
) -> None:
    assert refusal(limits, spent, tokens=tokens, cost=cost) == expected


@pytest.mark.parametrize(
    ("chars", "tokens"), [(0, 1), (1, 1), (4, 1), (5, 2), (4000, 1000), (4001, 1001)]
)
def test_estimate_tokens_rounds_up(chars: int, tokens: int) -> None:
    assert estimate_tokens(chars) == tokens


@pytest.mark.parametrize(
    ("workflow", "said"),
    [
        ("fix", "Nothing was pushed and no pull request was opened"),
        ("ask", "The question was not answered"),
        ("triage", "The issue was not triaged"),
        ("my-own", "The run did not finish"),
    ],
)
def test_a_stopped_run_says_why_and_what_it_did_not_do(workflow: str, said: str) -> None:
    text = stopped_summary(workflow, "budget reached: the run's 10 tokens")
    assert text.startswith("**Stopped: budget reached: the run's 10 tokens.** " + said)
    assert "`budget` in `.github/bot.yml`" in text


def test_budget_keys_default_to_the_operators_caps() -> None:
    config = parse_repo_config("budget: {max_tokens: 40000, max_cost_usd: 2}\n")
    assert (config.budget.max_tokens, config.budget.max_cost_usd) == (40000, 2.0)
    assert parse_repo_config(None).budget.max_tokens is None
    assert parse_repo_config(None).budget.max_cost_usd is None
    assert parse_repo_config("budget: {max_cost_usd: 0.25}\n").budget.max_cost_usd == 0.25


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "budget:\n  max_tokens: 0\n",
            "line 2: budget.max_tokens: a budget must be more than 0, got 0",
            id="zero-tokens",
        ),
        pytest.param(
            "budget:\n  max_tokens: -5\n",
            "line 2: budget.max_tokens: a budget must be more than 0, got -5",
            id="negative-tokens",
        ),
        pytest.param(
            "budget:\n  max_cost_usd: 0\n",
            "line 2: budget.max_cost_usd: a budget must be more than 0, got 0",
            id="zero-cost",
        ),
        pytest.param(
            "budget:\n  max_cost_usd: -0.5\n",
            "line 2: budget.max_cost_usd: a budget must be more than 0, got -0.5",
            id="negative-cost",
        ),
        pytest.param(
            "budget:\n  max_cost_usd: .nan\n",
            "budget.max_cost_usd: a budget must be more than 0, got nan",
            id="nan",
        ),
        pytest.param(
            "budget:\n  max_cost_usd: .inf\n",
            "budget.max_cost_usd: a budget must be more than 0, got inf",
            id="inf",
        ),
        pytest.param(
            "budget:\n  max_tokens: 1.5\n",
            "budget.max_tokens: expected a whole number",
            id="fraction",
        ),
        pytest.param("budget:\n  max_cost_usd: true\n", "budget.max_cost_usd", id="bool"),
        pytest.param("budget:\n  tokens: 5\n", "budget.tokens: unknown key", id="unknown"),
        pytest.param(
            "commands:\n  per_hour: 0\n",
            "commands.per_hour: expected a number of at least 1, got 0",
            id="per-hour-zero",
        ),
    ],
)
def test_a_budget_of_zero_or_less_is_refused_with_a_clear_message(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_repo_config(text)
    assert expected in str(caught.value)
    assert "leave the key out" in str(caught.value) or "a budget must" not in expected
