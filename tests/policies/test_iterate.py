"""Iterating on the app's own pull requests (`policies.iterate`), and how the trigger policy
routes it: which reviews and comments ask for an iteration, and what one iteration does."""

from __future__ import annotations

import dataclasses

import pytest

from policies.commands import parse_command
from policies.config import parse_repo_config
from policies.event import Event, Skip, SkipReason, Trigger
from policies.iterate import (
    MAX_COMMENTS,
    Go,
    Iteration,
    PullHead,
    ReviewFacts,
    ReviewNote,
    Stop,
    addressed_reply,
    asked,
    left_out_note,
    not_addressed_reply,
    plan,
)
from policies.triggers import decide, needs_permission
from tests.policies.test_triggers import load

SLUG = "repo-bot"
HEAD = "a" * 40
MOVED = "b" * 40


def own_review(body: str = "", state: str | None = "changes_requested", **fields: object) -> Event:
    """A review of the app's own `bot/` pull request in the fixture's repository."""
    event = load("pull_request_review.submitted")
    own: dict[str, object] = {
        "author_login": f"{SLUG}[bot]",
        "head_ref": "bot/fix-1-greet",
        "head_repo_full_name": event.repo_full_name,
    }
    return dataclasses.replace(
        event,
        comment_body=body,
        review_state=state,
        **{**own, **fields},  # type: ignore[arg-type]
    )


def own_pull_comment(body: str, author: str = f"{SLUG}[bot]") -> Event:
    event = load("issue_comment.created.review")
    return dataclasses.replace(event, comment_body=body, author_login=author)


def asked_of(event: Event) -> Iteration | None:
    body = event.comment_body or ""
    command = parse_command(body, app_slug=SLUG, slash_commands=False) if body else None
    return asked(event, command, app_slug=SLUG)


ASKED = [
    pytest.param(own_review(), Iteration("review", ""), id="changes-requested-no-body"),
    pytest.param(own_review("Please rename it."), Iteration("review", "Please rename it."), id="changes-requested-with-body"),
    pytest.param(own_review(state="commented"), Iteration("review", ""), id="commented"),
    pytest.param(own_review(state="COMMENTED"), Iteration("review", ""), id="state-any-case"),
    pytest.param(own_review("@repo-bot please rename"), Iteration("review", "@repo-bot please rename"), id="review-with-unknown-word"),
    pytest.param(own_review(state="approved"), None, id="approved"),
    pytest.param(own_review(state="dismissed"), None, id="dismissed"),
    pytest.param(own_review(state=None), None, id="no-state"),
    pytest.param(own_review("@repo-bot review"), None, id="review-gives-a-command"),
    pytest.param(own_review(author_login="alice"), None, id="someone-elses-pull"),
    pytest.param(own_review(head_ref="topic"), None, id="not-a-bot-branch"),
    pytest.param(own_review(head_repo_full_name="fork/Hello-World"), None, id="fork"),
    pytest.param(own_review(head_repo_full_name=None), None, id="fork-deleted"),
    pytest.param(own_review(action="edited"), None, id="edited"),
    pytest.param(own_pull_comment("@repo-bot please rename `greet`"), Iteration("comment", "@repo-bot please rename `greet`"), id="comment-unknown-word"),
    pytest.param(own_pull_comment("Rename it, @repo-bot"), Iteration("comment", "Rename it, @repo-bot"), id="comment-mention-after-text"),
    pytest.param(own_pull_comment("@repo-bot"), None, id="bare-mention-is-help"),
    pytest.param(own_pull_comment("@repo-bot help"), None, id="help-command"),
    pytest.param(own_pull_comment("@repo-bot fix the docs"), None, id="fix-command"),
    pytest.param(own_pull_comment("@repo-bot status"), None, id="status-command"),
    pytest.param(own_pull_comment("just a note"), None, id="not-addressed"),
    pytest.param(own_pull_comment("> @repo-bot rename"), None, id="quoted"),
    pytest.param(own_pull_comment("@repo-bot rename it", author="alice"), None, id="comment-on-someone-elses-pull"),
    pytest.param(dataclasses.replace(load("issue_comment.created.fix"), author_login=f"{SLUG}[bot]", comment_body="@repo-bot tidy"), None, id="comment-on-an-issue"),
    pytest.param(dataclasses.replace(load("pull_request_review_comment.created"), author_login=f"{SLUG}[bot]", comment_body="@repo-bot tidy"), None, id="review-comment-thread"),
]  # fmt: skip


@pytest.mark.parametrize(("event", "expected"), ASKED)
def test_asked(event: Event, expected: Iteration | None) -> None:
    assert asked_of(event) == expected


def test_a_writers_review_of_the_apps_pull_request_is_an_iteration_fix() -> None:
    event = own_review("Two things.")
    assert needs_permission(event, parse_repo_config(None), SLUG)
    decision = decide(event, parse_repo_config(None), app_slug=SLUG, permission="write")
    assert isinstance(decision, Trigger)
    assert (decision.workflow, decision.command, decision.args) == ("fix", "iterate", "Two things.")
    assert decision.comment_id == event.comment_id


@pytest.mark.parametrize("permission", ["read", "triage", "none", None])
def test_a_readers_review_gives_nothing(permission: str | None) -> None:
    decision = decide(own_review(), parse_repo_config(None), app_slug=SLUG, permission=permission)
    assert isinstance(decision, Skip) and decision.reason is SkipReason.NO_PERMISSION


@pytest.mark.parametrize(
    ("cfg", "event"),
    [
        pytest.param("fix: {enabled: false}", own_review(), id="fix-off-review"),
        pytest.param("commands: {enabled: false}", own_pull_comment("@repo-bot rename"), id="commands-off-comment"),
    ],
)  # fmt: skip
def test_iterations_follow_the_switches(cfg: str, event: Event) -> None:
    decision = decide(event, parse_repo_config(cfg), app_slug=SLUG, permission="write")
    assert isinstance(decision, Skip) and decision.reason is SkipReason.WORKFLOW_DISABLED


def test_commands_off_still_iterates_on_a_review() -> None:
    decision = decide(
        own_review(),
        parse_repo_config("commands: {enabled: false}"),
        app_slug=SLUG,
        permission="write",
    )
    assert isinstance(decision, Trigger) and decision.command == "iterate"


def test_commands_on_the_apps_pull_request_do_what_they_did() -> None:
    for body, workflow in (("@repo-bot review", "review"), ("@repo-bot", "help")):
        event = own_pull_comment(body)
        decision = decide(event, parse_repo_config(None), app_slug=SLUG, permission="write")
        assert isinstance(decision, Trigger) and (decision.workflow, decision.command) == (
            workflow,
            workflow,
        )


# --- what one iteration does -------------------------------------------------------------

PULL = PullHead("octo/hello", f"{SLUG}[bot]", "bot/fix-1-greet", HEAD, "octo/hello")
REVIEW = ReviewFacts(7, "maint", "CHANGES_REQUESTED", HEAD, "")
REVIEWED = Iteration("review", "")


def note(
    cid: int, path: str = "app.py", line: int | None = 1, *, resolved: bool = False
) -> ReviewNote:
    return ReviewNote(cid, path, line, f"comment {cid}", resolved=resolved)


def planned(
    *,
    pull: PullHead = PULL,
    review: ReviewFacts | None = REVIEW,
    comments: tuple[ReviewNote, ...] = (),
    done: int = 0,
    max_iterations: int = 5,
    iteration: Iteration = REVIEWED,
) -> Go | Stop:
    return plan(
        app_slug=SLUG,
        pull=pull,
        actor="maint",
        iteration=iteration,
        review=review,
        comments=comments,
        done=done,
        max_iterations=max_iterations,
    )


def test_every_unresolved_comment_is_asked_for_in_position_order() -> None:
    comments = (note(3, "b.py", 9), note(1, "a.py", 5), note(2, "a.py", 2), note(4, resolved=True))
    go = planned(comments=comments)
    assert isinstance(go, Go)
    assert [c.id for c in go.comments] == [2, 1, 3] and go.left_out == () and go.reviewer == "maint"
    assert go.request.startswith("Address every point of @maint's review")
    assert "(1) On `a.py` line 2: comment 2 (2) On `a.py` line 5: comment 1" in go.request
    assert "comment 4" not in go.request


def test_a_hundred_comments_take_the_first_thirty_and_name_the_rest() -> None:
    comments = tuple(note(i, f"f{i:03d}.py", i) for i in range(100, 0, -1))
    go = planned(comments=comments)
    assert isinstance(go, Go)
    assert [c.id for c in go.comments] == list(range(1, MAX_COMMENTS + 1))
    assert [c.id for c in go.left_out] == list(range(MAX_COMMENTS + 1, 101))
    text = left_out_note(go.left_out)
    assert text.startswith("70 more comments were not addressed")
    assert "`f031.py` line 31" in text and "`f050.py` line 50" in text
    assert "`f051.py`" not in text and text.endswith(
        "and 50 more. The next review can ask for them again."
    )
    assert left_out_note(()) == ""
    assert "`f031.py`" in left_out_note(go.left_out[:3]) and "more." not in left_out_note(
        go.left_out[:3]
    )


def test_a_long_comment_is_cut_in_the_request() -> None:
    go = planned(comments=(ReviewNote(1, "a.py", None, "x " * 3000),))
    assert isinstance(go, Go) and go.request.endswith(" …") and "`a.py`:" in go.request


def test_the_reviews_own_words_are_asked_for_too() -> None:
    go = planned(review=dataclasses.replace(REVIEW, body="Also update\nthe docs."))
    assert isinstance(go, Go) and "The review says: Also update the docs." in go.request


def test_a_comments_request_is_its_text() -> None:
    go = planned(review=None, iteration=Iteration("comment", "@repo-bot rename\n`greet`"))
    assert isinstance(go, Go)
    assert (go.request, go.comments, go.reviewer) == ("@repo-bot rename `greet`", (), "maint")


@pytest.mark.parametrize(
    ("done", "limit", "goes"),
    [
        (0, 5, True),
        (4, 5, True),
        (5, 5, False),
        (9, 5, False),
        (1, 2, True),
        (2, 2, False),
        (0, 0, False),
    ],
)
def test_max_iterations(done: int, limit: int, goes: bool) -> None:
    decided = planned(comments=(note(1),), done=done, max_iterations=limit)
    assert isinstance(decided, Go) is goes
    if not goes:
        assert isinstance(decided, Stop) and not decided.quiet
        assert f"has had {done} iterations" in decided.reason
        assert f"`fix.max_iterations` in `.github/bot.yml` allows ({limit})" in decided.reason


def test_a_head_that_moved_since_the_review_is_left_alone() -> None:
    decided = planned(pull=dataclasses.replace(PULL, head_sha=MOVED), comments=(note(1),))
    assert isinstance(decided, Stop) and not decided.quiet
    assert f"reviewed `{HEAD[:12]}`, now `{MOVED[:12]}`" in decided.reason
    assert "kept as it is" in decided.reason
    # A comment's request has no reviewed commit: it is made on the head as it is.
    comment = planned(pull=dataclasses.replace(PULL, head_sha=MOVED), review=None,
                      iteration=Iteration("comment", "rename it"))  # fmt: skip
    assert isinstance(comment, Go)


@pytest.mark.parametrize(
    ("pull", "why"),
    [
        pytest.param(dataclasses.replace(PULL, head_repo="fork/hello"), "in a fork", id="fork"),
        pytest.param(dataclasses.replace(PULL, head_repo=None), "in a fork", id="fork-deleted"),
        pytest.param(dataclasses.replace(PULL, head_ref="topic"), "`topic` is not a `bot/` branch", id="not-bot"),
        pytest.param(dataclasses.replace(PULL, author="alice"), "is not a `bot/` branch the app opened", id="not-the-apps"),
    ],
)  # fmt: skip
def test_only_the_apps_own_pull_requests(pull: PullHead, why: str) -> None:
    decided = planned(pull=pull, comments=(note(1),))
    assert isinstance(decided, Stop) and why in decided.reason


def test_all_resolved_is_quiet_for_a_comment_review_and_said_for_changes_requested() -> None:
    resolved = (note(1, resolved=True),)
    quiet = planned(review=dataclasses.replace(REVIEW, state="commented"), comments=resolved)
    assert isinstance(quiet, Stop) and quiet.quiet
    words = dataclasses.replace(REVIEW, state="COMMENTED", body="Looks good overall.")
    only_words = planned(review=words)
    assert isinstance(only_words, Stop) and only_words.quiet  # no inline comment: not a request
    said = planned(comments=resolved)
    assert isinstance(said, Stop) and not said.quiet and "every comment" in said.reason
    with_body = planned(review=dataclasses.replace(REVIEW, body="Rename it."), comments=resolved)
    assert isinstance(with_body, Go) and with_body.comments == ()


def test_replies() -> None:
    assert (
        addressed_reply("abc1234def", 1) == "Addressed in `abc1234`: one commit for this comment."
    )
    assert addressed_reply("abc1234def", 3).endswith("for the 3 comments of this review.")
    assert not_addressed_reply("blocked", "").startswith("Not addressed: the change needs a")
    assert "no change that was pushed" in not_addressed_reply("no_changes", "")
    assert not_addressed_reply("failed", "PushRefused: x") == (
        "Not addressed: the fix did not finish: PushRefused: x."
    )
    assert not_addressed_reply("failed", "") == "Not addressed: the fix did not finish."
