"""Retries, rate limits, write spacing and never-twice creates, against the fake GitHub."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import anyio
import httpx
import pytest

from bot.github._retry import rate_limit_wait
from bot.github.client import (
    GitHubApp,
    GitHubError,
    RateLimited,
    RetryableError,
    RetryPolicy,
)
from tests.fakes.github import (
    FakeGitHub,
    commit_files,
)
from tests.github._client_world import API, Sleeps, hello_world, make_app

pytestmark = pytest.mark.anyio


@pytest.fixture
def fake(tmp_path: Path) -> FakeGitHub:
    return hello_world(tmp_path)


async def test_502_twice_then_200_succeeds_on_the_third_call(fake: FakeGitHub) -> None:
    sleeps = Sleeps()
    gh = make_app(fake, sleeps).installation(42, "octo", "hello")
    fake.fail_next("POST", "/repos/octo/hello/issues/1/comments", 502, times=2)
    comment = await gh.create_issue_comment(1, "hello")
    calls = fake.calls_to("POST", "/repos/octo/hello/issues/1/comments")
    assert [c.status for c in calls] == [502, 502, 201]
    assert [c["body"] for c in fake.comments_on("octo", "hello", 1)] == ["hello"]
    assert comment.body == "hello"
    assert len(sleeps.requested) == 2 and sleeps.requested[1] > sleeps.requested[0]


async def test_persistent_5xx_becomes_retryable_error(fake: FakeGitHub) -> None:
    gh = make_app(fake).installation(42, "octo", "hello")
    fake.fail_next("GET", "/repos/octo/hello/issues/1", 503, times=10)
    with pytest.raises(RetryableError) as caught:
        await gh.get_issue(1)
    assert caught.value.status == 503
    assert len(fake.calls_to("GET", "/repos/octo/hello/issues/1")) == 4


class FlakyTransport(httpx.AsyncBaseTransport):
    """Refuses the first `failures` connections, then passes requests through."""

    def __init__(self, inner: httpx.AsyncBaseTransport, failures: int) -> None:
        self.inner = inner
        self.failures = failures

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.failures > 0:
            self.failures -= 1
            raise httpx.ConnectError("connection refused", request=request)
        return await self.inner.handle_async_request(request)


async def test_connection_errors_are_retried(fake: FakeGitHub) -> None:
    flaky = FlakyTransport(httpx.ASGITransport(fake.app), failures=2)
    app = make_app(fake, transport=flaky)
    assert (await app.get_app()).slug == "repo-agent"
    flaky.failures = 10
    with pytest.raises(RetryableError) as caught:
        await app.get_app()
    assert caught.value.status == 0


async def test_429_with_retry_after_waits_then_succeeds(fake: FakeGitHub) -> None:
    app = GitHubApp(
        fake.app_id,
        fake.private_key_pem,
        api_url=API,
        transport=httpx.ASGITransport(fake.app),
        policy=RetryPolicy(mutation_interval_s=0.0),
    )
    gh = app.installation(42, "octo", "hello")
    await gh.token()
    fake.fail_next("POST", "/repos/*/issues/1/comments", 429, headers={"retry-after": "1"})
    await gh.create_issue_comment(1, "after the wait")
    first, second = fake.calls_to("POST", "/repos/octo/hello/issues/1/comments")
    assert (first.status, second.status) == (429, 201)
    assert second.at - first.at >= 1.0
    assert len(fake.comments_on("octo", "hello", 1)) == 1


async def test_exhausted_quota_waits_until_reset_within_the_cap(fake: FakeGitHub) -> None:
    sleeps = Sleeps()
    gh = make_app(fake, sleeps).installation(42, "octo", "hello")
    await gh.token()
    reset = int(time.time()) + 20
    fake.fail_next(
        "GET",
        "/repos/octo/hello/issues/1",
        403,
        headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)},
        message="API rate limit exceeded",
    )
    assert (await gh.get_issue(1)).number == 1
    assert len(sleeps.requested) == 1
    assert 15 <= sleeps.requested[0] <= 22


async def test_a_reset_beyond_the_cap_raises_rate_limited_without_sleeping(
    fake: FakeGitHub,
) -> None:
    sleeps = Sleeps()
    gh = make_app(fake, sleeps, max_sleep_s=60).installation(42, "octo", "hello")
    await gh.token()
    reset = int(time.time()) + 3600
    fake.fail_next(
        "GET",
        "/repos/octo/hello/issues/1",
        403,
        headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)},
    )
    with pytest.raises(RateLimited) as caught:
        await gh.get_issue(1)
    assert isinstance(caught.value, RetryableError)
    assert reset <= caught.value.retry_at <= reset + 5
    assert sleeps.requested == []
    assert len(fake.calls_to("GET", "/repos/octo/hello/issues/1")) == 1


async def test_a_403_that_is_not_a_rate_limit_fails_at_once(fake: FakeGitHub) -> None:
    sleeps = Sleeps()
    gh = make_app(fake, sleeps).installation(42, "octo", "hello")
    fake.fail_next("POST", "/repos/*/issues/1/comments", 403, message="Resource not accessible")
    with pytest.raises(GitHubError) as caught:
        await gh.create_issue_comment(1, "x")
    assert caught.value.status == 403
    assert "Resource not accessible" in str(caught.value)
    assert not isinstance(caught.value, RetryableError)
    assert sleeps.requested == []


async def test_writes_of_one_installation_are_spaced(fake: FakeGitHub) -> None:
    interval = 0.05
    app = GitHubApp(
        fake.app_id,
        fake.private_key_pem,
        api_url=API,
        transport=httpx.ASGITransport(fake.app),
        policy=RetryPolicy(mutation_interval_s=interval),
    )
    gh = app.installation(42, "octo", "hello")
    await gh.token()

    async with anyio.create_task_group() as tg:
        for i in range(5):
            tg.start_soon(gh.create_issue_comment, 1, f"comment {i}")
        for _ in range(5):
            tg.start_soon(gh.get_issue, 1)
    writes = [c for c in fake.calls if c.method == "POST" and c.path.endswith("/comments")]
    assert len(writes) == 5
    gaps = [b.at - a.at for a, b in itertools.pairwise(writes)]
    assert min(gaps) >= interval


async def test_answers_that_are_not_json_or_not_the_shape_are_clear_errors(
    fake: FakeGitHub,
) -> None:
    gh = make_app(fake).installation(42, "octo", "hello")
    fake.fail_next(
        "GET",
        "/repos/octo/hello/issues/1",
        200,
        raw_body=b"<html>proxy login</html>",
        headers={"content-type": "text/html"},
    )
    with pytest.raises(GitHubError, match="text/html, not JSON"):
        await gh.get_issue(1)
    fake.fail_next("GET", "/repos/octo/hello/issues/1", 200, json_body={"title": "no id"})
    with pytest.raises(GitHubError, match="unexpected Issue from GitHub: id"):
        await gh.get_issue(1)
    fake.fail_next("GET", "/repos/octo/hello/issues/1/comments", 200, json_body={"not": "a list"})
    with pytest.raises(GitHubError, match="expected a list"):
        await gh.list_issue_comments(1)
    assert (await gh.get_issue(1)).number == 1


@pytest.mark.parametrize(
    ("status", "headers", "body", "wait"),
    [
        pytest.param(429, {"retry-after": "7"}, "", 7.0, id="retry-after"),
        pytest.param(403, {"retry-after": "0"}, "", 0.0, id="retry-after-zero"),
        pytest.param(
            403,
            {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1700000030"},
            "",
            31.0,
            id="primary-reset",
        ),
        pytest.param(
            403,
            {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1699999900"},
            "",
            1.0,
            id="reset-passed",
        ),
        pytest.param(
            403,
            {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1700000030000"},
            "",
            31.0,
            id="reset-in-milliseconds",
        ),
        pytest.param(429, {}, "", 60.0, id="429-bare"),
        pytest.param(
            403,
            {},
            '{"message": "You have exceeded a secondary rate limit"}',
            60.0,
            id="secondary-by-message",
        ),
        pytest.param(
            403, {"x-ratelimit-remaining": "12"}, '{"message": "Forbidden"}', None, id="plain-403"
        ),
        pytest.param(500, {"retry-after": "5"}, "", None, id="not-a-rate-limit-status"),
    ],
)
def test_rate_limit_wait(
    status: int, headers: dict[str, str], body: str, wait: float | None
) -> None:
    assert rate_limit_wait(status, headers, body, now=1_700_000_000.0) == wait


async def test_a_comment_applied_behind_a_502_is_not_posted_again(fake: FakeGitHub) -> None:
    gh = make_app(fake).installation(42, "octo", "hello")
    await gh.token()
    fake.fail_next("POST", "/repos/octo/hello/issues/1/comments", 502, times=2, after_apply=True)
    comment = await gh.create_issue_comment(1, "once <!-- bot:run=wf_1 kind=triage -->")
    assert [c["body"] for c in fake.comments_on("octo", "hello", 1)] == [comment.body]
    assert len(fake.calls_to("POST", "/repos/octo/hello/issues/1/comments")) == 1


async def test_a_comment_that_was_not_applied_is_posted_on_the_next_try(
    fake: FakeGitHub,
) -> None:
    gh = make_app(fake).installation(42, "octo", "hello")
    fake.add_comment("octo", "hello", 1, "same text", user="alice")  # not the App's
    fake.fail_next("POST", "/repos/octo/hello/issues/1/comments", 502, times=2)
    comment = await gh.create_issue_comment(1, "same text")
    assert comment.user is not None and comment.user.is_bot
    posts = fake.calls_to("POST", "/repos/octo/hello/issues/1/comments")
    assert [c.status for c in posts] == [502, 502, 201]
    assert len(fake.comments_on("octo", "hello", 1)) == 2


async def test_check_runs_and_reviews_are_not_duplicated_by_lost_answers(
    fake: FakeGitHub,
) -> None:
    bare = fake.repos["octo/hello"].git_dir
    commit_files(bare, "topic", {"README.md": "hi\nmore\n"}, "More", base="main")
    pull = await fake.add_pull("octo", "hello", head="topic")
    gh = make_app(fake).installation(42, "octo", "hello")
    await gh.token()
    fake.fail_next("POST", "/repos/octo/hello/check-runs", 504, after_apply=True)
    run = await gh.create_check_run(name="review", head_sha=pull["head"]["sha"], external_id="wf_9")
    assert list(fake.check_runs) == [run.id]
    fake.fail_next("POST", "/repos/octo/hello/pulls/*/reviews", 502, after_apply=True)
    review = await gh.create_review(pull["number"], body="Summary <!-- bot:run=wf_9 -->")
    assert [r["id"] for r in fake.repos["octo/hello"].reviews[pull["number"]]] == [review.id]


async def test_persistent_failures_of_a_create_still_give_up(fake: FakeGitHub) -> None:
    gh = make_app(fake).installation(42, "octo", "hello")
    fake.fail_next("POST", "/repos/octo/hello/issues/1/comments", 503, times=10)
    with pytest.raises(RetryableError):
        await gh.create_issue_comment(1, "never")
    assert len(fake.calls_to("POST", "/repos/octo/hello/issues/1/comments")) == 4
    assert fake.comments_on("octo", "hello", 1) == []


async def test_a_spent_quota_is_not_hit_again_before_its_reset(fake: FakeGitHub) -> None:
    sleeps = Sleeps()
    app = make_app(fake, sleeps)
    gh = app.installation(42, "octo", "hello")
    await gh.token()
    reset = int(time.time()) + 3600
    fake.response_headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)}
    assert (await gh.get_issue(1)).number == 1  # the last request the quota allowed
    fake.response_headers = {}
    before = len(fake.calls)
    with pytest.raises(RateLimited) as caught:
        await gh.get_repo()
    assert reset <= caught.value.retry_at <= reset + 2
    assert len(fake.calls) == before  # nothing was sent
    assert (await app.get_app()).slug == "repo-agent"  # the App's own quota is separate


async def test_a_quota_reset_within_the_cap_is_waited_for(fake: FakeGitHub) -> None:
    sleeps = Sleeps()
    gh = make_app(fake, sleeps).installation(42, "octo", "hello")
    await gh.token()
    reset = int(time.time()) + 10
    fake.response_headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)}
    await gh.get_issue(1)
    fake.response_headers = {"x-ratelimit-remaining": "4999"}
    await gh.get_issue(1)
    await gh.get_issue(1)
    assert len(sleeps.requested) == 1 and 8 <= sleeps.requested[0] <= 12


async def test_a_pull_request_opened_behind_a_502_is_not_opened_again(
    fake: FakeGitHub,
) -> None:
    bare = fake.repos["octo/hello"].git_dir
    commit_files(bare, "bot/fix-2", {"fix.txt": "fixed\n"}, "Fix", base="main")
    gh = make_app(fake).installation(42, "octo", "hello")
    await gh.token()
    fake.fail_next("POST", "/repos/octo/hello/pulls", 502, after_apply=True)
    pull = await gh.create_pull(head="bot/fix-2", base="main", title="Fix", body="Why.")
    assert pull.head.ref == "bot/fix-2"
    assert len(fake.repos["octo/hello"].pulls) == 1
    assert len(fake.calls_to("POST", "/repos/octo/hello/pulls")) == 1


async def test_a_503_with_retry_after_waits_as_asked(fake: FakeGitHub) -> None:
    sleeps = Sleeps()
    gh = make_app(fake, sleeps).installation(42, "octo", "hello")
    await gh.token()
    fake.fail_next("GET", "/repos/octo/hello/issues/1", 503, headers={"retry-after": "7"})
    assert (await gh.get_issue(1)).number == 1
    assert sleeps.requested == [7.0]
    fake.fail_next("GET", "/repos/octo/hello/issues/1", 503, headers={"retry-after": "7200"})
    with pytest.raises(RetryableError):
        await gh.get_issue(1)
    assert sleeps.requested == [7.0]
