"""The fake GitHub itself: it must refuse what GitHub refuses, or the client tests prove nothing."""

from __future__ import annotations

import base64
import os
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import jwt
import pytest

from tests.fakes.github import (
    FakeGitHub,
    commit_files,
    init_bare_repo,
    make_fake_github,
    serve_fake_github,
    take_openapi_violations,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def fake(tmp_path: Path) -> FakeGitHub:
    fake = make_fake_github(tmp_path, files={"README.md": "one\ntwo\nthree\n", "old.txt": "x\n"})
    bare = fake.repos["octo/hello"].git_dir
    commit_files(
        bare,
        "feature",
        {"README.md": "one\nTWO\nthree\n", "new.py": "print()\n", "old.txt": None},
        "Feature",
        base="main",
    )
    other = init_bare_repo(tmp_path / "remote" / "octo" / "other.git", {"a": "a\n"})
    fake.add_repo("octo", "other", other)
    fake.add_installation(42, "octo", ["octo/hello", "octo/other"])
    return fake


@pytest.fixture
async def http(fake: FakeGitHub) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(fake.app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://gh.test", trust_env=False
    ) as client:
        yield client


def app_jwt(fake: FakeGitHub, *, iat: float | None = None, exp: float | None = None) -> str:
    now = time.time()
    claims = {
        "iat": int(now - 60 if iat is None else iat),
        "exp": int(now + 540 if exp is None else exp),
        "iss": str(fake.app_id),
    }
    return jwt.encode(claims, fake.private_key_pem, algorithm="RS256")


async def token_for(http: httpx.AsyncClient, fake: FakeGitHub, repos: list[str] | None) -> str:
    body = {"repositories": repos} if repos is not None else {}
    response = await http.post(
        "/app/installations/42/access_tokens",
        json=body,
        headers={"Authorization": f"Bearer {app_jwt(fake)}"},
    )
    assert response.status_code == 201, response.text
    return str(response.json()["token"])


async def test_app_routes_check_the_jwt(fake: FakeGitHub, http: httpx.AsyncClient) -> None:
    good = await http.get("/app", headers={"Authorization": f"Bearer {app_jwt(fake)}"})
    assert good.status_code == 200 and good.json()["slug"] == "repo-agent"
    now = time.time()
    bad = {
        "expired": app_jwt(fake, iat=now - 1200, exp=now - 600),
        "too long": app_jwt(fake, exp=now + 3600),
        "future iat": app_jwt(fake, iat=now + 300),
        "garbage": "abc.def.ghi",
    }
    for name, token in bad.items():
        response = await http.get("/app", headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 401, name
    wrong_iss = jwt.encode(
        {"iat": int(now - 60), "exp": int(now + 500), "iss": "999"},
        fake.private_key_pem,
        algorithm="RS256",
    )
    assert (
        await http.get("/app", headers={"Authorization": f"Bearer {wrong_iss}"})
    ).status_code == 401
    assert (await http.get("/app")).status_code == 401
    installation_token = await token_for(http, fake, None)
    as_token = await http.get("/app", headers={"Authorization": f"token {installation_token}"})
    assert as_token.status_code == 401


async def test_tokens_are_scoped_expiring_and_revocable(
    fake: FakeGitHub, http: httpx.AsyncClient
) -> None:
    narrow = await token_for(http, fake, ["hello"])
    wide = await token_for(http, fake, None)

    def auth(token: str) -> dict[str, str]:
        return {"Authorization": f"token {token}"}

    assert (await http.get("/repos/octo/hello", headers=auth(narrow))).status_code == 200
    assert (await http.get("/repos/octo/other", headers=auth(narrow))).status_code == 404
    assert (await http.get("/repos/octo/other", headers=auth(wide))).status_code == 200
    assert (await http.get("/repos/octo/hello", headers=auth("ghs_unknown"))).status_code == 401
    listed = await http.get("/installation/repositories", headers=auth(narrow))
    assert [r["full_name"] for r in listed.json()["repositories"]] == ["octo/hello"]

    refused = await http.post(
        "/app/installations/42/access_tokens",
        json={"repositories": ["not-installed"]},
        headers={"Authorization": f"Bearer {app_jwt(fake)}"},
    )
    assert refused.status_code == 422

    fake.tokens[narrow].expires_at = time.time() - 1
    assert (await http.get("/repos/octo/hello", headers=auth(narrow))).status_code == 401
    fake.revoke_tokens()
    assert (await http.get("/repos/octo/other", headers=auth(wide))).status_code == 401
    assert all("authorization" not in c.headers for c in fake.calls)
    assert {c.auth for c in fake.calls_to("GET", "/repos/*")} == {"token"}


async def test_injected_faults_answer_then_clear(fake: FakeGitHub, http: httpx.AsyncClient) -> None:
    token = await token_for(http, fake, ["hello"])
    headers = {"Authorization": f"token {token}"}
    fake.fail_next("GET", "/repos/*/hello", 429, times=2, headers={"retry-after": "3"})
    first = await http.get("/repos/octo/hello", headers=headers)
    second = await http.get("/repos/octo/hello", headers=headers)
    third = await http.get("/repos/octo/hello", headers=headers)
    assert (first.status_code, second.status_code, third.status_code) == (429, 429, 200)
    assert first.headers["retry-after"] == "3"
    assert [c.status for c in fake.calls_to("GET", "/repos/octo/hello")] == [429, 429, 200]


async def test_pull_files_diff_and_review_lines(fake: FakeGitHub, http: httpx.AsyncClient) -> None:
    pull = await fake.add_pull("octo", "hello", head="feature", title="Feature")
    n = pull["number"]
    headers = {"Authorization": f"token {await token_for(http, fake, ['hello'])}"}
    files = (await http.get(f"/repos/octo/hello/pulls/{n}/files", headers=headers)).json()
    assert {f["filename"]: f["status"] for f in files} == {
        "README.md": "modified",
        "new.py": "added",
        "old.txt": "removed",
    }
    readme = next(f for f in files if f["filename"] == "README.md")
    assert (readme["additions"], readme["deletions"]) == (1, 1)
    diff = await http.get(
        f"/repos/octo/hello/pulls/{n}", headers={**headers, "Accept": "application/vnd.github.diff"}
    )
    assert diff.text.startswith("diff --git") and "+TWO" in diff.text

    outside = await http.post(
        f"/repos/octo/hello/pulls/{n}/reviews",
        headers=headers,
        json={
            "body": "r",
            "event": "COMMENT",
            "comments": [{"path": "README.md", "line": 9, "body": "b"}],
        },
    )
    assert outside.status_code == 422
    inside = await http.post(
        f"/repos/octo/hello/pulls/{n}/reviews",
        headers=headers,
        json={
            "body": "r",
            "event": "COMMENT",
            "comments": [{"path": "README.md", "line": 2, "body": "why upper case?"}],
        },
    )
    assert inside.status_code == 200
    comments = (await http.get(f"/repos/octo/hello/pulls/{n}/comments", headers=headers)).json()
    assert [(c["path"], c["line"]) for c in comments] == [("README.md", 2)]
    issue = (await http.get(f"/repos/octo/hello/issues/{n}", headers=headers)).json()
    assert issue["pull_request"]["url"].endswith(f"/pulls/{n}")


async def test_contents_and_pagination(fake: FakeGitHub, http: httpx.AsyncClient) -> None:
    headers = {"Authorization": f"token {await token_for(http, fake, ['hello'])}"}
    got = await http.get("/repos/octo/hello/contents/README.md", headers=headers)
    assert base64.b64decode(got.json()["content"]) == b"one\ntwo\nthree\n"
    on_branch = await http.get(
        "/repos/octo/hello/contents/new.py", params={"ref": "feature"}, headers=headers
    )
    assert on_branch.status_code == 200
    assert (await http.get("/repos/octo/hello/contents/new.py", headers=headers)).status_code == 404
    listing = await http.get("/repos/octo/hello/contents/", headers=headers)
    assert sorted(e["name"] for e in listing.json()) == ["README.md", "old.txt"]

    fake.add_issue("octo", "hello", title="t")
    for i in range(5):
        fake.add_comment("octo", "hello", 1, f"c{i}")
    page = await http.get(
        "/repos/octo/hello/issues/1/comments", params={"per_page": 2}, headers=headers
    )
    assert [c["body"] for c in page.json()] == ["c0", "c1"]
    assert 'rel="next"' in page.headers["link"] and "page=2" in page.headers["link"]
    last = await http.get(
        "/repos/octo/hello/issues/1/comments", params={"per_page": 2, "page": 3}, headers=headers
    )
    assert [c["body"] for c in last.json()] == ["c4"] and "link" not in last.headers


async def test_unknown_manifest_codes_are_refused(http: httpx.AsyncClient) -> None:
    assert (await http.post("/app-manifests/nope/conversions")).status_code == 404


def run_git(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> int:
    full = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1", **(env or {})}
    return subprocess.run(["git", *args], cwd=cwd, env=full, capture_output=True).returncode


async def test_git_smart_http_needs_the_token(
    fake: FakeGitHub, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    token = await token_for(http, fake, ["hello"])
    header = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    with_token = {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "http.extraHeader",
        "GIT_CONFIG_VALUE_0": f"Authorization: Basic {header}",
    }
    with serve_fake_github(fake) as base:
        url = f"{base}/octo/hello.git"
        assert run_git("clone", "-q", url, str(tmp_path / "anon")) != 0
        assert run_git("clone", "-q", url, str(tmp_path / "c"), env=with_token) == 0
        assert (tmp_path / "c" / "README.md").read_text() == "one\ntwo\nthree\n"
        other = f"{base}/octo/other.git"
        assert run_git("clone", "-q", other, str(tmp_path / "o"), env=with_token) != 0
        clone = tmp_path / "c"
        (clone / "fix.txt").write_text("fixed\n")
        ident = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "b"}
        ident["GIT_COMMITTER_EMAIL"] = "b@x"
        assert run_git("add", "fix.txt", cwd=clone) == 0
        assert run_git("commit", "-qm", "Fix", cwd=clone, env=ident) == 0
        pushed = run_git(
            "push", "-q", "origin", "HEAD:refs/heads/bot/fix-1", cwd=clone, env=with_token
        )
        assert pushed == 0
    bare = fake.repos["octo/hello"].git_dir
    assert run_git(f"--git-dir={bare}", "rev-parse", "--verify", "refs/heads/bot/fix-1") == 0
    git_calls = fake.calls_to("*", "/octo/hello.git/*")
    assert {c.status for c in git_calls} >= {200, 401}


async def test_a_token_narrowed_by_permission_is_held_to_it(
    fake: FakeGitHub, http: httpx.AsyncClient
) -> None:
    response = await http.post(
        "/app/installations/42/access_tokens",
        json={"repositories": ["hello"], "permissions": {"issues": "write", "checks": "read"}},
        headers={"Authorization": f"Bearer {app_jwt(fake)}"},
    )
    headers = {"Authorization": f"token {response.json()['token']}"}
    fake.add_issue("octo", "hello", title="t")
    assert (await http.get("/repos/octo/hello", headers=headers)).status_code == 200
    comment = await http.post(
        "/repos/octo/hello/issues/1/comments", json={"body": "hi"}, headers=headers
    )
    assert comment.status_code == 201
    check = await http.post(
        "/repos/octo/hello/check-runs", json={"name": "c", "head_sha": "a" * 40}, headers=headers
    )
    assert check.status_code == 403
    assert check.json()["message"] == "Resource not accessible by integration"
    contents = await http.get("/repos/octo/hello/contents/README.md", headers=headers)
    assert contents.status_code == 403


async def test_check_run_and_comment_fields_are_validated(
    fake: FakeGitHub, http: httpx.AsyncClient
) -> None:
    headers = {"Authorization": f"token {await token_for(http, fake, ['hello'])}"}
    fake.add_issue("octo", "hello", title="t")
    sha = "a" * 40
    bad = [
        {"name": "c", "head_sha": sha, "status": "done"},
        {"name": "c", "head_sha": sha, "status": "completed"},
        {"name": "c", "head_sha": sha, "conclusion": "great"},
        {"name": "c", "head_sha": sha, "output": {"title": "t", "summary": "x" * 65536}},
    ]
    for body in bad:
        answer = await http.post("/repos/octo/hello/check-runs", json=body, headers=headers)
        assert answer.status_code == 422, body
    good = await http.post(
        "/repos/octo/hello/check-runs", json={"name": "c", "head_sha": sha}, headers=headers
    )
    assert good.status_code == 201 and good.json()["status"] == "queued"
    comment = await http.post(
        "/repos/octo/hello/issues/1/comments", json={"body": "x"}, headers=headers
    )
    edit = await http.patch(
        f"/repos/octo/hello/issues/comments/{comment.json()['id']}",
        json={"body": 5},
        headers=headers,
    )
    assert edit.status_code == 422
    long = await http.post(
        "/repos/octo/hello/issues/1/comments", json={"body": "x" * 65537}, headers=headers
    )
    assert long.status_code == 422
    refused = sorted(p.field for v in take_openapi_violations() for p in v.problems)
    assert refused == ["body", "conclusion", "output.summary", "status"]  # per GitHub's schema
