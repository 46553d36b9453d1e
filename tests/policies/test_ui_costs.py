"""policies/ui_costs.py: tokens and cost per day, per workflow, per repository."""

from __future__ import annotations

import pytest

from policies.ui_costs import Usage, day_of, per_day, per_key, stacks


def usage(
    day: int, cost: float, *, repo: str = "o/a", workflow: str = "triage", runs: int = 1
) -> Usage:
    return Usage(
        day=day,
        repo=repo,
        workflow=workflow,
        runs=runs,
        input_tokens=100,
        output_tokens=10,
        cost=cost,
    )


ROWS = [
    usage(10, 1.0, runs=2),
    usage(10, 0.5, workflow="review"),
    usage(12, 2.0, repo="o/b", workflow="fix"),
    usage(20, 9.0),  # outside the period below
]


def test_per_day_includes_empty_days_and_leaves_out_the_rest() -> None:
    days = per_day(ROWS, first_day=10, days=3)
    assert [(d.key, d.runs, d.cost) for d in days] == [
        ("10", 3, 1.5),
        ("11", 0, 0.0),
        ("12", 1, 2.0),
    ]
    assert days[0].tokens == 220


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        pytest.param("workflow", [("triage", 10.0), ("fix", 2.0), ("review", 0.5)], id="workflow"),
        pytest.param("repo", [("o/a", 10.5), ("o/b", 2.0)], id="repo"),
    ],
)
def test_per_key_is_costliest_first(key: str, expected: list[tuple[str, float]]) -> None:
    assert [(t.key, t.cost) for t in per_key(ROWS, key)] == expected


def test_per_key_refuses_another_key() -> None:
    with pytest.raises(ValueError):
        per_key(ROWS, "day")


@pytest.mark.parametrize(
    ("ts", "day"),
    [
        pytest.param(0.0, 0, id="epoch"),
        pytest.param(86399.9, 0, id="last-second"),
        pytest.param(86400.0, 1, id="midnight"),
    ],
)
def test_day_of(ts: float, day: int) -> None:
    assert day_of(ts) == day


def test_stacks_per_workflow_largest_first() -> None:
    names, values = stacks(ROWS, 10, 3, key="workflow", measure="cost")
    assert names == ["fix", "triage", "review"]
    assert values == [[0.0, 1.0, 0.5], [0.0, 0.0, 0.0], [2.0, 0.0, 0.0]]


def test_stacks_of_tokens_per_repository() -> None:
    names, values = stacks(ROWS, 12, 1, key="repo", measure="tokens")
    assert names == ["o/b"] and values == [[110.0]]


def test_stacks_refuse_another_measure() -> None:
    with pytest.raises(ValueError):
        stacks(ROWS, 0, 1, key="workflow", measure="calls")
