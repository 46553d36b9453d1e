"""Our policy around githubkit: pagination kept on the API's origin and capped, request bodies
checked against GitHub's schema before they go out, and single tries that stay with the create."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from bot.github._pages import MAX_PAGES
from bot.github.client import GitHubError
from tests.fakes.github import FakeGitHub, commit_files
from tests.github._client_world import hello_world, make_app

pytestmark = pytest.mark.anyio


@pytest.fixture
def fake(tmp_path: Path) -> FakeGitHub:
    return hello_world(tmp_path)


class NextLinks(httpx.AsyncBaseTransport):
    """Passes requests to the fake, giving each answer on `path` a `rel="next"` link made by
    `link(url)`; records every request that reached it."""

    def __init__(self, fake: FakeGitHub, path: str, link: str) -> None:
        self.inner = httpx.ASGITransport(fake.app)
        self.path = path
        self.link = link
        self.seen: list[httpx.URL] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request.url)
        response = await self.inner.handle_async_request(request)
        if request.url.path != self.path:
            return response
        body = await response.aread()
        page = int(request.url.params.get("page", "1"))
        headers = dict(response.headers)
        headers["link"] = f'<{self.link.format(page=page + 1)}>; rel="next"'
        return httpx.Response(response.status_code, headers=headers, content=body)


async def test_a_pagination_link_to_another_origin_is_not_followed(fake: FakeGitHub) -> None:
    path = "/repos/octo/hello/issues/1/comments"
    fake.add_comment("octo", "hello", 1, "first", user="alice")
    links = NextLinks(fake, path, "http://elsewhere.test/steal?page={page}")
    gh = make_app(fake, transport=links).installation(42, "octo", "hello")
    comments = await gh.list_issue_comments(1)
    assert [c.body for c in comments] == ["first"]
    assert {url.host for url in links.seen} == {"github.test"}  # the token stayed home


async def test_a_list_is_read_for_at_most_max_pages(fake: FakeGitHub) -> None:
    path = "/repos/octo/hello/issues/1/comments"
    fake.add_comment("octo", "hello", 1, "first", user="alice")
    links = NextLinks(fake, path, f"http://github.test{path}?per_page=100&page={{page}}")
    gh = make_app(fake, transport=links).installation(42, "octo", "hello")
    comments = await gh.list_issue_comments(1)
    assert [c.body for c in comments] == ["first"]
    assert len([url for url in links.seen if url.path == path]) == MAX_PAGES


async def test_a_body_github_would_refuse_is_not_sent(fake: FakeGitHub) -> None:
    head = commit_files(fake.repos["octo/hello"].git_dir, "main", {"a.txt": "a\n"}, "A")
    gh = make_app(fake).installation(42, "octo", "hello")
    run = await gh.create_check_run(name="bot review", head_sha=head)
    with pytest.raises(GitHubError) as refused:  # GitHub requires `summary` with an `output`
        await gh.update_check_run(run.id, conclusion="neutral", output={"title": "Blocked"})
    assert refused.value.status == 422 and "summary" in refused.value.message
    assert fake.calls_to("PATCH", f"/repos/octo/hello/check-runs/{run.id}") == []


async def test_a_create_sent_once_still_retries_the_token_it_needs(fake: FakeGitHub) -> None:
    gh = make_app(fake).installation(42, "octo", "hello")
    fake.fail_next("POST", "/app/installations/42/access_tokens", 502, times=1)
    comment = await gh.create_issue_comment(1, "hello")
    assert comment.body == "hello"
    minted = fake.calls_to("POST", "/app/installations/42/access_tokens")
    assert [c.status for c in minted] == [502, 201]
    assert [c["body"] for c in fake.comments_on("octo", "hello", 1)] == ["hello"]
