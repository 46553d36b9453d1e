"""End to end: an iteration on the app's own pull request whose job is cut short after its push
(its reply in the thread meets the rate limit) is retried: the retry sees the head it pushed as its own,
pushes nothing more, replies once and publishes, instead of taking its own commit for a
person's push."""

from __future__ import annotations

import pytest

from tests.test_e2e_iterate import World, world

pytestmark = pytest.mark.slow

__all__ = ["world"]


def test_a_retried_iteration_takes_its_own_push_for_its_own(world: World) -> None:
    pushes = len(world.fake.pushes)
    started_on = world.head()
    # The thread's reply is written once the run has pushed: GitHub's rate limit on it outlasts
    # the client's waits, so the job is put back and runs again.
    world.fake.fail_next(
        "POST",
        "/repos/octo/hello/pulls/1/comments/*/replies",
        429,
        times=4,
        headers={"retry-after": "1"},
    )
    comment = {"path": "calc/ops.py", "line": 22, "body": "clamp swaps its bounds"}
    guid = world.review(comments=[comment])
    run_id, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-4000:]
    assert len(world.fake.pushes) == pushes + 1  # one push, by the first attempt
    assert world.git("rev-parse", f"{world.head()}~1").strip() == started_on
    summary = world.outcome(run_id)["summary"]
    assert "earlier attempt" in summary and "moved while this ran" not in summary
    (reply,) = world.replies_to(world.review_comments_by("maint")[-1]["id"])
    assert reply["body"].startswith(f"Addressed in `{world.head()[:7]}")
