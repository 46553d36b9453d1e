"""End to end: the noise controls of `.github/bot.yml` (`review.min_severity`,
`review.max_comments`, `review.quiet`, `review.auto_pause` and `@app resume`) through `bot serve`,
the fake GitHub and the fake model.

The pull request is `fixtures/repos/calc`; the fake model reports three findings on its first
version, in the order of their lines: a low one (line 17), a high one (18), a critical one
(22). One server serves the module and the tests run in order, as the pull request's story;
each sets the configuration on the default branch first. The last test reviews a real
starlette pull request from `../shared/real-repos` (skipped without it).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e_world import ADMIN_AND_WRITER, RealPull, ReviewWorld, needs_real, review_world
from tests.fakes._github_state import Call
from tests.fakes.github import FakeGitHub, commit_files
from tests.fakes.review_model import ReviewModel, Rule
from tests.review._calc import snapshot

pytestmark = pytest.mark.slow

World = ReviewWorld

LOW = "the running total could be named for what it sums"
HIGH = "mean divides by zero on an empty list"
CRITICAL = "clamp swaps its lower and upper bounds"
RULES = (
    Rule("total = sum(values)", LOW, severity="low", category="style"),
    Rule("return div(total, len(values))", HIGH, severity="high"),
    Rule("return max(hi, min(lo, x))", CRITICAL, severity="critical"),
)
ONE_RECEIVER = ("--receivers", "1")  # what is shown here does not depend on their number
NOTE = "Automatic reviews of this pull request are paused: 2 automatic reviews within 60 minutes"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("review-noise")
    model = ReviewModel(RULES)
    with review_world(root, model, permissions=ADMIN_AND_WRITER, serve_args=ONE_RECEIVER) as w:
        yield w


def configure(world: World, text: str) -> None:
    commit_files(world.calc.git_dir, "main", {".github/bot.yml": text}, "Configure the app")


def summary(world: World) -> dict[str, Any]:
    (found,) = [c for c in world.own_comments() if "### Review" in c["body"]]
    return found


def check_on(world: World, sha: str) -> dict[str, Any]:
    (run,) = [r for r in world.fake.check_runs.values() if r["head_sha"] == sha]
    return run


def writes(fake: FakeGitHub, since: int) -> list[Call]:
    """The requests since call `since` that changed something on GitHub (not a fetch, not a
    GraphQL query)."""
    return [
        c
        for c in fake.calls[since:]
        if c.method in ("POST", "PATCH", "PUT", "DELETE")
        and not c.path.endswith("/git-upload-pack")
        and not (c.path == "/graphql" and "mutation" not in str((c.json or {}).get("query")))
    ]


def decision_of(world: World, guid: str) -> tuple[str, str | None]:
    sql = "SELECT decision, reason FROM deliveries WHERE guid = ? AND decision IS NOT NULL"
    world.wait(f"a decision on {guid}", lambda: bool(world.query(sql, guid)))
    decision, reason = world.query(sql, guid)[0]
    return str(decision), reason


def push_readme(world: World, text: str) -> str:
    """A push that changes only the README (nothing the model finds anything in)."""
    files = {**snapshot("head1"), **snapshot("head2"), "README.md": f"# calc\n\n{text}\n"}
    sha = commit_files(world.calc.git_dir, "topic", files, f"Docs: {text}")
    return world.push(sha)


def test_min_severity_and_max_comments_with_three_findings(world: World) -> None:
    configure(world, "review:\n  min_severity: medium\n  max_comments: 1\n")
    world.review_opened()

    # One inline comment: the most severe, though the model reported it last.
    (comment,) = world.review_comments()
    assert CRITICAL in comment["body"] and comment["line"] == 22
    (review,) = world.reviews()
    # The high one, past the cap, is in the review's body; the low one is not posted at all.
    assert "**More findings**" in review["body"] and HIGH in review["body"]
    assert LOW not in review["body"]
    # The summary lists both in one collapsed list, the low one named for min_severity.
    body = summary(world)["body"]
    assert body.count("<details>") == 2  # the files reviewed, and this list
    listed = body.split("Not commented inline: 1 below review.min_severity (medium), 1 past")[1]
    listed = listed.split("</details>")[0]
    assert f"- **high** `calc/ops.py:18`: {HIGH}" in listed
    assert f"- **low** `calc/ops.py:17`: {LOW}" in listed
    assert "3 new" in body  # all three are remembered, and none is raised again
    world.notes["comment"] = comment


def test_quiet_posts_nothing_on_an_empty_follow_up(world: World) -> None:
    fake = world.fake
    configure(world, "review:\n  min_severity: medium\n  max_comments: 1\n  quiet: true\n")
    # A push that fixes the clamp changes a finding's state: it is published as ever.
    guid = world.push(world.calc.head2)
    _, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-3000:]
    body = summary(world)["body"]
    assert "1 fixed" in body
    # The low finding of the first review is listed again: a new summary does not lose it.
    assert "Not commented inline: 1 from earlier reviews below review.min_severity" in body
    assert f"- **low** `calc/ops.py:17`: {LOW} (since `{world.calc.head1[:12]}`)" in body
    assert fake.thread_of(world.notes["comment"]["id"])["resolved"] is True

    # A push with nothing new in it: no review, no edit of the summary, the check says why.
    before = copy.deepcopy(summary(world))  # the fake edits its comments in place
    reviews = len(world.reviews())
    calls = len(fake.calls)
    model_calls = world.model.calls["review"]
    # A review slower than the progress interval (3 s) shows its progress on the check only.
    world.model.review_delay = 3.5
    try:
        guid = push_readme(world, "Quiet.")
        _, status = world.finished(guid)
    finally:
        world.model.review_delay = 0.0
    assert status == "succeeded", world.log.read_text()[-3000:]
    sha = world.pull()["head"]["sha"]
    assert world.model.calls["review"] > model_calls  # the README was reviewed
    assert len(world.reviews()) == reviews
    assert summary(world) == before
    written = [(c.method, c.path.rsplit("/", 1)[-1]) for c in writes(fake, calls)]
    assert written in (
        [("POST", "check-runs")],  # created completed
        [("POST", "check-runs"), ("PATCH", str(check_on(world, sha)["id"]))],  # in progress first
    ), written
    check = check_on(world, sha)
    assert check["status"] == "completed" and check["conclusion"] == "success"
    assert "Quiet (`review.quiet`): nothing new since" in check["output"]["summary"]
    (outcome,) = world.query("SELECT outcome FROM runs WHERE delivery_id = ?", guid)[0]
    assert "Quiet (`review.quiet`)" in json.loads(outcome)["summary"]

    # A push during a quiet-held review supersedes it: neither writes the summary, since the
    # newer one finds nothing new in both pushes.
    world.model.review_delay = 1.5
    try:
        calls = world.model.calls["review"]
        slow = push_readme(world, "Quiet, slowly.")
        world.wait(
            "the first review to reach the model", lambda: world.model.calls["review"] > calls
        )
        fast = push_readme(world, "Quiet again.")
        _, slow_status = world.finished(slow)
        _, fast_status = world.finished(fast)
    finally:
        world.model.review_delay = 0.0
    assert (slow_status, fast_status) == ("skipped", "succeeded"), world.log.read_text()[-3000:]
    (outcome,) = world.query("SELECT outcome FROM runs WHERE delivery_id = ?", slow)[0]
    assert "**Superseded:**" in json.loads(outcome)["summary"]
    assert summary(world) == before and len(world.reviews()) == reviews

    # Asked for, a review always answers: the summary is written again.
    guid = world.command("@repo-agent review")
    _, status = world.finished(guid)
    assert status == "succeeded"
    assert summary(world)["body"] != before["body"]


def test_auto_pause_after_the_nth_push_and_resume(world: World) -> None:
    fake = world.fake
    configure(world, "review:\n  auto_pause:\n    pushes: 2\n    minutes: 60\n")
    for n in (1, 2):
        _, status = world.finished(push_readme(world, f"Push {n}."))
        assert status == "succeeded", world.log.read_text()[-3000:]
    notes = lambda: [c for c in world.own_comments() if NOTE in c["body"]]  # noqa: E731
    assert notes() == []
    reviewed = world.model.calls["review"]

    # The third automatic review within the hour pauses, with one short note.
    guid = push_readme(world, "Push 3.")
    _, status = world.finished(guid)
    assert status == "skipped"
    (note,) = notes()
    assert "`@repo-agent resume`" in note["body"] and "`@repo-agent review`" in note["body"]
    assert world.model.calls["review"] == reviewed

    # The next one is skipped without a word: the note is never posted twice.
    since = len(fake.calls)
    _, status = world.finished(push_readme(world, "Push 4."))
    assert status == "skipped" and notes() == [note]
    assert writes(fake, since) == []

    # Someone who may not write cannot resume them.
    decision, reason = decision_of(world, world.command("@repo-agent resume", user="alice"))
    assert decision == "skip" and (reason or "").startswith("no_permission: alice has 'none'")
    _, status = world.finished(push_readme(world, "Push 5."))
    assert status == "skipped" and world.model.calls["review"] == reviewed

    # `@app review` still reviews, once: the pull request stays paused.
    _, status = world.finished(world.command("@repo-agent review"))
    assert status == "succeeded" and world.model.calls["review"] > reviewed
    reviewed = world.model.calls["review"]
    _, status = world.finished(push_readme(world, "Push 6."))
    assert status == "skipped" and world.model.calls["review"] == reviewed

    # A writer resumes: the count starts afresh, so two more pushes are reviewed.
    _, status = world.finished(world.command("@repo-agent resume"))
    assert status == "succeeded"
    for n in (7, 8):
        _, status = world.finished(push_readme(world, f"Push {n}."))
        assert status == "succeeded", world.log.read_text()[-3000:]
    assert world.model.calls["review"] == reviewed + 2
    _, status = world.finished(push_readme(world, "Push 9."))
    assert status == "skipped"
    (again,) = notes()  # the same sticky note, edited for the new pause: still one
    assert again["id"] == note["id"]


@needs_real
def test_min_severity_on_a_real_pull_request(tmp_path_factory: pytest.TempPathFactory) -> None:
    pull = RealPull.clone(tmp_path_factory.mktemp("review-noise-real"), 867)
    # Low findings on each file's first added line; medium ones outside the diff.
    model = ReviewModel(generic=True, outside=True)
    with pull.serving(
        model,
        user="aviramha",
        # The configuration on the default branch, committed past the pull request's base.
        default_files={".github/bot.yml": "review:\n  min_severity: medium\n"},
        serve_args=ONE_RECEIVER,
    ) as world:
        world.review_opened()
        assert world.review_comments() == []  # every low one is below the threshold
        (review,) = world.reviews()
        assert (
            "**Outside the diff**" in review["body"] and "Check the new line" not in review["body"]
        )
        body = summary(world)["body"]
        assert "below review.min_severity (medium)" in body
        assert body.count("Check the new line in") >= 2
