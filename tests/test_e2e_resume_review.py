"""End to end: `decide` resumes a BLOCKED review, through `bot serve`, the fake GitHub and model.

Pull request #1 is `fixtures/repos/calc`'s first version, in a repository whose review check
fails on open high findings. The fake model's summary advisor
stops every review with a BLOCKED question (is the public `clamp` signature change
intended?) unless its prompt carries a maintainer's decision. The story, in order: the review
posts its findings and stops to ask; a reader's `decide` does nothing; a writer's `decide`
resumes it at the commit it read, replaying its reviewer and verifier calls from the
journal, and the advisor is asked again with the decision; a second `decide` is told the
question was answered; a `decide` on a review whose head moved since it asked is refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from tests.e2e_world import ReviewWorld, review_world
from tests.fakes.gitrepo import commit_files
from tests.fakes.review_model import CALC_RULES, ReviewModel
from tests.review._calc import snapshot

pytestmark = pytest.mark.slow

World = ReviewWorld

QUESTION = {
    "decision": "Is changing the public signature of `clamp` intended?",
    "why": "Callers outside this repository break when it changes.",
    "options": ["Yes, it is intended", "No, keep the old signature"],
    "default": "No, keep the old signature",
    "risk": "Breaking every caller of `clamp`.",
}
PEOPLE = {"octo": "admin", "maint": "write", "reader": "read"}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("resume-review")
    model = ReviewModel(CALC_RULES, blocked=dict(QUESTION))
    config = {".github/bot.yml": "review:\n  fail_on: high\n"}
    with review_world(root, model, permissions=PEOPLE, default_files=config) as w:
        yield w


def _decided(world: World, guid: str) -> None:
    world.wait(
        f"the decision on {guid}",
        lambda: bool(
            world.query("SELECT 1 FROM deliveries WHERE guid = ? AND decision IS NOT NULL", guid)
        ),
    )


def _checks(world: World, sha: str) -> list[dict[str, Any]]:
    return [r for r in world.fake.check_runs.values() if r["head_sha"] == sha]


def _outcome(world: World, run_id: str) -> dict[str, Any]:
    (raw,) = world.query("SELECT outcome FROM runs WHERE id = ?", run_id)[0]
    return dict(json.loads(raw))


def test_a_review_that_needs_a_decision_posts_its_findings_and_asks(world: World) -> None:
    guid = world.post("pull_request", world.pull_payload("opened"))
    run_id, status = world.finished(guid)
    assert status == "blocked", world.log.read_text()[-4000:]
    world.notes["blocked"] = run_id
    (review,) = world.reviews()
    assert review["commit_id"] == world.calc.head1
    (summary,) = world.own_comments()
    assert f"@{world.fake.slug} decide 2" in summary["body"]  # the default
    assert "bot:review-state" in summary["body"]
    (check,) = _checks(world, world.calc.head1)
    assert check["conclusion"] == "neutral"
    assert world.model.calls["summary"] == 1


def test_a_readers_decide_runs_nothing(world: World) -> None:
    runs = len(world.query("SELECT id FROM runs"))
    calls = sum(world.model.calls.values())
    guid = world.command(f"@{world.fake.slug} decide 1", user="reader")
    _decided(world, guid)
    assert len(world.query("SELECT id FROM runs")) == runs
    assert len(world.own_comments()) == 1
    assert sum(world.model.calls.values()) == calls


def test_decide_resumes_the_review_with_replays(world: World) -> None:
    before = dict(world.model.calls)
    guid = world.command(f"@{world.fake.slug} decide 1")
    follow_id, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-4000:]

    # Only the advisor, who asked, is asked again; the reviewers and verifiers replay.
    assert world.model.calls["review"] == before["review"]
    assert world.model.calls["verify"] == before["verify"]
    assert world.model.calls["summary"] == before["summary"] + 1
    assert world.model.calls.get("suggest", 0) == before.get("suggest", 0)
    asked = world.model.summaries[-1]
    assert 'source="decision" author="maint"' in asked
    assert "Yes, it is intended" in asked and QUESTION["decision"].replace("`", "'") in asked

    comments = world.own_comments()
    assert len(comments) == 2
    first, follow = comments
    match = re.search(r"replayed (\d+) of (\d+) agent calls", follow["body"])
    assert match is not None, follow["body"]
    replayed, total = int(match.group(1)), int(match.group(2))
    assert replayed > 0 and total == replayed + 1
    assert "**Findings:**" in follow["body"] and "calc/ops.py" in follow["body"]
    assert "The change adds functions" in follow["body"]
    # The question's comment shows the answer, links the follow-up and keeps the memory line.
    assert "**Answered**" in first["body"] and follow_id in first["body"]
    assert "bot:review-state" in first["body"]
    # Nothing is posted twice: the findings stay in the one review of the blocked run.
    assert len(world.reviews()) == 1
    # The follow-up's check on the same head ends with the review's own conclusion: open
    # high findings and `fail_on: high`.
    done = [c for c in _checks(world, world.calc.head1) if c["external_id"] == follow_id]
    assert len(done) == 1 and done[0]["conclusion"] == "failure"
    assert done[0]["name"] == f"{world.fake.slug}: review"
    assert _outcome(world, follow_id)["workflow"] == "review"


def test_a_second_decide_does_not_run_it_again(world: World) -> None:
    calls = sum(world.model.calls.values())
    reviews = len(world.reviews())
    guid = world.command(f"@{world.fake.slug} decide 2")
    _, status = world.finished(guid)
    assert status == "skipped"
    assert sum(world.model.calls.values()) == calls
    assert len(world.reviews()) == reviews
    reply = world.own_comments()[-1]["body"]
    assert "was already answered" in reply and world.notes["blocked"] in reply


def test_decide_after_the_head_moved_is_refused(world: World) -> None:
    fr = world.fake.repos["octo/hello"]
    commit_files(world.calc.git_dir, "other", snapshot("head1"), "Add mean", base="main")
    pull = anyio.run(
        lambda: world.fake.add_pull("octo", "hello", head="other", user="alice", title="Mean")
    )
    number = int(pull["number"])
    guid = world.post("pull_request", world.pull_payload("opened", number))
    blocked_id, status = world.finished(guid)
    assert status == "blocked", world.log.read_text()[-4000:]
    asked_at = fr.pulls[number]["head"]["sha"]
    moved = commit_files(world.calc.git_dir, "other", {"NOTES.md": "later\n"}, "Later")
    anyio.run(world.fake.push_pull, "octo", "hello", number, moved)  # no delivery: no review

    calls = sum(world.model.calls.values())
    guid = world.command(f"@{world.fake.slug} decide 1", number=number)
    _, status = world.finished(guid)
    assert status == "skipped"
    assert sum(world.model.calls.values()) == calls
    reply = world.own_comments(number)[-1]["body"]
    assert "moved" in reply and asked_at[:12] in reply and moved[:12] in reply
    assert "@" + world.fake.slug + " review" in reply
    first = world.own_comments(number)[0]["body"]
    assert blocked_id in first and "**Answered**" not in first
    assert _checks(world, moved) == []
