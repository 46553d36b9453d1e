"""The GitHub App client against the fake GitHub: the JWT, tokens, and the calls the bot makes."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import anyio
import httpx
import jwt
import pytest

from bot.github._pages import answer
from bot.github.client import (
    PERMISSION_CACHE_SIZE,
    AuthError,
    GitHubApp,
    GitHubError,
    NotFound,
)
from bot.github.errors import RetryableError
from bot.log import bound
from tests.fakes.github import (
    FakeGitHub,
    commit_files,
    init_bare_repo,
    new_private_key_pem,
)
from tests.github._client_world import API, hello_world, make_app

pytestmark = pytest.mark.anyio


@pytest.fixture
def fake(tmp_path: Path) -> FakeGitHub:
    return hello_world(tmp_path)


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
        await answer(gh.github.arequest("GET", "/repos/octo/other"))
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


async def test_permission_lookup_is_cached_and_fails_closed(fake: FakeGitHub) -> None:
    fake.set_permission("octo", "hello", "mia", "maintain")
    gh = make_app(fake).installation(42, "octo", "hello")
    assert await gh.get_collaborator_permission("mia") == "maintain"
    assert await gh.get_collaborator_permission("mia") == "maintain"
    assert len(fake.calls_to("GET", "/repos/octo/hello/collaborators/mia/permission")) == 1
    assert await gh.get_collaborator_permission("stranger") == "none"

    fake.fail_next("GET", "/repos/octo/hello/collaborators/bob/permission", 403, times=1)
    fake.set_permission("octo", "hello", "bob", "write")
    assert await gh.get_collaborator_permission("bob") is None
    # A transient failure is not a verdict: the job is retried later, and nothing is granted.
    fake.fail_next("GET", "/repos/octo/hello/collaborators/bob/permission", 500, times=10)
    with pytest.raises(RetryableError):
        await gh.get_collaborator_permission("bob")
    fake._faults.clear()
    assert await gh.get_collaborator_permission("bob") == "write"


async def test_file_text_of_the_default_branch_and_missing_files(fake: FakeGitHub) -> None:
    gh = make_app(fake).installation(42, "octo", "hello")
    assert await gh.get_file_text(".github/bot.yml") == "x: 1\n"
    assert await gh.get_file_text(".github/missing.yml") is None
    assert await gh.get_file_text(".github") is None  # a directory is not a file
    assert await gh.get_file_text("README.md", ref="main") == "hi\n"


async def test_comments_are_listed_across_pages(fake: FakeGitHub) -> None:
    gh = make_app(fake).installation(42, "octo", "hello")
    for i in range(4):
        fake.add_comment("octo", "hello", 1, f"note {i}", user="alice")
    await gh.create_issue_comment(1, "status <!-- bot:run=wf_1 kind=sticky -->")
    fake.max_per_page = 2
    comments = await gh.list_issue_comments(1)
    assert [c.body for c in comments][:4] == [f"note {i}" for i in range(4)]
    assert len(comments) == 5
    last = comments[-1]
    assert last.user is not None and last.user.is_bot


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
    output = {"title": "Blocked", "summary": "A decision is needed."}
    done = await gh.update_check_run(run.id, conclusion="neutral", output=output)
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


async def test_a_review_is_posted_with_inline_comments_on_the_diff(fake: FakeGitHub) -> None:
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
        await gh.create_review(
            n, body="x", comments=[{"path": "README.md", "line": 40, "body": "far"}]
        )
    assert outside.value.status == 422
    assert [r.id for r in await gh.list_reviews(n)] == [review.id]
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


async def test_concurrent_refusals_mint_one_new_token(fake: FakeGitHub) -> None:
    gh = make_app(fake).installation(42, "octo", "hello")
    await gh.token()
    fake.revoke_tokens()
    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(gh.get_issue, 1)
    assert len(fake.calls_to("POST", "/app/installations/42/access_tokens")) == 2
    # Each GET refused (those sent before the new token was cached) is sent once more.
    statuses = [c.status for c in fake.calls_to("GET", "/repos/octo/hello/issues/1")]
    assert statuses.count(200) == 5 and 1 <= statuses.count(401) <= 5


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
        app.permissions.put((42, "octo/hello", f"user{i}"), "read")
    now[0] += 120
    app.permissions.put((42, "octo/hello", "late"), "write")
    assert app.permissions.get((42, "octo/hello", "late")) == "write"
    assert app.permissions.get((42, "octo/hello", "user0")) is None
    assert len(app.permissions) == 1
