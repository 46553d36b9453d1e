"""The fake GitHub's person's review (`submit_review`) and its listing of one review's comments,
held to GitHub's shapes: the webhook's lower-case state, the REST state, and 404 for a review
that is not the pull request's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.fakes._github_state import FakeError
from tests.fakes.github import FakeGitHub, commit_files, make_fake_github
from tests.github.test_fake_github import token_for

pytestmark = pytest.mark.anyio


@pytest.fixture
async def fake(tmp_path: Path) -> FakeGitHub:
    fake = make_fake_github(tmp_path, files={"README.md": "one\ntwo\n"})
    bare = fake.repos["octo/hello"].git_dir
    commit_files(bare, "feature", {"README.md": "one\nTWO\n"}, "Feature", base="main")
    await fake.add_pull("octo", "hello", head="feature")
    await fake.add_pull("octo", "hello", head="feature", base="main", number=2)
    fake.set_permission("octo", "hello", "maint", "write")
    return fake


@pytest.fixture
async def http(fake: FakeGitHub) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(fake.app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://gh.test", trust_env=False
    ) as client:
        yield client


async def test_a_persons_review_and_its_comments(fake: FakeGitHub, http: httpx.AsyncClient) -> None:
    pull = fake.repos["octo/hello"].pulls[1]
    pull["requested_reviewers"] = [{"login": "maint"}]
    lines = [{"path": "README.md", "line": 2, "body": f"point {n}"} for n in range(3)]
    payload = fake.submit_review("octo", "hello", 1, user="maint", comments=lines)
    review = payload["review"]
    assert (payload["action"], review["state"], review["user"]["login"]) == (
        "submitted",
        "changes_requested",
        "maint",
    )
    assert review["commit_id"] == pull["head"]["sha"] and payload["sender"]["login"] == "maint"
    assert pull["requested_reviewers"] == []  # the request is answered by the review
    fake.submit_review("octo", "hello", 1, user="maint", event="COMMENT", comments=lines[:1])
    headers = {"Authorization": f"token {await token_for(http, fake, None)}"}
    base = "/repos/octo/hello/pulls"

    listed = await http.get(f"{base}/1/reviews", headers=headers)
    assert [r["state"] for r in listed.json()] == ["CHANGES_REQUESTED", "COMMENTED"]
    own = await http.get(f"{base}/1/reviews/{review['id']}/comments", headers=headers)
    assert own.status_code == 200 and [c["body"] for c in own.json()] == [
        "point 0",
        "point 1",
        "point 2",
    ]
    assert {c["pull_request_review_id"] for c in own.json()} == {review["id"]}
    paged = await http.get(
        f"{base}/1/reviews/{review['id']}/comments", params={"per_page": 2}, headers=headers
    )
    assert len(paged.json()) == 2 and 'rel="next"' in paged.headers["link"]
    threads = [t for t in fake.threads.values() if t["number"] == 1]
    assert len(threads) == 4 and not any(t["resolved"] for t in threads)

    other = await http.get(f"{base}/2/reviews/{review['id']}/comments", headers=headers)
    missing = await http.get(f"{base}/1/reviews/999999/comments", headers=headers)
    assert (other.status_code, missing.status_code) == (404, 404)


async def test_a_comment_off_the_diff_is_refused_as_github_does(fake: FakeGitHub) -> None:
    reviews = len(fake.repos["octo/hello"].reviews.get(1, []))
    for comment in (
        {"path": "README.md", "line": 40, "body": "x"},
        {"path": "nope", "line": 1, "body": "x"},
    ):
        with pytest.raises(FakeError) as refused:
            fake.submit_review("octo", "hello", 1, user="maint", comments=[comment])
        assert refused.value.status == 422
    assert len(fake.repos["octo/hello"].reviews.get(1, [])) == reviews  # nothing stored
