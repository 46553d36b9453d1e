"""End to end on a real pull request: starlette's #867 from `../shared/real-repos`, whose review
stops to ask, then resumed by `decide` (skipped without `../shared`; test_e2e_resume_review.py
tells the whole story on `fixtures/repos/calc`)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.e2e_world import RealPull, ReviewWorld, needs_real
from tests.fakes.review_model import ReviewModel
from tests.test_e2e_resume_review import QUESTION

World = ReviewWorld
pytestmark = [pytest.mark.slow, needs_real]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    pull = RealPull.clone(tmp_path_factory.mktemp("resume-real"), 867)
    model = ReviewModel(generic=True, outside=True, blocked=dict(QUESTION))
    with pull.serving(model, user="aviramha") as w:
        yield w


def test_a_real_blocked_review_resumed_by_decide(world: World) -> None:
    guid = world.post("pull_request", world.pull_payload("opened"))
    blocked_id, status = world.finished(guid)
    assert status == "blocked", world.log.read_text()[-4000:]
    (review,) = world.reviews()
    inline = len(world.review_comments())
    assert inline > 0
    reviews, verifies = world.model.calls["review"], world.model.calls["verify"]

    guid = world.command(f"@{world.fake.slug} decide 1", user="octo")
    follow_id, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-4000:]
    assert (world.model.calls["review"], world.model.calls["verify"]) == (reviews, verifies)
    first, follow = world.own_comments()
    match = re.search(r"replayed (\d+) of (\d+) agent calls", follow["body"])
    assert match is not None and int(match.group(1)) == reviews + verifies
    assert int(match.group(2)) == reviews + verifies + 1
    assert "**Answered**" in first["body"] and follow_id in first["body"]
    assert "bot:review-state" in first["body"] and blocked_id in first["body"]
    assert world.reviews() == [review] and len(world.review_comments()) == inline
