"""The fake GitHub refuses pushes and pull request calls as GitHub does, so client tests mean it."""

from __future__ import annotations

import base64
import os
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import jwt
import pytest

from tests.fakes.github import (
    FakeGitHub,
    Push,
    commit_files,
    make_fake_github,
    serve_fake_github,
    take_openapi_violations,
)

pytestmark = pytest.mark.anyio
ZERO = "0" * 40


@pytest.fixture
def fake(tmp_path: Path) -> FakeGitHub:
    fake = make_fake_github(tmp_path, files={"README.md": "one\n"})
    fake.set_permission("octo", "hello", "alice", "write")
    fake.set_permission("octo", "hello", "rita", "read")
    return fake


@pytest.fixture
async def http(fake: FakeGitHub) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(fake.app), base_url="http://gh.test", trust_env=False
    ) as client:
        now = time.time()
        claims = {"iat": int(now - 60), "exp": int(now + 540), "iss": str(fake.app_id)}
        app_jwt = jwt.encode(claims, fake.private_key_pem, algorithm="RS256")
        minted = await client.post(
            "/app/installations/42/access_tokens",
            json={"repositories": ["hello"]},
            headers={"Authorization": f"Bearer {app_jwt}"},
        )
        client.headers["Authorization"] = f"token {minted.json()['token']}"
        yield client


@pytest.fixture
def clone(fake: FakeGitHub, http: httpx.AsyncClient, tmp_path: Path) -> Iterator[Path]:
    """A clone of octo/hello whose git sends the installation token as a header."""
    token = http.headers["Authorization"].removeprefix("token ")
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    path = tmp_path / "clone"
    with serve_fake_github(fake) as base:
        header = f"http.extraHeader=Authorization: Basic {basic}"
        git(tmp_path, "-c", header, "clone", "-q", f"{base}/octo/hello.git", str(path))
        git(path, "config", "http.extraHeader", f"Authorization: Basic {basic}")
        yield path


def git(cwd: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    ident = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "b"}
    env = {**os.environ, **ident, "GIT_COMMITTER_EMAIL": "b@x", "GIT_TERMINAL_PROMPT": "0"}
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    result = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    if ok:
        assert result.returncode == 0, result.stderr
    return result


def commit(clone: Path, name: str, text: str) -> str:
    (clone / name).write_text(text)
    git(clone, "add", name)
    git(clone, "commit", "-qm", f"Change {name}")
    return git(clone, "rev-parse", "HEAD").stdout.strip()


def tip(fake: FakeGitHub, branch: str) -> str:
    bare = fake.repos["octo/hello"].git_dir
    return git(bare, f"--git-dir={bare}", "rev-parse", f"refs/heads/{branch}").stdout.strip()


# -- pushes ------------------------------------------------------------------------------------


async def test_a_push_to_the_default_branch_is_refused_as_branch_protection(
    fake: FakeGitHub, clone: Path
) -> None:
    before = tip(fake, "main")
    commit(clone, "fix.txt", "fixed\n")
    pushed = git(clone, "push", "origin", "HEAD:refs/heads/main", ok=False)
    assert pushed.returncode != 0
    assert "remote: error: GH006: Protected branch update failed for refs/heads/main." in (
        pushed.stderr
    )
    assert "[remote rejected]" in pushed.stderr
    assert tip(fake, "main") == before and fake.pushes == []


async def test_a_push_to_a_protected_branch_is_refused(fake: FakeGitHub, clone: Path) -> None:
    commit_files(fake.repos["octo/hello"].git_dir, "release", {"r.txt": "1\n"}, "Release")
    fake.protect_branch("octo", "hello", "release")
    sha = commit(clone, "fix.txt", "fixed\n")
    pushed = git(clone, "push", "origin", f"{sha}:refs/heads/release", "--force", ok=False)
    assert "GH006: Protected branch update failed for refs/heads/release." in pushed.stderr
    deleted = git(clone, "push", "origin", ":refs/heads/release", ok=False)
    assert deleted.returncode != 0 and "GH006" in deleted.stderr
    assert fake.pushes == []


async def test_new_branches_and_fast_forwards_are_recorded_and_force_pushes_refused(
    fake: FakeGitHub, clone: Path
) -> None:
    first = commit(clone, "fix.txt", "fixed\n")
    git(clone, "push", "-q", "origin", "HEAD:refs/heads/bot/fix-1")
    second = commit(clone, "fix.txt", "fixed again\n")
    git(clone, "push", "-q", "origin", "HEAD:refs/heads/bot/fix-1")
    assert fake.pushes == [
        Push("octo/hello", "refs/heads/bot/fix-1", ZERO, first),
        Push("octo/hello", "refs/heads/bot/fix-1", first, second),
    ]
    git(clone, "reset", "-q", "--hard", "HEAD~2")
    other = commit(clone, "other.txt", "rewritten\n")
    forced = git(clone, "push", "--force", "origin", "HEAD:refs/heads/bot/fix-1", ok=False)
    assert forced.returncode != 0 and "non-fast-forward" in forced.stderr
    assert tip(fake, "bot/fix-1") == second and other not in {p.new for p in fake.pushes}


async def test_a_push_moves_the_open_pull_request_of_its_branch(
    fake: FakeGitHub, http: httpx.AsyncClient, clone: Path
) -> None:
    commit(clone, "fix.txt", "fixed\n")
    git(clone, "push", "-q", "origin", "HEAD:refs/heads/bot/fix-1")
    opened = await http.post(
        "/repos/octo/hello/pulls",
        json={"head": "bot/fix-1", "base": "main", "title": "Fix", "body": "b", "draft": True},
    )
    assert opened.status_code == 201 and opened.json()["draft"] is True
    newer = commit(clone, "more.txt", "more\n")
    git(clone, "push", "-q", "origin", "HEAD:refs/heads/bot/fix-1")
    pull = (await http.get(f"/repos/octo/hello/pulls/{opened.json()['number']}")).json()
    assert pull["head"]["sha"] == newer
    files = await http.get(f"/repos/octo/hello/pulls/{pull['number']}/files")
    assert sorted(f["filename"] for f in files.json()) == ["fix.txt", "more.txt"]


# -- pull requests -----------------------------------------------------------------------------


def validation_messages(response: httpx.Response) -> list[str]:
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["message"] == "Validation Failed"
    return [e.get("message") or f"{e['field']} {e['code']}" for e in body["errors"]]


async def test_pull_requests_are_refused_as_github_refuses_them(
    fake: FakeGitHub, http: httpx.AsyncClient
) -> None:
    bare = fake.repos["octo/hello"].git_dir
    commit_files(bare, "bot/fix-1", {"fix.txt": "fixed\n"}, "Fix", base="main")
    git(bare, f"--git-dir={bare}", "update-ref", "refs/heads/bot/same", tip(fake, "main"))

    def pull(head: str, base: str = "main") -> dict[str, object]:
        return {"head": head, "base": base, "title": "Fix", "body": "Fixes #1"}

    same = await http.post("/repos/octo/hello/pulls", json=pull("bot/same"))
    assert validation_messages(same) == ["No commits between main and bot/same"]
    missing = await http.post("/repos/octo/hello/pulls", json=pull("bot/nope"))
    assert validation_messages(missing) == ["head invalid"]
    no_base = await http.post("/repos/octo/hello/pulls", json=pull("bot/fix-1", "nope"))
    assert validation_messages(no_base) == ["base invalid"]
    fork = await http.post("/repos/octo/hello/pulls", json=pull("mallory:bot/fix-1"))
    assert validation_messages(fork) == ["head invalid"]

    first = await http.post("/repos/octo/hello/pulls", json=pull("octo:bot/fix-1"))
    assert first.status_code == 201, first.text
    assert first.json()["head"]["label"] == "octo:bot/fix-1" and first.json()["draft"] is False
    again = await http.post("/repos/octo/hello/pulls", json=pull("bot/fix-1"))
    assert validation_messages(again) == ["A pull request already exists for octo:bot/fix-1."]
    listed = await http.get("/repos/octo/hello/pulls", params={"head": "octo:bot/fix-1"})
    assert [p["number"] for p in listed.json()] == [first.json()["number"]]
    assert len(fake.repos["octo/hello"].pulls) == 1


async def test_reviewers_must_be_collaborators_other_than_the_author(
    fake: FakeGitHub, http: httpx.AsyncClient
) -> None:
    commit_files(fake.repos["octo/hello"].git_dir, "bot/fix-1", {"f": "1\n"}, "Fix", base="main")
    opened = await http.post(
        "/repos/octo/hello/pulls", json={"head": "bot/fix-1", "base": "main", "title": "Fix"}
    )
    path = f"/repos/octo/hello/pulls/{opened.json()['number']}/requested_reviewers"
    author = await http.post(path, json={"reviewers": [fake.bot_login]})
    assert author.status_code == 422
    assert author.json()["message"] == "Review cannot be requested from pull request author."
    stranger = await http.post(path, json={"reviewers": ["mallory"]})
    assert stranger.status_code == 422
    assert "not a collaborator of the octo/hello repository" in stranger.json()["message"]
    for _ in range(2):
        asked = await http.post(path, json={"reviewers": ["alice", "rita"]})
        assert asked.status_code == 201
    assert [u["login"] for u in asked.json()["requested_reviewers"]] == ["alice", "rita"]
    missing = await http.post(
        "/repos/octo/hello/pulls/999/requested_reviewers", json={"reviewers": ["alice"]}
    )
    assert missing.status_code == 404


# -- labels ------------------------------------------------------------------------------------


async def test_labels_are_listed_in_pages_and_added_creating_unknown_ones(
    fake: FakeGitHub, http: httpx.AsyncClient
) -> None:
    for name in ("bug", "docs", "enhancement"):
        fake.add_label("octo", "hello", name, description=f"{name} things")
    page = await http.get("/repos/octo/hello/labels", params={"per_page": 2})
    assert [label["name"] for label in page.json()] == ["bug", "docs"]
    assert 'rel="next"' in page.headers["link"]
    fake.add_issue("octo", "hello", title="Crash", labels=["docs"])

    added = await http.post(
        "/repos/octo/hello/issues/1/labels", json={"labels": ["BUG", "needs-info", "docs"]}
    )
    assert added.status_code == 200
    assert [label["name"] for label in added.json()] == ["docs", "bug", "needs-info"]
    created = fake.repos["octo/hello"].labels["needs-info"]
    assert (created["color"], created["description"]) == ("ededed", None)
    assert fake.repos["octo/hello"].labels_created == ["needs-info"]
    bare_list = await http.post("/repos/octo/hello/issues/1/labels", json=["bug"])
    assert bare_list.status_code == 422  # GitHub's description has `{"labels": [...]}` only
    assert [v.operation for v in take_openapi_violations()] == [
        "POST /repos/{owner}/{repo}/issues/{issue_number}/labels"
    ]
    listed = await http.get("/repos/octo/hello/labels")
    assert len(listed.json()) == 4
    missing = await http.post("/repos/octo/hello/issues/9/labels", json={"labels": ["bug"]})
    assert missing.status_code == 404
    blank = await http.post("/repos/octo/hello/issues/1/labels", json={"labels": [" "]})
    assert blank.status_code == 422
