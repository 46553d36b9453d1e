"""The installation client's review calls: replies, review threads and resolving them."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.github.errors import GitHubError, NotFound
from tests.fakes.github import FakeGitHub, commit_files, make_fake_github
from tests.github._client_world import Sleeps, make_app

pytestmark = pytest.mark.anyio

BASE = "".join(f"line {i}\n" for i in range(1, 30))


@pytest.fixture
async def fake(tmp_path: Path) -> FakeGitHub:
    fake = make_fake_github(tmp_path, files={"app.py": BASE})
    bare = fake.repos["octo/hello"].git_dir
    commit_files(bare, "topic", {"app.py": BASE.replace("line 4\n", "four\n")}, "c", base="main")
    await fake.add_pull("octo", "hello", head="topic")
    return fake


async def test_reply_threads_and_resolve(fake: FakeGitHub) -> None:
    sleeps = Sleeps()
    async with make_app(fake, sleeps, mutation_interval_s=1.0) as app:
        client = app.installation(42, "octo", "hello")
        head = fake.repos["octo/hello"].pulls[1]["head"]["sha"]
        await client.create_review(
            1,
            body="s",
            commit_id=head,
            comments=[{"path": "app.py", "line": 4, "side": "RIGHT", "body": "ours"}],
        )
        (ours,) = fake.repos["octo/hello"].review_comments[1]
        fake.add_review_comment("octo", "hello", 1, "not ours", user="bob", path="app.py", line=5)
        fake.react_to_review_comment(ours["id"], "alice")
        reply = await client.reply_to_review_comment(1, ours["id"], "Fixed in abc")
        assert reply.in_reply_to_id == ours["id"]

        before = len(sleeps.requested)
        threads = await client.review_threads(1)
        assert len(sleeps.requested) == before, "a GraphQL query is a read, not a spaced write"
        assert [t.first_comment_id for t in threads] == [ours["id"], ours["id"] + 2]
        first = threads[0]
        assert [c.author for c in first.comments] == ["repo-agent", "repo-agent"]
        assert first.comments[0].thumbs_down_by == ("alice",)
        assert not first.is_resolved

        await client.resolve_review_thread(first.id)
        assert fake.thread_of(ours["id"])["resolved"] is True
        with pytest.raises(NotFound):
            await client.resolve_review_thread("PRRT_missing")
        with pytest.raises(GitHubError):
            await client.graphql("query { viewer { login } }", {})


async def test_reply_is_not_sent_twice_after_a_lost_answer(fake: FakeGitHub) -> None:
    async with make_app(fake) as app:
        client = app.installation(42, "octo", "hello")
        head = fake.repos["octo/hello"].pulls[1]["head"]["sha"]
        await client.create_review(
            1, body="s", commit_id=head, comments=[{"path": "app.py", "line": 4, "body": "x"}]
        )
        (ours,) = fake.repos["octo/hello"].review_comments[1]
        fake.fail_next("POST", "*/replies", 502, after_apply=True)
        await client.reply_to_review_comment(1, ours["id"], "Fixed in abc")
        replies = [
            c for c in fake.repos["octo/hello"].review_comments[1] if c.get("in_reply_to_id")
        ]
        assert len(replies) == 1


async def test_the_app_edits_its_own_reply_and_nobody_elses_comment(fake: FakeGitHub) -> None:
    async with make_app(fake) as app:
        client = app.installation(42, "octo", "hello")
        theirs = fake.add_review_comment("octo", "hello", 1, "why?", user="bob", path="app.py")
        reply = await client.reply_to_review_comment(1, theirs["id"], "working")
        edited = await client.update_review_comment(reply.id, "Because.")
        assert edited.body == "Because." and edited.in_reply_to_id == theirs["id"]
        assert fake.review_comment_by_id[reply.id]["body"] == "Because."
        with pytest.raises(GitHubError) as refused:
            await client.update_review_comment(theirs["id"], "mine now")
        assert refused.value.status == 403
        assert fake.review_comment_by_id[theirs["id"]]["body"] == "why?"


async def test_a_reply_to_a_deleted_comment_is_refused(fake: FakeGitHub) -> None:
    async with make_app(fake) as app:
        client = app.installation(42, "octo", "hello")
        first = fake.add_review_comment("octo", "hello", 1, "first", user="bob", path="app.py")
        second = fake.add_review_comment(
            "octo", "hello", 1, "second", user="bob", path="app.py", in_reply_to=first["id"]
        )
        fake.delete_review_comment(first["id"])
        listed = await client.list_review_comments(1)
        assert [c.id for c in listed] == [second["id"]]
        assert listed[0].in_reply_to_id == first["id"]
        with pytest.raises(NotFound):
            await client.reply_to_review_comment(1, first["id"], "x")
        with pytest.raises(GitHubError) as refused:
            await client.reply_to_review_comment(1, second["id"], "x")
        assert refused.value.status == 422
