"""bot.workflows.review.publish: one review request, one fallback on 422, fixed threads closed."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.workflows.review.publish import close_fixed, fixed_replies, post_review
from bot.workflows.review.render import Shown
from policies.diff import Anchor
from tests.fakes.github import FakeGitHub
from tests.github._client_world import make_app
from tests.review._calc import build_calc

pytestmark = pytest.mark.anyio


@pytest.fixture
async def fake(tmp_path: Path) -> FakeGitHub:
    calc = build_calc(tmp_path)
    fake = FakeGitHub()
    fake.add_repo("octo", "hello", calc.git_dir)
    fake.add_installation(42, "octo", ["octo/hello"])
    await fake.add_pull("octo", "hello", head="topic")
    return fake


def shown(fp: str, line: int) -> Shown:
    return Shown(fp, "calc/ops.py", line, line, "high", "bug", f"title {fp}", "why")


async def test_a_refused_review_is_sent_once_more_with_everything_in_its_body(
    fake: FakeGitHub,
) -> None:
    head = fake.repos["octo/hello"].pulls[1]["head"]["sha"]
    async with make_app(fake) as app:
        client = app.installation(42, "octo", "hello")
        fake.fail_next(
            "POST",
            "*/pulls/1/reviews",
            422,
            message="Unprocessable Entity: pull_request_review_thread.line must be part of the diff",
        )
        posted = await post_review(
            client,
            1,
            head=head,
            body="Review.",
            inline=[
                (shown("aaaaaaaa", 18), Anchor("calc/ops.py", 18)),
                (shown("bbbbbbbb", 22), Anchor("calc/ops.py", 22)),
            ],
            bot_login=fake.bot_login,
            redact=lambda s: s,
        )
    assert not posted.inline and posted.comment_ids == {}
    reviews = fake.calls_to("POST", "*/pulls/1/reviews")
    assert len(reviews) == 2  # never one request per comment
    assert "comments" not in reviews[1].json
    (review,) = fake.repos["octo/hello"].reviews[1]
    assert "title aaaaaaaa" in review["body"] and "title bbbbbbbb" in review["body"]
    assert fake.repos["octo/hello"].review_comments.get(1, []) == []


async def test_other_errors_are_not_swallowed(fake: FakeGitHub) -> None:
    from bot.github.errors import GitHubError

    head = fake.repos["octo/hello"].pulls[1]["head"]["sha"]
    async with make_app(fake) as app:
        client = app.installation(42, "octo", "hello")
        fake.fail_next("POST", "*/pulls/1/reviews", 403, message="Resource not accessible")
        with pytest.raises(GitHubError):
            await post_review(
                client,
                1,
                head=head,
                body="b",
                inline=[],
                bot_login=fake.bot_login,
                redact=lambda s: s,
            )


async def test_close_fixed_replies_and_resolves_only_with_ids(fake: FakeGitHub) -> None:
    head = fake.repos["octo/hello"].pulls[1]["head"]["sha"]
    async with make_app(fake) as app:
        client = app.installation(42, "octo", "hello")
        posted = await post_review(
            client,
            1,
            head=head,
            body="b",
            inline=[(shown("cccccccc", 22), Anchor("calc/ops.py", 22))],
            bot_login=fake.bot_login,
            redact=lambda s: s,
        )
        comment_id = posted.comment_ids["cccccccc"]
        thread = fake.thread_of(comment_id)
        await close_fixed(client, 1, comment_id=None, thread_id=None, sha=head)
        assert fake.calls_to("POST", "*/replies") == []
        await close_fixed(client, 1, comment_id=comment_id, thread_id=thread["id"], sha=head)
        # A retried run knows what it answered already: no second reply.
        answered = await fixed_replies(client, 1, bot_login=fake.bot_login)
        assert answered == {comment_id}
        await close_fixed(
            client, 1, comment_id=comment_id, thread_id=thread["id"], sha=head, answered=answered
        )
    replies = [c for c in fake.repos["octo/hello"].review_comments[1] if c.get("in_reply_to_id")]
    assert [r["body"] for r in replies] == [f"Fixed in {head}."]
    assert thread["resolved"] is True
