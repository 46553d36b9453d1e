"""The fake GitHub's reviews: strict anchors, threads, replies, GraphQL and pushes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.github import FakeGitHub, commit_files, make_fake_github
from tests.github.test_fake_github import token_for

pytestmark = pytest.mark.anyio

BASE = "".join(f"line {i}\n" for i in range(1, 41))


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[tuple[FakeGitHub, httpx.AsyncClient, str]]:
    fake = make_fake_github(tmp_path, files={"app.py": BASE})
    bare = fake.repos["octo/hello"].git_dir
    changed = BASE.replace("line 5\n", "line five\n").replace("line 30\n", "line thirty\n")
    commit_files(bare, "topic", {"app.py": changed}, "Change", base="main")
    await fake.add_pull("octo", "hello", head="topic")
    transport = httpx.ASGITransport(fake.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gh.test") as http:
        token = await token_for(http, fake, ["hello"])
        http.headers["Authorization"] = f"token {token}"
        yield fake, http, token


def head(fake: FakeGitHub) -> str:
    return str(fake.repos["octo/hello"].pulls[1]["head"]["sha"])


async def review(http: httpx.AsyncClient, fake: FakeGitHub, **body: Any) -> httpx.Response:
    data = {"commit_id": head(fake), "event": "COMMENT", **body}
    return await http.post("/repos/octo/hello/pulls/1/reviews", json=data)


@pytest.mark.parametrize(
    ("comment", "message"),
    [
        pytest.param({"line": 15}, "line must be part of the diff", id="outside"),
        pytest.param({"line": 5, "start_line": 5}, "must precede", id="start-not-before"),
        pytest.param({"line": 31, "start_line": 4}, "same hunk", id="start-other-hunk"),
        pytest.param({"line": 5, "path": "nope.py"}, "path is invalid", id="unknown-path"),
        pytest.param({"line": 5, "body": ""}, "'body' wasn't supplied", id="no-body"),
        pytest.param({"position": 3}, "`line`", id="position"),
    ],
)
async def test_bad_anchor_refuses_the_whole_review(
    world: tuple[FakeGitHub, httpx.AsyncClient, str], comment: dict[str, Any], message: str
) -> None:
    fake, http, _ = world
    good = {"path": "app.py", "line": 5, "body": "fine"}
    bad = {"path": "app.py", "body": "x", **comment}
    response = await review(http, fake, body="b", comments=[good, bad])
    assert response.status_code == 422, response.text
    assert message in response.json()["message"]
    assert fake.repos["octo/hello"].reviews.get(1) is None
    assert fake.threads == {}


async def test_review_commit_and_body_rules(
    world: tuple[FakeGitHub, httpx.AsyncClient, str],
) -> None:
    fake, http, _ = world
    assert (await review(http, fake, body="")).status_code == 422
    stranger = await review(http, fake, body="x", commit_id="0" * 40)
    assert stranger.status_code == 422
    base_sha = fake.repos["octo/hello"].pulls[1]["base"]["sha"]
    assert (await review(http, fake, body="x", commit_id=base_sha)).status_code == 422
    ok = await review(
        http,
        fake,
        body="summary",
        comments=[{"path": "app.py", "line": 7, "start_line": 3, "body": "range"}],
    )
    assert ok.status_code == 200, ok.text
    assert len(fake.threads) == 1


async def graphql(http: httpx.AsyncClient, query: str, **variables: Any) -> dict[str, Any]:
    response = await http.post("/graphql", json={"query": query, "variables": variables})
    assert response.status_code == 200
    data: dict[str, Any] = response.json()
    return data


THREADS = "query($owner: String!, $name: String!, $number: Int!) { reviewThreads }"
RESOLVE = "mutation($threadId: ID!) { resolveReviewThread(input: {threadId: $threadId}) { x } }"


async def test_threads_replies_resolve_and_outdated(
    world: tuple[FakeGitHub, httpx.AsyncClient, str],
) -> None:
    fake, http, _ = world
    await review(
        http,
        fake,
        body="s",
        comments=[
            {"path": "app.py", "line": 5, "body": "ours at five"},
            {"path": "app.py", "line": 30, "body": "ours at thirty"},
        ],
    )
    first, second = fake.repos["octo/hello"].review_comments[1]
    person = fake.add_review_comment("octo", "hello", 1, "a person's", path="app.py", line=6)
    fake.react_to_review_comment(second["id"], "alice")
    reply = await http.post(
        f"/repos/octo/hello/pulls/1/comments/{first['id']}/replies", json={"body": "Fixed"}
    )
    assert reply.status_code == 201
    nested = await http.post(
        f"/repos/octo/hello/pulls/1/comments/{reply.json()['id']}/replies", json={"body": "x"}
    )
    assert nested.status_code == 422

    data = await graphql(http, THREADS, owner="octo", name="hello", number=1)
    nodes = data["data"]["repository"]["pullRequest"]["reviewThreads"]["nodes"]
    assert [len(n["comments"]["nodes"]) for n in nodes] == [2, 1, 1]
    assert nodes[1]["comments"]["nodes"][0]["reactions"]["nodes"] == [{"user": {"login": "alice"}}]
    assert not any(n["isOutdated"] or n["isResolved"] for n in nodes)

    bare = fake.repos["octo/hello"].git_dir
    fixed = BASE.replace("line 30\n", "line thirty\n").replace("line 5\n", "line 5 again\n")
    sha = commit_files(bare, "topic", {"app.py": fixed}, "Fix five")
    payload = await fake.push_pull("octo", "hello", 1, sha)
    assert payload["action"] == "synchronize" and payload["after"] == sha
    data = await graphql(http, THREADS, owner="octo", name="hello", number=1)
    nodes = data["data"]["repository"]["pullRequest"]["reviewThreads"]["nodes"]
    assert [n["isOutdated"] for n in nodes] == [True, False, False]

    done = await graphql(http, RESOLVE, threadId=nodes[0]["id"])
    assert done["data"]["resolveReviewThread"]["thread"]["isResolved"] is True
    missing = await graphql(http, RESOLVE, threadId="PRRT_nope")
    assert missing["errors"][0]["type"] == "NOT_FOUND"
    fake.resolve_thread(person["id"], "bob")
    data = await graphql(http, THREADS, owner="octo", name="hello", number=1)
    nodes = data["data"]["repository"]["pullRequest"]["reviewThreads"]["nodes"]
    assert nodes[2]["resolvedBy"] == {"login": "bob"}
    other = await graphql(http, THREADS, owner="octo", name="elsewhere", number=1)
    assert other["errors"][0]["type"] == "NOT_FOUND"
    unknown = await graphql(http, "query { viewer { login } }")
    assert "errors" in unknown


async def test_anchors_follow_the_reviewed_commit(
    world: tuple[FakeGitHub, httpx.AsyncClient, str],
) -> None:
    """A review pinned to an older head is checked against that head's diff."""
    fake, http, _ = world
    old = head(fake)
    bare = fake.repos["octo/hello"].git_dir
    newer = BASE.replace("line 20\n", "line twenty\n")
    sha = commit_files(bare, "topic", {"app.py": newer}, "Rewrite")
    await fake.push_pull("octo", "hello", 1, sha)
    at_old = await review(
        http, fake, commit_id=old, comments=[{"path": "app.py", "line": 5, "body": "x"}]
    )
    assert at_old.status_code == 200, at_old.text
    at_new = await review(http, fake, comments=[{"path": "app.py", "line": 5, "body": "x"}])
    assert at_new.status_code == 422
