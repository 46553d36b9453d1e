"""End to end: budgets that stop a review, never silently, through `bot serve`.

The `fixtures/repos/calc` pull request, with `budget.max_tokens` and `commands.per_hour` in
`.github/bot.yml` on the default branch, and starlette's #867 from `../shared/real-repos`
(#16, skipped without it). The fake model (`tests.fakes.review_model`) counts its requests per role.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.e2e_world import ADMIN_AND_WRITER, RealPull, ReviewWorld, needs_real, review_world
from tests.fakes.review_model import CALC_RULES, ReviewModel

pytestmark = pytest.mark.slow

BUDGET = 4_500
PER_HOUR = 4
LIMITED = "commands in this repository within an hour"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReviewWorld]:
    root = tmp_path_factory.mktemp("review-budget")
    config = f"budget:\n  max_tokens: {BUDGET}\ncommands:\n  per_hour: {PER_HOUR}\n"
    with review_world(
        root,
        ReviewModel(CALC_RULES),
        permissions=ADMIN_AND_WRITER,
        default_files={".github/bot.yml": config},
        serve_args=("--receivers", "1"),
    ) as w:
        yield w


def test_a_budget_stops_the_review_after_its_first_unit_and_says_so(world: ReviewWorld) -> None:
    """4,500 tokens: the first unit (`calc/ops.py` and three small files) is reviewed and
    verified; the second (`tests/test_mean.py`) would pass the budget, so its reviewer is
    refused before any request, and nothing after it is asked for (no fix, no summary)."""
    world.review_opened()

    # The model got exactly the first unit's review and verification, and nothing after.
    assert dict(world.model.calls) == {"review": 1, "verify": 1}
    assert len(world.llm.bodies) == 2
    assert world.model.reviewed_paths == [["calc/ops.py", "calc/cli.py", "check.py", "README.md"]]

    # What it verified is posted; what it did not review is said, plainly.
    assert len(world.reviews()) == 1
    assert {c["path"] for c in world.review_comments()} == {"calc/ops.py"}
    (summary,) = world.own_comments()
    body = summary["body"]
    assert (
        "**Budget reached:** 1 of 2 units reviewed; not reviewed: `tests/test_mean.py`; "
        "not done: suggested fixes, the summary." in body
    ), body
    assert "budget reached: the run's 4,500 tokens" in body
    assert "Files reviewed: 4 · not reviewed: 1" in body
    assert "`tests/test_mean.py`: not reviewed: the run's budget was reached" in body
    (used,) = world.query("SELECT input_tokens + output_tokens FROM runs")
    assert 0 < used[0] <= BUDGET

    # Not everything was reviewed: the check is neutral, never a success.
    (check,) = [r for r in world.fake.check_runs.values() if r["head_sha"] == world.calc.head1]
    assert (check["status"], check["conclusion"]) == ("completed", "neutral")


def test_the_fifth_command_in_an_hour_gets_one_reply_and_the_sixth_none(
    world: ReviewWorld,
) -> None:
    """`commands.per_hour: 4`: maint's four `status` commands are answered; the fifth gets
    the one short reply, the sixth nothing at all, and neither starts a run."""
    for _ in range(PER_HOUR):
        _, status = world.finished(world.command("@repo-agent status"))
        assert status == "succeeded"
    runs = len(world.query("SELECT id FROM runs"))

    fifth = world.command("@repo-agent status")
    world.wait("the reply", lambda: any(LIMITED in c["body"] for c in world.own_comments()))
    sixth = world.command("@repo-agent status")

    def handled(guid: str) -> bool:
        return world.query("SELECT status FROM jobs WHERE delivery_id = ?", guid) == [("done",)]

    world.wait("the sixth command", lambda: handled(sixth) and handled(fifth))
    replies = [c for c in world.own_comments() if LIMITED in c["body"]]
    assert len(replies) == 1, replies
    assert replies[0]["body"].count("@maint, that is more than 4 commands") == 1
    decisions = world.query(
        "SELECT reason FROM deliveries WHERE guid IN (?, ?) ORDER BY guid", fifth, sixth
    )
    assert [r[0].split(":")[0] for r in decisions] == ["rate_limited", "rate_limited"]
    assert "maint gave 6 commands here within an hour; the limit is 4" in decisions[1][0]
    assert len(world.query("SELECT id FROM runs")) == runs

    # Another person is not limited by maint's commands.
    _, status = world.finished(world.command("@repo-agent status", user="octo"))
    assert status == "succeeded"


@needs_real
def test_a_budget_stops_a_real_pull_requests_review_part_way(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """starlette's #16 (eight files), with 8,000 tokens: the units reviewed before the budget
    are posted, the rest named, and no model request after the refused one."""
    pull = RealPull.clone(tmp_path_factory.mktemp("review-budget-real"), 16)
    model = ReviewModel(generic=True, outside=True)
    with pull.serving(
        model,
        user="tomchristie",
        commits=(-1, -1),
        default_files={".github/bot.yml": "budget:\n  max_tokens: 8000\n"},
        serve_args=("--receivers", "1"),
    ) as w:
        w.review_opened()
        comments = w.own_comments()
        assert len(comments) == 1, [c["body"][:300] for c in comments]
        body = comments[0]["body"]
        found = re.search(
            r"\*\*Budget reached:\*\* (\d+) of (\d+) units reviewed; not reviewed: ", body
        )
        assert found is not None, body
        reviewed, units = int(found[1]), int(found[2])
        assert 0 < reviewed < units
        # Each unit reviewed is one reviewer and at most one verifier request; the refused
        # unit's reviewer may have been sent (its verifier then refused), nothing after it.
        assert model.calls["summary"] == model.calls["suggest"] == 0
        assert len(w.llm.bodies) == model.calls["review"] + model.calls["verify"]
        assert model.calls["review"] in (reviewed, reviewed + 1)
        named = {p for paths in model.reviewed_paths[:reviewed] for p in paths}
        assert named and all(f"`{p}`: not reviewed" not in body for p in named)
        (check,) = [r for r in w.fake.check_runs.values() if r["head_sha"] == w.calc.head1]
        assert check["conclusion"] == "neutral"
