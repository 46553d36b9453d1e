"""The client's pull request and label calls against the fake GitHub: drafts, reviewers, labels."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import httpx
import pytest

from bot.github.client import LABELS_CACHE_SIZE, GitHubApp, InstallationClient
from bot.github.errors import GitHubError
from bot.github.installation import LABELS_TTL_S
from tests.fakes.github import FakeGitHub, commit_files
from tests.github._client_world import API, hello_world, make_app

pytestmark = pytest.mark.anyio


@pytest.fixture
def fake(tmp_path: Path) -> FakeGitHub:
    fake = hello_world(tmp_path)
    fake.set_permission("octo", "hello", "alice", "write")
    commit_files(
        fake.repos["octo/hello"].git_dir, "bot/fix-1-crash", {"f": "1\n"}, "Fix", base="main"
    )
    return fake


@pytest.fixture
def gh(fake: FakeGitHub) -> InstallationClient:
    return make_app(fake).installation(42, "octo", "hello")


async def test_a_draft_pull_is_opened_once_and_found_by_its_branch(
    fake: FakeGitHub, gh: InstallationClient
) -> None:
    assert await gh.find_open_pull_by_head("bot/fix-1-crash") is None
    pull = await gh.create_pull(
        head="bot/fix-1-crash", base="main", title="Fix the crash", body="Fixes #1", draft=True
    )
    assert pull.draft and fake.repos["octo/hello"].pulls[pull.number]["draft"] is True
    found = await gh.find_open_pull_by_head("bot/fix-1-crash")
    assert found is not None and found.number == pull.number
    assert await gh.find_open_pull_by_head("bot/fix-1-crash", base="other") is None
    assert await gh.find_open_pull_by_head("bot/fix-2") is None
    with pytest.raises(GitHubError) as again:
        await gh.create_pull(head="bot/fix-1-crash", base="main", title="Fix", body="Fixes #1")
    assert again.value.status == 422
    assert "A pull request already exists for octo:bot/fix-1-crash." in again.value.message


async def test_a_lost_answer_to_a_draft_pull_finds_the_one_it_made(
    fake: FakeGitHub, gh: InstallationClient
) -> None:
    fake.fail_next("POST", "/repos/octo/hello/pulls", 502, after_apply=True)
    pull = await gh.create_pull(
        head="bot/fix-1-crash", base="main", title="Fix", body="Fixes #1", draft=True
    )
    assert pull.draft and len(fake.repos["octo/hello"].pulls) == 1
    assert len(fake.calls_to("POST", "/repos/octo/hello/pulls")) == 1


async def test_a_branch_with_no_commits_gets_no_pull(
    fake: FakeGitHub, gh: InstallationClient
) -> None:
    bare = fake.repos["octo/hello"].git_dir
    await anyio.run_process(["git", f"--git-dir={bare}", "branch", "bot/empty", "main"])
    with pytest.raises(GitHubError) as empty:
        await gh.create_pull(head="bot/empty", base="main", title="Fix", body="Fixes #1")
    assert empty.value.status == 422
    assert empty.value.message == "Validation Failed: No commits between main and bot/empty"


async def test_the_requester_is_asked_to_review_but_never_the_app_or_a_stranger(
    fake: FakeGitHub, gh: InstallationClient
) -> None:
    pull = await gh.create_pull(head="bot/fix-1-crash", base="main", title="Fix", body="b")
    asked = await gh.request_reviewers(pull.number, ["alice"])
    assert [u["login"] for u in asked.raw["requested_reviewers"]] == ["alice"]
    for login in (fake.bot_login, "mallory"):
        with pytest.raises(GitHubError) as refused:
            await gh.request_reviewers(pull.number, [login])
        assert refused.value.status == 422
    assert [
        u["login"] for u in fake.repos["octo/hello"].pulls[pull.number]["requested_reviewers"]
    ] == ["alice"]


async def test_labels_are_listed_across_pages_and_added(
    fake: FakeGitHub, gh: InstallationClient
) -> None:
    fake.max_per_page = 2
    for name in ("bug", "docs", "enhancement", "question", "wontfix"):
        fake.add_label("octo", "hello", name)
    names = [label.name for label in await gh.list_labels()]
    assert names == ["bug", "docs", "enhancement", "question", "wontfix"]
    assert len(fake.calls_to("GET", "/repos/octo/hello/labels")) == 3
    on_issue = await gh.add_labels(1, ["bug", "question"])
    assert [label.name for label in on_issue] == ["bug", "question"]
    assert [label.name for label in await gh.add_labels(1, ["bug"])] == ["bug", "question"]
    writes = len(fake.writes())
    assert await gh.add_labels(1, []) == [] and len(fake.writes()) == writes


async def test_labels_are_remembered_per_installation_and_repository_for_minutes(
    fake: FakeGitHub,
) -> None:
    now = [time.time()]
    app = GitHubApp(
        fake.app_id,
        fake.private_key_pem,
        api_url=API,
        transport=httpx.ASGITransport(fake.app),
        clock=lambda: now[0],
    )
    fake.add_label("octo", "hello", "bug")
    listed = fake.calls_to("GET", "/repos/octo/hello/labels")
    assert [label.name for label in await app.installation(42, "octo", "hello").list_labels()] == [
        "bug"
    ]
    fake.add_label("octo", "hello", "docs")
    # Another client of the same App (a later run) does not list them again.
    again = await app.installation(42, "Octo", "Hello").list_labels()
    assert [label.name for label in again] == ["bug"]
    assert len(fake.calls_to("GET", "/repos/octo/hello/labels")) == len(listed) + 1
    now[0] += LABELS_TTL_S + 1
    fresh = await app.installation(42, "octo", "hello").list_labels()
    assert [label.name for label in fresh] == ["bug", "docs"]
    assert len(fake.calls_to("GET", "/repos/octo/hello/labels")) == len(listed) + 2
    await app.aclose()


async def test_the_labels_cache_forgets_expired_entries(fake: FakeGitHub) -> None:
    now = [1_800_000_000.0]
    app = GitHubApp(fake.app_id, fake.private_key_pem, api_url=API, clock=lambda: now[0])
    for i in range(LABELS_CACHE_SIZE):
        app.labels.put((i, "octo/hello"), ())
    now[0] += LABELS_TTL_S + 1
    app.labels.put((42, "octo/hello"), ())
    assert app.labels.get((42, "octo/hello")) == ()
    assert app.labels.get((0, "octo/hello")) is None
    assert len(app.labels) == 1
