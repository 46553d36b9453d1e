"""End to end: a `fix` asked in the app's own findings thread stops with BLOCKED in that
thread, and a writer's `decide` finishes it: the BLOCKED reply is marked answered where it
is (not looked for in the conversation alone), and the thread is resolved once the fix is on
the head, as a fix that never blocked resolves it. A `decide` from someone without write
access, in the same thread, does neither.

`bot serve` on the fake GitHub and the fake model of `tests/test_e2e_threads.py`; pull
request #2 is the app's own branch. The fix also pins a dependency, which the app does not
push without a writer's approval: that is the BLOCKED question.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bot.publish.render import parse_markers
from tests.e2e_world import ADMIN_AND_WRITER, ReviewWorld, review_world
from tests.fakes.fix_model import Edit, FixModel
from tests.fakes.review_model import CALC_RULES
from tests.test_e2e_threads import (
    MEAN_FIXED,
    OWN_BRANCH,
    ThreadModel,
    finding,
    in_thread,
    own_pull,
    replies_to,
)

pytestmark = pytest.mark.slow

World = ReviewWorld
PIN = "left-pad==1.3.0\n"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("thread-decide")
    edit = Edit(
        "pin-and-guard",
        {"calc/ops.py": MEAN_FIXED, "requirements.txt": PIN},
        "Guard mean and pin left-pad",
        plan=(("calc/ops.py", "modify"), ("requirements.txt", "add")),
    )
    model = ThreadModel(CALC_RULES, fixes=FixModel((edit,)))
    with review_world(root, model, permissions=ADMIN_AND_WRITER, prepare=own_pull) as w:
        yield w


def test_a_blocked_fix_in_a_thread_is_answered_there_and_resolves_it(world: World) -> None:
    guid = world.command("@repo-agent review", number=2)
    assert world.finished(guid)[1] == "succeeded", world.log.read_text()[-3000:]
    mean = finding(world, "mean divides by zero", number=2)
    pushes = len(world.fake.pushes)

    guid, _ = in_thread(world, "@repo-agent fix pin-and-guard", reply_to=mean["id"], number=2)
    blocked_id, status = world.finished(guid)
    assert status == "blocked", world.log.read_text()[-4000:]
    (reply,) = replies_to(world, mean["id"], number=2)
    assert "needs a decision" in reply["body"] and "requirements.txt" in reply["body"]
    assert len(world.fake.pushes) == pushes
    assert not world.fake.thread_of(mean["id"])["resolved"]

    # Someone without write access answers first: nothing runs, nothing is marked answered.
    runs = len(world.query("SELECT id FROM runs"))
    guid, _ = in_thread(world, "@repo-agent decide 1", reply_to=mean["id"], number=2, user="al")
    world.wait(
        f"the decision on {guid}",
        lambda: bool(
            world.query("SELECT 1 FROM deliveries WHERE guid = ? AND decision IS NOT NULL", guid)
        ),
    )
    assert len(world.query("SELECT id FROM runs")) == runs
    assert len(world.fake.pushes) == pushes
    assert all("**Answered**" not in r["body"] for r in replies_to(world, mean["id"], number=2))
    assert not world.fake.thread_of(mean["id"])["resolved"]

    guid, _ = in_thread(world, "@repo-agent decide 1", reply_to=mean["id"], number=2)
    follow_id, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-4000:]
    assert world.fake.pushes[-1].ref == f"refs/heads/{OWN_BRANCH}"
    assert len(world.fake.pushes) == pushes + 1

    replies = replies_to(world, mean["id"], number=2)
    (asked,) = [r for r in replies if parse_markers(r["body"]).run_id == blocked_id]
    assert "**Answered**" in asked["body"] and "To answer" not in asked["body"]
    assert follow_id in asked["body"]  # it links the run that acted on the answer
    thread = world.fake.thread_of(mean["id"])
    assert thread["resolved"] and thread["resolved_by"] == world.fake.slug
