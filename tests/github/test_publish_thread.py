"""A command in a review thread is answered in that thread (bot/publish/thread_reply.py through
the Publisher), against the fake GitHub, which refuses replies to replies as GitHub does."""

from __future__ import annotations

from typing import Any

import pytest

from bot.github.client import InstallationClient
from bot.publish.publisher import Publisher
from bot.publish.render import parse_markers
from policies.outcome import Blocked, Outcome
from policies.thread_target import FIRST_COMMENT_GONE
from tests.fakes.github import FakeGitHub, commit_files
from tests.github.test_publish import RUN, client, fake, outcome, progress, writes

__all__ = ["client", "fake"]  # the fixtures, shared with test_publish

pytestmark = pytest.mark.anyio


@pytest.fixture
async def pull(fake: FakeGitHub) -> dict[str, Any]:
    bare = fake.repos["octo/hello"].git_dir
    commit_files(bare, "topic", {"src/app.py": "print('hello')\n"}, "Greet", base="main")
    return await fake.add_pull("octo", "hello", head="topic", user="alice")


def in_thread(
    client: InstallationClient, fake: FakeGitHub, comment: dict[str, Any], **kw: Any
) -> Publisher:
    options: dict[str, Any] = {"run_id": RUN, "kind": "ask", "number": 2}
    options.update(kw)
    return Publisher(
        client,
        bot_login=fake.bot_login,
        command_comment_id=comment["id"],
        command_comment_kind="review_comment",
        **options,
    )


def replies(fake: FakeGitHub, number: int = 2) -> list[dict[str, Any]]:
    return [
        c
        for c in fake.repos["octo/hello"].review_comments.get(number, [])
        if c["user"]["login"] == fake.bot_login
    ]


def ask(fake: FakeGitHub, pull: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return fake.add_review_comment(
        "octo", "hello", pull["number"], "@repo-agent ask why?", path="src/app.py", **kw
    )


async def test_an_answer_in_a_new_thread_is_one_reply_edited_as_the_run_goes(
    client: InstallationClient, fake: FakeGitHub, pull: dict[str, Any]
) -> None:
    asked = ask(fake, pull)
    publisher = in_thread(client, fake, asked)
    await publisher.start(progress(kind="ask"))
    await publisher.finish(outcome("Because of `src/app.py:1`.", kind="ask"))
    (reply,) = replies(fake)
    assert reply["in_reply_to_id"] == asked["id"]
    assert "Because of" in reply["body"] and parse_markers(reply["body"]).run_id == RUN
    assert parse_markers(reply["body"]).sticky is None
    assert fake.comments_on("octo", "hello", 2) == []
    assert ("PATCH", f"/repos/octo/hello/pulls/comments/{reply['id']}") in writes(fake)
    assert publisher.comment_url == reply["html_url"]


async def test_a_reply_is_answered_under_the_threads_first_comment(
    client: InstallationClient, fake: FakeGitHub, pull: dict[str, Any]
) -> None:
    first = fake.add_review_comment("octo", "hello", 2, "Odd.", user="bob", path="src/app.py")
    asked = ask(fake, pull, in_reply_to=first["id"])
    await in_thread(client, fake, asked).finish(outcome(kind="ask"))
    (reply,) = replies(fake)
    assert reply["in_reply_to_id"] == first["id"]
    assert fake.thread_of(asked["id"]) is fake.thread_of(reply["id"])
    assert fake.comments_on("octo", "hello", 2) == []


async def test_a_retried_run_edits_its_reply_and_never_replies_twice(
    client: InstallationClient, fake: FakeGitHub, pull: dict[str, Any]
) -> None:
    asked = ask(fake, pull)
    await in_thread(client, fake, asked).start(progress(kind="ask"))
    await in_thread(client, fake, asked).finish(outcome("Second try.", kind="ask"))
    await in_thread(client, fake, asked).finish(outcome("Second try.", kind="ask"))
    (reply,) = replies(fake)
    assert "Second try." in reply["body"]
    posts = [w for w in writes(fake) if w[1].endswith("/replies")]
    assert len(posts) == 1


async def test_another_runs_reply_in_the_same_thread_is_left_alone(
    client: InstallationClient, fake: FakeGitHub, pull: dict[str, Any]
) -> None:
    asked = ask(fake, pull)
    await in_thread(client, fake, asked).finish(outcome("First.", kind="ask"))
    other = "wf_00000000000b"
    later = ask(fake, pull, in_reply_to=asked["id"])
    await in_thread(client, fake, later, run_id=other).finish(
        outcome("Second.", run_id=other, kind="ask")
    )
    first, second = replies(fake)
    assert "First." in first["body"] and "Second." in second["body"]


async def test_a_thread_whose_first_comment_was_deleted_is_answered_in_the_conversation(
    client: InstallationClient, fake: FakeGitHub, pull: dict[str, Any]
) -> None:
    first = fake.add_review_comment("octo", "hello", 2, "Odd.", user="bob", path="src/app.py")
    asked = ask(fake, pull, in_reply_to=first["id"])
    fake.delete_review_comment(first["id"])
    await in_thread(client, fake, asked).finish(outcome("The answer.", kind="ask"))
    assert replies(fake) == []
    (comment,) = fake.comments_on("octo", "hello", 2)
    assert parse_markers(comment["body"]).run_id == RUN
    assert FIRST_COMMENT_GONE in comment["body"] and "The answer." in comment["body"]
    assert asked["html_url"] in comment["body"]


async def test_a_deleted_asking_comment_is_answered_in_the_conversation(
    client: InstallationClient, fake: FakeGitHub, pull: dict[str, Any]
) -> None:
    asked = ask(fake, pull)
    fake.delete_review_comment(asked["id"])
    await in_thread(client, fake, asked).finish(outcome("The answer.", kind="ask"))
    assert replies(fake) == []
    (comment,) = fake.comments_on("octo", "hello", 2)
    assert "the review comment that asked was deleted" in comment["body"]


async def test_a_thread_gone_between_reading_and_replying_is_answered_in_the_conversation(
    client: InstallationClient, fake: FakeGitHub, pull: dict[str, Any]
) -> None:
    asked = ask(fake, pull)
    fake.fail_next("POST", "*/replies", 404, message="Not Found")
    publisher = in_thread(client, fake, asked)
    await publisher.start(progress(kind="ask"))
    await publisher.finish(outcome("The answer.", kind="ask"))
    assert replies(fake) == []
    (comment,) = fake.comments_on("octo", "hello", 2)
    assert "The answer." in comment["body"] and "was deleted" in comment["body"]


async def test_review_asked_in_a_thread_keeps_its_sticky_summary_in_the_conversation(
    client: InstallationClient, fake: FakeGitHub, pull: dict[str, Any]
) -> None:
    asked = ask(fake, pull)
    await in_thread(client, fake, asked, kind="review").finish(outcome(kind="review"))
    assert replies(fake) == []
    (comment,) = fake.comments_on("octo", "hello", 2)
    assert parse_markers(comment["body"]).sticky == "review"


async def test_a_blocked_answer_in_a_thread_is_marked_answered_there(
    client: InstallationClient, fake: FakeGitHub, pull: dict[str, Any]
) -> None:
    blocked = Blocked("Which?", "", ("a", "b"), "a", "", "@app decide 1", '@app decide "x"')
    asked = Outcome(status="blocked", summary="Which?", run_id=RUN, workflow="fix", blocked=blocked)
    await in_thread(client, fake, ask(fake, pull), kind="fix").finish(asked)
    (reply,) = replies(fake)
    original = reply["body"]
    copied = fake.add_review_comment(
        "octo", "hello", 2, original, user="mallory", in_reply_to=reply["in_reply_to_id"]
    )
    before = writes(fake)

    # The follow-up's publisher, as `decide` builds it: it knows the run, not the thread.
    marking = Publisher(client, run_id=RUN, kind="fix", number=2, bot_login=fake.bot_login)
    assert await marking.amend(asked, answered="**Answered** by maint", in_threads=True)
    (edited,) = replies(fake)
    assert "**Answered** by maint" in edited["body"] and "To answer" not in edited["body"]
    assert parse_markers(edited["body"]).run_id == RUN
    assert copied["body"] == original  # somebody else's copy of the marker is left alone
    assert writes(fake)[len(before) :] == [
        ("PATCH", f"/repos/octo/hello/pulls/comments/{reply['id']}")
    ]
    assert fake.comments_on("octo", "hello", 2) == []  # nothing created in the conversation

    elsewhere = Publisher(
        client, run_id="wf_00000000000f", kind="fix", number=2, bot_login=fake.bot_login
    )
    assert await elsewhere.amend(asked, answered="x", in_threads=True) is False
