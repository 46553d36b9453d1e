"""Bare mirrors fetched from the fake GitHub over git smart HTTP on 127.0.0.1."""

from __future__ import annotations

import base64
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from bot.git.checkout import LAST_USED, CheckoutError, Mirrors, PushRefused
from bot.github.client import GitHubApp, InstallationClient, RetryPolicy
from tests.fakes.github import (
    FakeGitHub,
    commit_files,
    init_bare_repo,
    make_fake_github,
    serve_app,
    serve_fake_github,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def fake(tmp_path: Path) -> FakeGitHub:
    return make_fake_github(tmp_path, files={"README.md": "hello\n", "src/app.py": "x = 1\n"})


@pytest.fixture
def base_url(fake: FakeGitHub) -> Iterator[str]:
    with serve_fake_github(fake) as url:
        yield url


def client_for(fake: FakeGitHub, repo: str = "hello") -> InstallationClient:
    app = GitHubApp(
        fake.app_id,
        fake.private_key_pem,
        api_url="http://github.test",
        transport=httpx.ASGITransport(fake.app),
        policy=RetryPolicy(mutation_interval_s=0),
    )
    return app.installation(42, "octo", repo)


def rev(git_dir: Path, ref: str) -> str:
    out = subprocess.run(
        ["git", f"--git-dir={git_dir}", "rev-parse", ref], capture_output=True, check=True
    )
    return out.stdout.decode().strip()


def sh(git_dir: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Run git on a repository synchronously (test set-up and inspection)."""
    ident = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b", "GIT_COMMITTER_NAME": "a"}
    full_env = {**os.environ, **ident, "GIT_COMMITTER_EMAIL": "a@b", **(env or {})}
    out = subprocess.run(
        ["git", f"--git-dir={git_dir}", *args], capture_output=True, check=True, env=full_env
    )
    return out.stdout.decode().strip()


def in_tree(worktree: Path, *args: str) -> None:
    ident = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b", "GIT_COMMITTER_NAME": "a"}
    env = {**os.environ, **ident, "GIT_COMMITTER_EMAIL": "a@b"}
    subprocess.run(["git", "-C", str(worktree), *args], check=True, capture_output=True, env=env)


def file_contents(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


def git_calls(fake: FakeGitHub, repo: str = "hello") -> list[Any]:
    return fake.calls_to("*", f"/octo/{repo}.git/*")


async def test_mirror_fetches_with_the_token_in_a_header_only(
    fake: FakeGitHub, base_url: str, data_dir: Path
) -> None:
    gh = client_for(fake)
    mirrors = Mirrors(data_dir, web_url=base_url, allow_http=True)
    main_sha = rev(fake.repos["octo/hello"].git_dir, "main")
    commands: list[tuple[list[str], dict[str, str]]] = []
    real = anyio.run_process

    async def recording(cmd: list[str], **kwargs: Any) -> Any:
        commands.append((list(cmd), dict(kwargs.get("env") or {})))
        return await real(cmd, **kwargs)

    with mock.patch("bot.git.checkout.anyio.run_process", recording):
        git_dir = await mirrors.ensure_commit(gh, main_sha, branch="main")

    assert git_dir == data_dir / "repos" / "octo" / "hello.git"
    assert rev(git_dir, "refs/heads/main") == main_sha
    calls = git_calls(fake)
    assert calls and all(c.auth == "basic" and c.installation_id == 42 for c in calls)
    assert all(c.status == 200 for c in calls)

    token = await gh.token()
    encoded = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    assert any(encoded in " ".join(env.values()) for _, env in commands)
    for argv, _ in commands:
        assert not any(token in arg or encoded in arg for arg in argv)
    for path, data in file_contents(data_dir).items():
        assert token.encode() not in data and encoded.encode() not in data, path
    config = (git_dir / "config").read_text()
    assert base_url in config and "x-access-token" not in config


async def test_present_commits_are_not_fetched_again(
    fake: FakeGitHub, base_url: str, data_dir: Path
) -> None:
    gh = client_for(fake)
    mirrors = Mirrors(data_dir, web_url=base_url, allow_http=True)
    bare = fake.repos["octo/hello"].git_dir
    first = rev(bare, "main")
    await mirrors.ensure_commit(gh, first, branch="main")
    before = len(git_calls(fake))
    await mirrors.ensure_commit(gh, first, branch="main")
    assert len(git_calls(fake)) == before

    second = commit_files(bare, "main", {"README.md": "changed\n"}, "Change")
    await mirrors.ensure_commit(gh, second, branch="main")
    assert len(git_calls(fake)) > before
    assert rev(mirrors.path_for("octo", "hello"), "refs/heads/main") == second


async def test_pull_heads_come_from_refs_pull_even_from_forks(
    fake: FakeGitHub, base_url: str, data_dir: Path
) -> None:
    bare = fake.repos["octo/hello"].git_dir
    head = commit_files(bare, "fork-tmp", {"src/app.py": "x = 2\n"}, "Fork change", base="main")
    sh(bare, "update-ref", "-d", "refs/heads/fork-tmp")
    pull = await fake.add_pull("octo", "hello", head=head, head_repo="someone/hello")
    gh = client_for(fake)
    mirrors = Mirrors(data_dir, web_url=base_url, allow_http=True)
    git_dir = await mirrors.ensure_commit(gh, head, pull_number=pull["number"])
    assert rev(git_dir, f"refs/pull/{pull['number']}/head") == head
    assert rev(git_dir, "refs/remotes/origin/HEAD") == rev(bare, "main")
    assert sh(git_dir, "merge-base", head, "refs/remotes/origin/HEAD") == rev(bare, "main")


async def test_a_commit_can_be_fetched_by_id(
    fake: FakeGitHub, base_url: str, data_dir: Path
) -> None:
    bare = fake.repos["octo/hello"].git_dir
    sha = commit_files(bare, "topic", {"b.txt": "b\n"}, "Topic", base="main")
    git_dir = await Mirrors(data_dir, web_url=base_url, allow_http=True).ensure_commit(
        client_for(fake), sha
    )
    assert rev(git_dir, f"{sha}^{{commit}}") == sha


async def test_a_refused_token_fails_without_leaking_it(
    fake: FakeGitHub, base_url: str, data_dir: Path
) -> None:
    gh = client_for(fake)
    token = await gh.token()
    fake.revoke_tokens()
    mirrors = Mirrors(data_dir, web_url=base_url, allow_http=True)
    with pytest.raises(CheckoutError) as caught:
        await mirrors.ensure_commit(
            gh, rev(fake.repos["octo/hello"].git_dir, "main"), branch="main"
        )
    assert token not in str(caught.value)
    assert {c.status for c in git_calls(fake)} == {401}


async def test_missing_commit_is_reported(fake: FakeGitHub, base_url: str, data_dir: Path) -> None:
    mirrors = Mirrors(data_dir, web_url=base_url, allow_http=True)
    with pytest.raises(CheckoutError, match="not found after fetching"):
        await mirrors.ensure_commit(client_for(fake), "0" * 40, branch="main")


async def test_hooks_and_submodules_of_a_hostile_repository_do_nothing(
    fake: FakeGitHub, base_url: str, data_dir: Path, tmp_path: Path
) -> None:
    secret = init_bare_repo(tmp_path / "remote" / "octo" / "secret.git", {"key": "s3cret\n"})
    fake.add_repo("octo", "secret", secret)
    fake.add_installation(42, "octo", ["octo/hello", "octo/secret"])
    secret_sha = rev(secret, "main")
    bare = fake.repos["octo/hello"].git_dir
    gitmodules = f'[submodule "vendor"]\n\tpath = vendor\n\turl = {base_url}/octo/secret.git\n'
    commit_files(bare, "main", {".gitmodules": gitmodules}, "Add a submodule")
    index = {"GIT_INDEX_FILE": str(tmp_path / "idx")}
    sh(bare, "read-tree", "main", env=index)
    sh(bare, "update-index", "--add", "--cacheinfo", f"160000,{secret_sha},vendor", env=index)
    tree = sh(bare, "write-tree", env=index)
    head = sh(bare, "commit-tree", tree, "-p", "main", "-m", "gitlink")
    sh(bare, "update-ref", "refs/heads/main", head)

    gh = client_for(fake)
    mirrors = Mirrors(data_dir, web_url=base_url, allow_http=True)
    git_dir = mirrors.path_for("octo", "hello")
    await mirrors.fetch(gh, ["+refs/heads/main:refs/heads/old"])  # create the mirror
    marker = tmp_path / "hook-ran"
    for hook in ("reference-transaction", "post-checkout", "post-update"):
        script = git_dir / "hooks" / hook
        script.write_text(f"#!/bin/sh\necho {hook} >> {marker}\n")
        script.chmod(0o755)

    await mirrors.ensure_commit(gh, head, branch="main")
    worktree = tmp_path / "wt"
    sh(git_dir, "worktree", "add", "--quiet", str(worktree), head)
    assert (worktree / ".gitmodules").is_file()
    assert not marker.exists()
    vendor = worktree / "vendor"
    assert not vendor.exists() or not any(vendor.iterdir())
    with pytest.raises(subprocess.CalledProcessError):
        sh(git_dir, "cat-file", "-e", secret_sha)
    assert git_calls(fake, "secret") == []

    # Control: the planted hooks are real and would run if hooks were enabled.
    sh(
        git_dir,
        "-c",
        f"core.hooksPath={git_dir / 'hooks'}",
        "worktree",
        "add",
        str(tmp_path / "w2"),
        head,
    )
    assert "post-checkout" in marker.read_text()


async def test_sweep_removes_unused_mirrors_and_stale_worktrees(
    fake: FakeGitHub, base_url: str, data_dir: Path, tmp_path: Path
) -> None:
    other = init_bare_repo(tmp_path / "remote" / "octo" / "other.git", {"a": "a\n"})
    fake.add_repo("octo", "other", other)
    fake.add_installation(42, "octo", ["octo/hello", "octo/other"])
    mirrors = Mirrors(data_dir, web_url=base_url, allow_http=True, mirror_max_age_days=14)
    hello = await mirrors.ensure_commit(
        client_for(fake), rev(fake.repos["octo/hello"].git_dir, "main"), branch="main"
    )
    old = await mirrors.ensure_commit(client_for(fake, "other"), rev(other, "main"), branch="main")
    week_ago = time.time() - 20 * 86400
    os.utime(old / LAST_USED, (week_ago, week_ago))
    stale = hello / "bot-worktrees" / "wf_0123456789ab" / "1"
    fresh = hello / "bot-worktrees" / "wf_ba9876543210" / "1"
    for path in (stale, fresh):
        sh(hello, "worktree", "add", "--quiet", "--detach", str(path), "main")
    os.utime(stale, (week_ago, week_ago))

    removed = await mirrors.sweep()

    assert set(removed) == {old, stale}
    assert not old.exists() and not stale.exists()
    assert hello.is_dir() and fresh.is_dir()
    listed = sh(hello, "worktree", "list")
    assert str(fresh) in listed and str(stale) not in listed


def test_unsafe_names_and_plain_http_are_refused(data_dir: Path) -> None:
    mirrors = Mirrors(data_dir)
    for owner, repo in (("..", "x"), ("octo", "a/b"), ("octo", ""), ("oc to", "x")):
        with pytest.raises(CheckoutError):
            mirrors.path_for(owner, repo)
    with pytest.raises(ValueError, match="https"):
        Mirrors(data_dir, web_url="http://github.example")
    with pytest.raises(ValueError, match="https"):
        Mirrors(data_dir, web_url="file:///tmp/repo", allow_http=True)


async def test_concurrent_requests_for_one_commit_fetch_once(
    fake: FakeGitHub, base_url: str, data_dir: Path
) -> None:
    gh = client_for(fake)
    await gh.token()
    mirrors = Mirrors(data_dir, web_url=base_url, allow_http=True)
    sha = rev(fake.repos["octo/hello"].git_dir, "main")
    results: list[Path] = []

    async def one() -> None:
        results.append(await mirrors.ensure_commit(gh, sha, branch="main"))

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(one)
    assert len(set(results)) == 1
    assert len(fake.calls_to("GET", "/octo/hello.git/info/refs")) == 1  # one git fetch


async def test_a_moved_server_is_fetched_from_its_new_address(
    fake: FakeGitHub, data_dir: Path
) -> None:
    gh = client_for(fake)
    bare = fake.repos["octo/hello"].git_dir
    with serve_fake_github(fake) as first_url:
        await Mirrors(data_dir, web_url=first_url, allow_http=True).ensure_commit(
            gh, rev(bare, "main"), branch="main"
        )
    newer = commit_files(bare, "main", {"README.md": "moved\n"}, "After the move")
    with serve_fake_github(fake) as second_url:
        assert second_url != first_url
        mirrors = Mirrors(data_dir, web_url=second_url, allow_http=True)
        git_dir = await mirrors.ensure_commit(gh, newer, branch="main")
    assert rev(git_dir, "refs/heads/main") == newer


async def test_a_slow_fetch_times_out_cleanly(fake: FakeGitHub, data_dir: Path) -> None:
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepts the connection, never answers
    port = listener.getsockname()[1]
    mirrors = Mirrors(data_dir, web_url=f"http://127.0.0.1:{port}", allow_http=True, timeout_s=0.5)
    try:
        with pytest.raises(CheckoutError, match="longer than"):
            await mirrors.ensure_commit(client_for(fake), "1" * 40, branch="main")
    finally:
        listener.close()


async def test_only_bot_branches_are_pushed(
    fake: FakeGitHub, base_url: str, data_dir: Path, tmp_path: Path
) -> None:
    gh = client_for(fake)
    bare = fake.repos["octo/hello"].git_dir
    mirrors = Mirrors(data_dir, web_url=base_url, allow_http=True)
    git_dir = await mirrors.ensure_commit(gh, rev(bare, "main"), branch="main")
    worktree = tmp_path / "agent"
    sh(git_dir, "worktree", "add", "--quiet", "-b", "bot/fix-wf1-1", str(worktree), "main")
    (worktree / "fix.txt").write_text("fixed\n")
    in_tree(worktree, "add", "fix.txt")
    in_tree(worktree, "commit", "-qm", "Fix")
    head = rev(git_dir, "refs/heads/bot/fix-wf1-1")

    await mirrors.push_branch(gh, head, "bot/fix-wf1-1")
    assert rev(bare, "refs/heads/bot/fix-wf1-1") == head
    for branch in ("main", "feature", "bot/../main"):
        with pytest.raises(CheckoutError, match="bot/"):
            await mirrors.push_branch(gh, head, branch)
    assert rev(bare, "refs/heads/main") != head
    token = await gh.token()
    assert all(token.encode() not in data for data in file_contents(data_dir).values())


async def mirror_with_main(fake: FakeGitHub, base_url: str, data_dir: Path) -> tuple[Mirrors, Path]:
    mirrors = Mirrors(data_dir, web_url=base_url, allow_http=True)
    bare = fake.repos["octo/hello"].git_dir
    git_dir = await mirrors.ensure_commit(client_for(fake), rev(bare, "main"), branch="main")
    return mirrors, git_dir


async def test_a_new_bot_branch_is_pushed_then_fast_forwarded_with_the_token_in_a_header(
    fake: FakeGitHub, base_url: str, data_dir: Path
) -> None:
    gh = client_for(fake)
    mirrors, git_dir = await mirror_with_main(fake, base_url, data_dir)
    first = commit_files(git_dir, "work", {"fix.txt": "fixed\n"}, "Fix", base="main")
    assert await mirrors.push_branch(gh, first, "bot/fix-7-crash", default_branch="main") == first
    second = commit_files(git_dir, "work", {"more.txt": "more\n"}, "More")
    assert await mirrors.push_branch(gh, second, "bot/fix-7-crash") == second

    bare = fake.repos["octo/hello"].git_dir
    assert rev(bare, "refs/heads/bot/fix-7-crash") == second
    assert [(p.ref, p.old, p.new) for p in fake.pushes] == [
        ("refs/heads/bot/fix-7-crash", "0" * 40, first),
        ("refs/heads/bot/fix-7-crash", first, second),
    ]
    pushes = fake.calls_to("POST", "/octo/hello.git/git-receive-pack")
    assert len(pushes) == 2 and all(c.auth == "basic" and c.status == 200 for c in pushes)
    token = await gh.token()
    for call in fake.calls:
        assert token not in call.path and token not in str(call.query)
    assert all(token.encode() not in data for data in file_contents(data_dir).values())


@pytest.mark.parametrize(
    "branch",
    [
        pytest.param("main", id="default-branch"),
        pytest.param("feature", id="not-bot"),
        pytest.param("bot", id="bare-prefix"),
        pytest.param("bot/", id="empty-part"),
        pytest.param("bot//x", id="double-slash"),
        pytest.param("bot/../main", id="dot-dot"),
        pytest.param("bot/x..y", id="dot-dot-inside"),
        pytest.param("-bot/x", id="leading-dash"),
        pytest.param("bot/-x", id="part-leading-dash"),
        pytest.param("bot/.x", id="part-leading-dot"),
        pytest.param("bot/x.lock", id="lock"),
        pytest.param("+bot/x", id="force-plus"),
        pytest.param("bot/x:refs/heads/main", id="refspec-colon"),
        pytest.param("bot/x y", id="space"),
        pytest.param("bot/x\n", id="newline"),
        pytest.param("bot/x\x00", id="nul"),
        pytest.param("bot/x\x1b[31m", id="escape"),
        pytest.param("bot/x~1", id="tilde"),
        pytest.param("bot/x^", id="caret"),
        pytest.param("bot/@{-1}", id="reflog"),
        pytest.param("bot/" + "x" * 200, id="too-long"),
    ],
)
async def test_a_branch_the_bot_may_not_push_is_refused_before_any_network_call(
    fake: FakeGitHub, base_url: str, data_dir: Path, branch: str
) -> None:
    mirrors, git_dir = await mirror_with_main(fake, base_url, data_dir)
    sha = commit_files(git_dir, "work", {"fix.txt": "fixed\n"}, "Fix", base="main")
    calls = len(fake.calls)
    with pytest.raises(CheckoutError, match="bot/"):
        await mirrors.push_branch(client_for(fake), sha, branch)
    assert len(fake.calls) == calls and fake.pushes == []


async def test_the_default_branch_is_refused_even_when_named_like_a_bot_branch(
    fake: FakeGitHub, base_url: str, data_dir: Path
) -> None:
    mirrors, git_dir = await mirror_with_main(fake, base_url, data_dir)
    sha = commit_files(git_dir, "work", {"fix.txt": "fixed\n"}, "Fix", base="main")
    calls = len(fake.calls)
    with pytest.raises(CheckoutError, match="default branch"):
        await mirrors.push_branch(client_for(fake), sha, "bot/main", default_branch="bot/main")
    assert len(fake.calls) == calls


async def test_a_rewritten_branch_is_never_force_pushed(
    fake: FakeGitHub, base_url: str, data_dir: Path
) -> None:
    gh = client_for(fake)
    mirrors, git_dir = await mirror_with_main(fake, base_url, data_dir)
    first = commit_files(git_dir, "work", {"fix.txt": "fixed\n"}, "Fix", base="main")
    await mirrors.push_branch(gh, first, "bot/fix-7")
    rewritten = commit_files(git_dir, "other", {"fix.txt": "other\n"}, "Redo", base="main")
    with pytest.raises(PushRefused) as refused:
        await mirrors.push_branch(gh, rewritten, "bot/fix-7")
    assert refused.value.branch == "bot/fix-7" and "bot/fix-7" in str(refused.value)
    assert any("rejected" in line for line in refused.value.lines), refused.value.lines
    assert rev(fake.repos["octo/hello"].git_dir, "refs/heads/bot/fix-7") == first
    assert len(fake.pushes) == 1


async def test_a_push_the_remote_refuses_says_what_github_said(
    fake: FakeGitHub, base_url: str, data_dir: Path
) -> None:
    gh = client_for(fake)
    fake.protect_branch("octo", "hello", "bot/locked")
    mirrors, git_dir = await mirror_with_main(fake, base_url, data_dir)
    sha = commit_files(git_dir, "work", {"fix.txt": "fixed\n"}, "Fix", base="main")
    with pytest.raises(PushRefused) as refused:
        await mirrors.push_branch(gh, sha, "bot/locked")
    message = str(refused.value)
    assert message.startswith("the push to bot/locked was refused: ")
    assert "GH006: Protected branch update failed for refs/heads/bot/locked." in message
    assert (await gh.token()) not in message and fake.pushes == []


async def test_a_commit_no_longer_on_its_branch_is_fetched_by_id(
    fake: FakeGitHub, base_url: str, data_dir: Path
) -> None:
    bare = fake.repos["octo/hello"].git_dir
    old_head = commit_files(bare, "topic", {"t.txt": "1\n"}, "First", base="main")
    commit_files(bare, "topic", {"t.txt": "2\n"}, "Rewritten", base="main")  # a force-push
    git_dir = await Mirrors(data_dir, web_url=base_url, allow_http=True).ensure_commit(
        client_for(fake), old_head, branch="topic"
    )
    assert rev(git_dir, f"{old_head}^{{commit}}") == old_head
    assert rev(git_dir, "refs/heads/topic") != old_head


async def test_the_token_never_follows_a_redirect(
    fake: FakeGitHub, base_url: str, data_dir: Path
) -> None:
    seen: list[str | None] = []

    async def redirect(request: Request) -> Response:
        seen.append(request.headers.get("authorization"))
        target = f"{base_url}{request.url.path}"
        return RedirectResponse(f"{target}?{request.url.query}", status_code=302)

    redirector = Starlette(routes=[Route("/{path:path}", redirect, methods=["GET", "POST"])])
    with serve_app(redirector, host="127.0.0.2") as other_host:
        mirrors = Mirrors(data_dir, web_url=other_host, allow_http=True)
        with pytest.raises(CheckoutError):
            await mirrors.ensure_commit(
                client_for(fake), rev(fake.repos["octo/hello"].git_dir, "main"), branch="main"
            )
    assert seen and all(value and value.startswith("Basic ") for value in seen)
    assert git_calls(fake) == []


async def test_sweep_forever_keeps_sweeping(
    fake: FakeGitHub, base_url: str, data_dir: Path
) -> None:
    mirrors = Mirrors(data_dir, web_url=base_url, allow_http=True, mirror_max_age_days=1)
    git_dir = await mirrors.ensure_commit(
        client_for(fake), rev(fake.repos["octo/hello"].git_dir, "main"), branch="main"
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(mirrors.sweep_forever, 0.01)
        await anyio.sleep(0.05)
        assert git_dir.exists()  # in use: kept
        old = time.time() - 3 * 86400
        os.utime(git_dir / LAST_USED, (old, old))
        for _ in range(1000):  # up to ~10 s
            if not git_dir.exists():
                break
            await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    assert not git_dir.exists()
