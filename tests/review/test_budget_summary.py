"""What a review stopped by its budget says (`bot.workflows.review.budget`)."""

from __future__ import annotations

from typing import Any

import pytest

from bot.workflows.review.budget import SHOWN_PATHS, budget_line, budget_of


@pytest.mark.parametrize(
    "review",
    [
        pytest.param({}, id="none"),
        pytest.param({"budget": "spent"}, id="not-a-mapping"),
        pytest.param({"budget": {"units": 3}}, id="no-reason"),
        pytest.param({"budget": {"reason": 7}}, id="reason-not-text"),
    ],
)
def test_anything_but_a_budget_record_is_none(review: dict[str, Any]) -> None:
    assert budget_of(review) is None


def test_a_budget_record_is_checked_field_by_field() -> None:
    raw = {
        "reason": "budget reached: the run's 10 tokens",
        "units": True,
        "reviewed": -1,
        "not_reviewed": ["a.py", 3, "b.py"],
        "not_done": "the summary",
    }
    assert budget_of({"budget": raw}) == {
        "reason": "budget reached: the run's 10 tokens",
        "units": 0,
        "reviewed": 0,
        "not_reviewed": ["a.py", "b.py"],
        "not_done": [],
    }


def test_the_line_says_how_far_it_got_what_it_left_and_why() -> None:
    budget = {
        "reason": "budget reached: the run's 4,500 tokens",
        "units": 7,
        "reviewed": 3,
        "not_reviewed": ["src/a.py", "weird `name`.py"],
        "not_done": ["suggested fixes", "the summary"],
    }
    line = budget_line(budget)
    assert line.startswith("**Budget reached:** 3 of 7 units reviewed; not reviewed: `src/a.py`, ")
    assert "; not done: suggested fixes, the summary." in line
    assert "(budget reached: the run's 4,500 tokens)" in line
    assert "weird" in line and "``" in line  # a name with a backtick stays one code span


def test_a_long_list_is_cut_and_counted() -> None:
    paths = [f"f{n}.py" for n in range(SHOWN_PATHS + 5)]
    line = budget_line(
        {"reason": "r", "units": 60, "reviewed": 1, "not_reviewed": paths, "not_done": []}
    )
    assert "`f49.py` and 5 more." in line and "`f50.py`" not in line
