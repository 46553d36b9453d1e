"""The GitHub App client against the fake GitHub: auth, tokens, retries, rate limits, spacing."""

from __future__ import annotations

import itertools
import logging
import time
from pathlib import Path

import anyio
import anyio.lowlevel
import httpx
import jwt
import pytest

from bot.github._retry import rate_limit_wait
from bot.github.client import (
    PERMISSION_CACHE_SIZE,
    AuthError,
    GitHubApp,
    GitHubError,
    NotFound,
    RateLimited,
    RetryableError,
    RetryPolicy,
)
from bot.log import bound
from tests.fakes.github import (
    FakeGitHub,
    commit_files,
    init_bare_repo,
    make_fake_github,
    new_private_key_pem,
)

pytestmark = pytest.mark.anyio
API = "http://github.test"


class Sleeps:
    """Records requested sleeps instead of waiting (the waits themselves are the behaviour)."""

    def __init__(self) -> None:
        self.requested: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.requested.append(seconds)
        await anyio.lowlevel.checkpoint()


@pytest.fixture
def fake(tmp_path: Path) -> FakeGitHub:
    fake = make_fake_github(tmp_path, files={"README.md": "hi\n", ".github/bot.yml": "x: 1\n"})
    fake.add_issue("octo", "hello", title="Crash on start", body="It crashes.", user="alice")
    return fake


def make_app(
    fake: FakeGitHub,
    sleeps: Sleeps | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    **policy: float,
) -> GitHubApp:
    settings = {"mutation_interval_s": 0.0, "backoff_s": 0.01, **policy}
    return GitHubApp(
        fake.app_id,
        fake.private_key_pem,
        api_url=API,
        transport=transport or httpx.ASGITransport(fake.app),
        policy=RetryPolicy(**settings),  # type: ignore[arg-type]
        sleep=sleeps or Sleeps(),
    )


async def test_app_jwt_claims_are_what_github_requires(fake: FakeGitHub) -> None:
    app = make_app(fake)
    before = int(time.time())
    claims = jwt.decode(app.jwt(), fake.public_key, algorithms=["RS256"])  # type: ignore[arg-type]
    after = int(time.time())
    assert claims["iss"] == str(fake.app_id)
    assert before - 60 <= claims["iat"] <= after - 60
    assert claims["exp"] - claims["iat"] <= 600 + 60
    assert claims["exp"] <= after + 600


async def test_the_jwt_is_reused_for_five_minutes_then_re_signed(fake: FakeGitHub) -> None:
    now = [1_800_000_000.0]
    app = GitHubApp(fake.app_id, fake.private_key_pem, clock=lambda: now[0])
    first = app.jwt()
    now[0] += 299
    assert app.jwt() == first
    now[0] += 2
    second = app.jwt()
    assert second != first
    claims = jwt.decode(
        second,
        fake.public_key,  # type: ignore[arg-type]
        algorithms=["RS256"],
        options={"verify_exp": False, "verify_iat": False},
    )
    assert claims["iat"] == int(now[0]) - 60


def test_a_key_that_is_not_pem_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="bot setup"):
        GitHubApp(1, "-----BEGIN RSA PRIVATE KEY-----\nnot base64\n-----END RSA PRIVATE KEY-----\n")
    with pytest.raises(ValueError, match="PEM"):
        GitHubApp(1, "ghp_not_a_key")


async def test_slug_is_learned_from_get_app_unless_configured(fake: FakeGitHub) -> None:
    app = make_app(fake)
    assert await app.slug() == "repo-agent"
    assert await app.slug() == "repo-agent"
    assert len(fake.calls_to("GET", "/app")) == 1
    configured = GitHubApp(
        fake.app_id,
        fake.private_key_pem,
        api_url=API,
        app_slug="my-bot",
        transport=httpx.ASGITransport(fake.app),
    )
    assert await configured.slug() == "my-bot"
    assert len(fake.calls_to("GET", "/app")) == 1


async def test_a_jwt_signed_with_another_key_is_refused(fake: FakeGitHub) -> None:
    other = FakeGitHub(private_key_pem=new_private_key_pem())  # another key pair
    app = GitHubApp(
        fake.app_id, other.private_key_pem, api_url=API, transport=httpx.ASGITransport(fake.app)
    )
    with pytest.raises(AuthError) as caught:
        await app.get_app()
    assert caught.value.status == 401


async def test_installations_are_listed_across_pages(fake: FakeGitHub) -> None:
    fake.add_installation(43, "other", [])
    fake.add_installation(44, "third", [])
    fake.max_per_page = 2
    installations = await make_app(fake).list_installations()
    assert [i.id for i in installations] == [42, 43, 44]
    assert len(fake.calls_to("GET", "/app/installations")) == 2


async def test_token_is_narrowed_to_the_repository_and_cached(fake: FakeGitHub) -> None:
    gh = make_app(fake).installation(42, "octo", "hello")
    await gh.get_repo()
    await gh.get_issue(1)
    await gh.token()
    minted = fake.calls_to("POST", "/app/installations/42/access_tokens")
    assert len(minted) == 1
    assert minted[0].json == {"repositories": ["hello"]}
    assert minted[0].auth == "jwt"
    assert all(c.auth == "token" for c in fake.calls_to("GET", "/repos/*"))


async def test_narrowed_token_cannot_reach_another_repository(
    fake: FakeGitHub, tmp_path: Path
) -> None:
    other = init_bare_repo(tmp_path / "other.git", {"a.txt": "a\n"})
    fake.add_repo("octo", "other", other)
    fake.add_installation(42, "octo", ["octo/hello", "octo/other"])
    gh = make_app(fake).installation(42, "octo", "hello")
    with pytest.raises(NotFound):
        await gh.request("GET", "/repos/octo/other")
    assert (await gh.get_repo()).full_name == "octo/hello"


async def test_permissions_narrow_the_token_when_asked(fake: FakeGitHub) -> None:
    gh = make_app(fake).installation(42, "octo", "hello", permissions={"issues": "write"})
    await gh.get_issue(1)
    minted = fake.calls_to("POST", "/app/installations/42/access_tokens")
    assert minted[0].json == {"repositories": ["hello"], "permissions": {"issues": "write"}}


async def test_a_revoked_token_is_replaced_once(fake: FakeGitHub) -> None:
    gh = make_app(fake).installation(42, "octo", "hello")
    first = await gh.token()
    fake.revoke_tokens()
    issue = await gh.get_issue(1)
    assert issue.title == "Crash on start"
    assert await gh.token() != first
    assert len(fake.calls_to("POST", "/app/installations/42/access_tokens")) == 2


async def test_a_401_that_survives_a_fresh_token_raises(fake: FakeGitHub) -> None:
    gh = make_app(fake).installation(42, "octo", "hello")
    fake.fail_next("GET", "/repos/octo/hello/issues/1", 401, times=5, message="Bad credentials")
    with pytest.raises(AuthError):
        await gh.get_issue(1)
    assert len(fake.calls_to("GET", "/repos/octo/hello/issues/1")) == 2
    assert len(fake.calls_to("POST", "/app/installations/*")) == 2


async def test_a_token_close_to_expiry_is_not_reused(fake: FakeGitHub) -> None:
    fake.token_ttl_s = 240  # inside the five-minute refresh margin
    gh = make_app(fake).installation(42, "octo", "hello")
    await gh.get_issue(1)
    await gh.get_issue(1)
    assert len(fake.calls_to("POST", "/app/installations/42/access_tokens")) == 2


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


async def test_permission_lookup_is_cached_and_fails_closed(fake: FakeGitHub) -> None:
    fake.set_permission("octo", "hello", "mia", "maintain")
    gh = make_app(fake).installation(42, "octo", "hello")
    assert await gh.get_collaborator_permission("mia") == "maintain"
    assert await gh.get_collaborator_permission("mia") == "maintain"
    assert len(fake.calls_to("GET", "/repos/octo/hello/collaborators/mia/permission")) == 1
    assert await gh.get_collaborator_permission("stranger") == "none"

    fake.fail_next("GET", "/repos/octo/hello/collaborators/bob/permission", 500, times=10)
    fake.set_permission("octo", "hello", "bob", "write")
    assert await gh.get_collaborator_permission("bob") is None
    fake._faults.clear()
    assert await gh.get_collaborator_permission("bob") == "write"


async def test_file_text_of_the_default_branch_and_missing_files(fake: FakeGitHub) -> None:
    gh = make_app(fake).installation(42, "octo", "hello")
    assert await gh.get_file_text(".github/bot.yml") == "x: 1\n"
    assert await gh.get_file_text(".github/missing.yml") is None
    assert await gh.get_file_text(".github") is None  # a directory is not a file
    assert await gh.get_file_text("README.md", ref="main") == "hi\n"


async def test_comments_found_by_marker_across_pages(fake: FakeGitHub) -> None:
    gh = make_app(fake).installation(42, "octo", "hello")
    for i in range(4):
        fake.add_comment("octo", "hello", 1, f"note {i}", user="alice")
    await gh.create_issue_comment(1, "status <!-- bot:run=wf_1 kind=sticky -->")
    fake.max_per_page = 2
    found = await gh.find_issue_comment(1, "<!-- bot:run=wf_1 kind=sticky -->")
    assert found is not None and found.user is not None and found.user.is_bot
    assert await gh.find_issue_comment(1, "<!-- bot:run=wf_2 kind=sticky -->") is None
    assert len(await gh.list_issue_comments(1)) == 5


async def test_requests_carry_the_delivery_id(fake: FakeGitHub) -> None:
    gh = make_app(fake).installation(42, "octo", "hello")
    with bound(delivery_id="d-123"):
        await gh.get_issue(1)
    await gh.get_repo()
    traced = fake.calls_to("GET", "/repos/octo/hello/issues/1")[0]
    assert traced.headers.get("x-bot-delivery") == "d-123"
    assert "x-bot-delivery" not in fake.calls_to("GET", "/repos/octo/hello")[0].headers


async def test_tokens_and_jwts_never_reach_the_logs(
    fake: FakeGitHub, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    app = make_app(fake)
    gh = app.installation(42, "octo", "hello")
    fake.fail_next("GET", "/repos/octo/hello/issues/1", 502)
    await gh.get_issue(1)
    fake.revoke_tokens()
    await gh.get_issue(1)
    secrets = [t for t in fake.tokens] + [app.jwt()]
    text = "\n".join(r.getMessage() + repr(r.__dict__) for r in caplog.records)
    assert "installation token issued" in text
    for secret in secrets:
        assert secret not in text


async def test_reactions_and_check_runs_round_trip(fake: FakeGitHub) -> None:
    gh = make_app(fake).installation(42, "octo", "hello")
    comment = fake.add_comment("octo", "hello", 1, "@repo-agent ask why", user="alice")
    await gh.add_reaction(comment["id"], "eyes")
    await gh.add_issue_reaction(1)
    assert [r["content"] for r in fake.reactions] == ["eyes", "eyes"]
    git_dir = fake.repos["octo/hello"].git_dir
    head = (await anyio.run_process(["git", f"--git-dir={git_dir}", "rev-parse", "main"])).stdout
    head_sha = head.decode().strip()
    run = await gh.create_check_run(name="bot review", head_sha=head_sha, external_id="wf_abc")
    assert run.status == "in_progress"
    done = await gh.update_check_run(run.id, conclusion="neutral", output={"title": "Blocked"})
    assert (done.status, done.conclusion) == ("completed", "neutral")
    found = await gh.find_check_run("main", "wf_abc")
    assert found is not None and found.id == run.id
    assert await gh.find_check_run(head_sha, "wf_other") is None


class LinkRewriter(httpx.AsyncBaseTransport):
    """Points every `Link` header at another host, and records the hosts asked."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.hosts: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.hosts.append(request.url.host)
        response = await self.inner.handle_async_request(request)
        if "link" in response.headers:
            response.headers["link"] = response.headers["link"].replace(
                "github.test", "elsewhere.example"
            )
        return response


async def test_pagination_never_follows_a_link_to_another_host(fake: FakeGitHub) -> None:
    for i in range(3):
        fake.add_comment("octo", "hello", 1, f"note {i}")
    fake.max_per_page = 2
    rewriter = LinkRewriter(httpx.ASGITransport(fake.app))
    gh = make_app(fake, transport=rewriter).installation(42, "octo", "hello")
    assert [c.body for c in await gh.list_issue_comments(1)] == ["note 0", "note 1"]
    assert set(rewriter.hosts) == {"github.test"}


async def test_reviews_are_found_by_marker_and_updated(fake: FakeGitHub) -> None:
    bare = fake.repos["octo/hello"].git_dir
    commit_files(bare, "topic", {"README.md": "hi\nmore\n"}, "More", base="main")
    pull = await fake.add_pull("octo", "hello", head="topic")
    n = pull["number"]
    gh = make_app(fake).installation(42, "octo", "hello")
    marker = "<!-- bot:run=wf_0123456789ab kind=review -->"
    review = await gh.create_review(
        n,
        body=f"Looks fine.\n{marker}",
        commit_id=pull["head"]["sha"],
        comments=[{"path": "README.md", "line": 2, "side": "RIGHT", "body": "nice"}],
    )
    assert review.state == "COMMENTED"
    with pytest.raises(GitHubError) as outside:
        await gh.create_review(n, body="x", comments=[{"path": "README.md", "line": 40}])
    assert outside.value.status == 422
    found = await gh.find_review(n, marker)
    assert found is not None and found.id == review.id
    updated = await gh.update_review(n, review.id, f"Updated.\n{marker}")
    assert updated.body is not None and updated.body.startswith("Updated.")
    assert len(await gh.list_reviews(n)) == 1
    inline = await gh.list_review_comments(n)
    assert [(c.path, c.line, c.body) for c in inline] == [("README.md", 2, "nice")]


async def test_a_pull_request_is_opened_from_a_branch(fake: FakeGitHub) -> None:
    bare = fake.repos["octo/hello"].git_dir
    commit_files(bare, "bot/fix-1", {"fix.txt": "fixed\n"}, "Fix", base="main")
    gh = make_app(fake).installation(42, "octo", "hello")
    pull = await gh.create_pull(head="bot/fix-1", base="main", title="Fix it", body="Why.")
    assert pull.head.ref == "bot/fix-1" and pull.user is not None and pull.user.is_bot
    assert [f.filename for f in await gh.list_pull_files(pull.number)] == ["fix.txt"]
    with pytest.raises(GitHubError) as again:
        await gh.create_pull(head="bot/fix-1", base="main", title="Fix it", body="Why.")
    assert again.value.status == 422


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


async def test_concurrent_refusals_mint_one_new_token(fake: FakeGitHub) -> None:
    gh = make_app(fake).installation(42, "octo", "hello")
    await gh.token()
    fake.revoke_tokens()
    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(gh.get_issue, 1)
    assert len(fake.calls_to("POST", "/app/installations/42/access_tokens")) == 2
    assert len(fake.calls_to("GET", "/repos/octo/hello/issues/1")) == 10


@pytest.mark.parametrize(
    ("owner", "repo"),
    [
        pytest.param("..", "x", id="dot-dot"),
        pytest.param("octo", "a/b", id="slash"),
        pytest.param("octo", "", id="empty"),
        pytest.param("o o", "x", id="space"),
    ],
)
def test_odd_repository_names_are_refused_at_construction(
    fake: FakeGitHub, owner: str, repo: str
) -> None:
    with pytest.raises(ValueError, match="not a GitHub owner or repository name"):
        make_app(fake).installation(42, owner, repo)


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


async def test_tokens_with_different_permissions_are_kept_apart(fake: FakeGitHub) -> None:
    app = make_app(fake)
    reader = app.installation(42, "octo", "hello", permissions={"issues": "read"})
    writer = app.installation(42, "octo", "hello", permissions={"issues": "write"})
    assert await reader.token() != await writer.token()
    assert await app.installation(42, "octo", "hello", permissions={"issues": "read"}).token() == (
        await reader.token()
    )
    with pytest.raises(GitHubError) as refused:
        await reader.create_issue_comment(1, "not allowed")
    assert refused.value.status == 403
    assert (await writer.create_issue_comment(1, "allowed")).body == "allowed"
    assert len(fake.calls_to("POST", "/app/installations/42/access_tokens")) == 2


async def test_the_permission_cache_forgets_expired_entries(fake: FakeGitHub) -> None:
    now = [1_800_000_000.0]
    app = GitHubApp(
        fake.app_id,
        fake.private_key_pem,
        api_url=API,
        transport=httpx.ASGITransport(fake.app),
        clock=lambda: now[0],
    )
    for i in range(PERMISSION_CACHE_SIZE):
        app.remember_permission((42, "octo/hello", f"user{i}"), "read")
    now[0] += 120
    app.remember_permission((42, "octo/hello", "late"), "write")
    assert app.cached_permission((42, "octo/hello", "late")) == "write"
    assert app.cached_permission((42, "octo/hello", "user0")) is None
    assert len(app._permissions) == 1


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
