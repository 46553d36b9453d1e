"""policies/ui_costs.py: tokens and cost per day, per workflow, per repository."""

from __future__ import annotations

import pytest

from policies.ui_costs import DAY, RunCost, costliest, per_day, per_key


def row(run: str, day: int, cost: float, *, repo: str = "o/a", workflow: str = "triage") -> RunCost:
    return RunCost(
        run_id=run,
        repo=repo,
        workflow=workflow,
        at=day * DAY + 60,
        input_tokens=100,
        output_tokens=10,
        cost=cost,
    )


ROWS = [
    row("r1", 10, 1.0),
    row("r2", 10, 0.5, workflow="review"),
    row("r3", 12, 2.0, repo="o/b", workflow="fix"),
    row("r4", 20, 9.0),  # outside the period below
]


def test_per_day_includes_empty_days_and_leaves_out_the_rest() -> None:
    days = per_day(ROWS, first_day=10, days=3)
    assert [(d.key, d.runs, d.cost) for d in days] == [
        ("10", 2, 1.5),
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


def test_costliest() -> None:
    assert [r.run_id for r in costliest(ROWS, 2)] == ["r4", "r3"]
    assert costliest(ROWS, 0) == []
