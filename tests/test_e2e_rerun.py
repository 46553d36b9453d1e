"""End to end: Re-run on the app's check runs through `bot serve`, the fake GitHub and model.

Pull request #1 comes from a fork, so GitHub lists no pull request in its check's deliveries
and the app finds it by the head's SHA; #2 is a branch of the repository, listed. The first
review of #1 fails (GitHub answers one of its reads with 404), and a maintainer presses Re-run on its check. The
deliveries are the fake's own (`FakeGitHub.rerequest_check_run` / `rerequest_check_suite`),
shaped as GitHub sends them. One server serves the module; the tests run in order.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from tests.e2e_world import ReviewWorld, head_files
from tests.fakes.github import FakeGitHub
from tests.fakes.review_model import CALC_RULES, ReviewModel
from tests.review._calc import build_calc

pytestmark = pytest.mark.slow

World = ReviewWorld


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("rerun-e2e")
    calc = build_calc(root)
    fake = FakeGitHub()
    fake.add_repo("octo", "hello", calc.git_dir)
    fake.add_installation(42, "octo", ["octo/hello"])
    fake.set_permission("octo", "hello", "maint", "write")
    fake.set_permission("octo", "hello", "visitor", "read")
    anyio.run(
        lambda: fake.add_pull(
            "octo", "hello", head="topic", head_repo="stranger/hello", user="stranger"
        )
    )
    model = ReviewModel(CALC_RULES, files=head_files(calc.git_dir, fake))
    with World.serving(root, fake, model, model=model, calc=calc) as w:
        yield w


def decision_of(world: World, guid: str) -> tuple[str, str | None]:
    sql = "SELECT decision, reason FROM deliveries WHERE guid = ? AND decision IS NOT NULL"
    world.wait(f"a decision on {guid}", lambda: bool(world.query(sql, guid)))
    decision, reason = world.query(sql, guid)[0]
    return str(decision), reason


def our_checks(world: World, head: str) -> list[dict[str, Any]]:
    runs = world.fake.check_runs.values()
    return [r for r in runs if r["head_sha"] == head and r["app"]["id"] == world.fake.app_id]


def lookups(world: World) -> int:
    return len(world.fake.calls_to("GET", "/repos/octo/hello/pulls"))


def test_rerun_after_a_failed_review_reviews_that_head(world: World) -> None:
    fake, head = world.fake, world.calc.head1
    # GitHub fails one read the review needs: the review fails, and its check with it.
    fake.fail_next("GET", "/repos/octo/hello/pulls/1/comments", 404, message="Not Found")
    _, status = world.finished(world.post("pull_request", world.pull_payload("opened")))
    assert status == "failed"
    (failed,) = copy.deepcopy(our_checks(world, head))
    assert (failed["status"], failed["conclusion"]) == ("completed", "failure")
    assert world.reviews() == []

    payload = fake.rerequest_check_run(failed["id"], "maint")
    assert payload["check_run"]["pull_requests"] == []  # a fork's head: GitHub lists none
    before = lookups(world)
    guid = world.post("check_run", payload)
    _, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-3000:]
    assert decision_of(world, guid) == ("trigger", "review")
    assert lookups(world) == before + 1  # the open pull requests, compared by head

    (review,) = world.reviews()
    assert review["commit_id"] == head
    older, newer = our_checks(world, head)
    assert older == failed  # left as it was
    assert newer["status"] == "completed" and newer["name"] == "repo-agent: review"
    (summary,) = world.own_comments()
    assert "### Review" in summary["body"]
    world.notes["latest"] = newer


def test_a_second_click_runs_again_and_the_same_body_replayed_does_not(world: World) -> None:
    fake, head = world.fake, world.calc.head1
    payload = fake.rerequest_check_run(world.notes["latest"]["id"], "maint")
    first = world.post("check_run", payload)
    _, status = world.finished(first)
    assert status == "succeeded", world.log.read_text()[-3000:]
    checks = our_checks(world, head)
    assert len(checks) == 3 and checks[-1]["status"] == "completed"
    writes = len(fake.writes())

    replayed = world.post("check_run", payload)  # the same bytes under another GUID
    assert decision_of(world, replayed) == (
        "skip",
        f"replayed: delivery {first} asked for the same review",
    )
    assert world.query("SELECT count(*) FROM runs WHERE delivery_id = ?", replayed) == [(0,)]
    assert len(our_checks(world, head)) == 3 and len(fake.writes()) == writes

    again = world.post("check_run", fake.rerequest_check_run(checks[-1]["id"], "maint"))
    _, status = world.finished(again)
    assert status == "succeeded"
    assert len(our_checks(world, head)) == 4
    world.notes["latest"] = our_checks(world, head)[-1]


def test_another_apps_check_and_a_readers_click_post_nothing(world: World) -> None:
    fake = world.fake
    latest = world.notes["latest"]
    theirs = copy.deepcopy(fake.rerequest_check_run(latest["id"], "maint"))
    other = {"id": 9999, "slug": "other-ci", "name": "Other CI"}
    theirs["check_run"]["app"] = theirs["check_run"]["check_suite"]["app"] = other
    theirs["check_run"]["name"] = "Other CI"
    reader = fake.rerequest_check_run(latest["id"], "visitor")
    writes, before = len(fake.writes()), lookups(world)

    foreign = world.post("check_run", theirs)
    assert decision_of(world, foreign) == (
        "skip",
        f"not_our_check: check_run {latest['id']} belongs to App 9999",
    )
    assert lookups(world) == before  # nothing is looked up for another App's check
    read_only = world.post("check_run", reader)
    decision, reason = decision_of(world, read_only)
    assert decision == "skip" and reason is not None
    assert reason.startswith("no_permission: visitor has 'read' permission")

    runs = world.query("SELECT count(*) FROM runs WHERE delivery_id IN (?, ?)", foreign, read_only)
    assert runs == [(0,)]
    assert len(fake.writes()) == writes
    assert our_checks(world, world.calc.head1)[-1]["id"] == latest["id"]


def test_rerun_all_checks_on_a_branchs_suite_reviews_its_pull_request(world: World) -> None:
    fake, head = world.fake, world.calc.head2
    anyio.run(lambda: fake.add_pull("octo", "hello", head="next", user="alice", number=2))
    _, status = world.finished(world.post("pull_request", world.pull_payload("opened", 2)))
    assert status == "succeeded", world.log.read_text()[-3000:]
    (check,) = our_checks(world, head)

    payload = fake.rerequest_check_suite(check["check_suite"]["id"], "maint")
    assert [p["number"] for p in payload["check_suite"]["pull_requests"]] == [2]
    before = lookups(world)
    guid = world.post("check_suite", payload)
    _, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-3000:]
    (run_number,) = world.query("SELECT number FROM runs WHERE delivery_id = ?", guid)[0]
    assert run_number == 2
    assert lookups(world) == before  # the payload named the pull request
    assert len(our_checks(world, head)) == 2
