"""Losing an installation: the fake refuses as GitHub does, and the client stops asking."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.github.client import AuthError, NotFound
from bot.github.errors import AccessRevoked, GitHubError
from tests.fakes.github import FakeGitHub, init_bare_repo
from tests.github._client_world import hello_world, make_app

pytestmark = pytest.mark.anyio


@pytest.fixture
def fake(tmp_path: Path) -> FakeGitHub:
    """hello_world plus octo/other in installation 42, and octo/third in installation 43."""
    fake = hello_world(tmp_path)
    for name in ("other", "third"):
        fake.add_repo("octo", name, init_bare_repo(tmp_path / f"{name}.git", {"a": "a\n"}))
        fake.add_issue("octo", name, title="An issue", user="alice")
    fake.installations[42].repos.append("octo/other")
    fake.add_installation(43, "octo", ["octo/third"])
    return fake


async def test_the_fake_refuses_a_suspended_installation(fake: FakeGitHub) -> None:
    app = make_app(fake)
    gh = app.installation(42, "octo", "hello")
    await gh.get_issue(1)
    fake.suspend_installation(42)
    app.forget_token(42, "hello")
    with pytest.raises(GitHubError) as refused:
        await gh.get_issue(1)
    assert refused.value.status == 403 and "suspended" in refused.value.message
    fake.suspend_installation(42, False)
    assert (await gh.get_issue(1)).number == 1


async def test_the_fake_refuses_a_deleted_installations_tokens(fake: FakeGitHub) -> None:
    app = make_app(fake)
    gh = app.installation(42, "octo", "hello")
    await gh.get_issue(1)
    fake.delete_installation(42)
    with pytest.raises(NotFound):  # the cached token got 401; a new one: no installation
        await gh.get_issue(1)
    assert [c.status for c in fake.calls_to("GET", "/repos/octo/hello/issues/1")][-1] == 401


async def test_the_fake_hides_a_removed_repository_even_from_old_tokens(fake: FakeGitHub) -> None:
    app = make_app(fake)
    gh = app.installation(42, "octo", "other")
    await gh.get_issue(1)
    fake.remove_repositories(42, ["octo/other"])
    with pytest.raises(GitHubError):
        await gh.get_issue(1)
    assert fake.calls_to("GET", "/repos/octo/other/issues/1")[-1].status == 404
    assert (await app.installation(42, "octo", "hello").get_issue(1)).number == 1


async def test_revoking_an_installation_drops_its_tokens_and_asks_nothing(
    fake: FakeGitHub,
) -> None:
    app = make_app(fake)
    hello, third = app.installation(42, "octo", "hello"), app.installation(43, "octo", "third")
    await hello.get_issue(1)
    await hello.list_labels()
    await third.get_issue(1)
    app.revoke_access(42)
    before = len(fake.calls)
    with pytest.raises(AccessRevoked) as refused:
        await hello.get_issue(1)
    assert isinstance(refused.value, AuthError)
    with pytest.raises(AccessRevoked):
        await app.installation(42, "octo", "other").token()
    with pytest.raises(AccessRevoked):
        await app.installation_token(42)
    assert len(fake.calls) == before  # nothing was sent
    assert app.labels.get((42, "octo/hello")) is None
    # Another installation is untouched, its cached token included.
    tokens_before = len(fake.calls_to("POST", "/app/installations/*/access_tokens"))
    assert (await third.get_issue(1)).number == 1
    assert len(fake.calls_to("POST", "/app/installations/*/access_tokens")) == tokens_before

    app.restore_access(42)
    assert (await hello.get_issue(1)).number == 1  # a new token from GitHub
    assert fake.calls_to("POST", "/app/installations/42/access_tokens")[-1].status == 201


async def test_revoking_repositories_keeps_the_rest_of_the_installation(fake: FakeGitHub) -> None:
    app = make_app(fake)
    hello, other = app.installation(42, "octo", "hello"), app.installation(42, "octo", "other")
    await hello.get_issue(1)
    await other.get_issue(1)
    await other.get_collaborator_permission("octo")
    app.revoke_access(42, ["Octo/Other"])
    with pytest.raises(AccessRevoked):
        await other.get_issue(1)
    assert app.permissions.get((42, "octo/other", "octo")) is None
    tokens = len(fake.calls_to("POST", "/app/installations/*/access_tokens"))
    assert (await hello.get_issue(1)).number == 1
    assert len(fake.calls_to("POST", "/app/installations/*/access_tokens")) == tokens
    # Adding other repositories back does not undo a revoked installation; unsuspending does.
    app.restore_access(42, ["octo/other"])
    assert (await other.get_issue(1)).number == 1
    app.revoke_access(42)
    app.restore_access(42, ["octo/other"])
    with pytest.raises(AccessRevoked):
        await other.get_issue(1)
