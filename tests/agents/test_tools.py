"""Workspace tools: reading a commit from the object database, a local tree, a sparse worktree."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from bot.agents.tools import (
    GREP_LINES_CAP,
    LIST_CAP,
    READ_BYTES_CAP,
    Toolbox,
    ToolError,
    check_path,
    render_text,
)
from bot.agents.types import EXPLORER, IMPLEMENTER
from bot.engine.types import Workspace
from bot.engine.worktree import create_worktree
from tests.agents.conftest import FILES, git, make_repo


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        pytest.param("../secret", "paths with `..` are refused", id="dotdot"),
        pytest.param("src/../../x", "paths with `..` are refused", id="inner-dotdot"),
        pytest.param("/etc/passwd", "absolute paths are refused", id="absolute"),
        pytest.param("\\windows", "absolute paths are refused", id="backslash"),
        pytest.param("a\0b", "NUL byte", id="nul"),
        pytest.param(".git/config", "`.git` is git's own data", id="dotgit"),
        pytest.param("vendor/lib/.git/config", "`.git` is git's own data", id="nested-dotgit"),
        pytest.param("", "a path is required", id="empty"),
        pytest.param(5, "must be a string", id="not-a-string"),
    ],
)
def test_check_path_refuses(raw: Any, message: str) -> None:
    with pytest.raises(ToolError, match=message.replace("(", r"\(")):
        check_path(raw)


def test_check_path_normalizes() -> None:
    assert check_path("./src//app.py") == "src/app.py"
    assert check_path(None, allow_root=True) == ""


def test_render_text_pages_and_marks_truncation() -> None:
    data = "".join(f"line {i}\n" for i in range(1, 5001)).encode()
    first = render_text("big.txt", data)
    assert first.splitlines()[0] == "     1\tline 1"
    assert first.endswith("[showing lines 1-2000 of 5000; read on with offset=2001]")
    page = render_text("big.txt", data, offset=4990, limit=20)
    assert page.splitlines()[0] == "  4990\tline 4990"
    assert page.endswith("[showing lines 4990-5000 of 5000]")


def test_render_text_caps_bytes() -> None:
    data = ("y" * 1000 + "\n").encode() * 1000
    out = render_text("wide.txt", data)
    assert len(out.encode()) < READ_BYTES_CAP + 200
    assert "read on with offset=" in out


def test_render_text_describes_binary() -> None:
    out = render_text("logo.png", b"\x89PNG\r\n\x1a\n\0\0\0" + b"x" * 100)
    assert out == "logo.png is a binary file (111 bytes, image/png); its content is not shown."


async def call(box: Toolbox, name: str, **args: Any) -> str:
    return await box.call(name, args)


@pytest.fixture
def linked_repo(tmp_path: Path) -> tuple[Path, str]:
    """A repository whose commit holds symlinks out of the tree and a binary file."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret\n")
    root, _ = make_repo(tmp_path / "repo")
    os.symlink(str(outside / "secret.txt"), root / "abs-link")
    os.symlink("../outside", root / "rel-link")
    os.symlink("src/app.py", root / "ok-link")
    (root / "blob.bin").write_bytes(b"\0\1\2" * 10)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "links")
    return root, git(root, "rev-parse", "HEAD")


@pytest.mark.anyio
async def test_read_only_box_reads_the_commit_not_the_working_tree(
    linked_repo: tuple[Path, str],
) -> None:
    root, sha = linked_repo
    (root / "README.md").write_text("changed on disk\n")
    box = Toolbox(Workspace(git_dir=root / ".git", commit=sha), EXPLORER.tools)
    try:
        assert "# Demo" in await call(box, "read_file", path="README.md")
        with pytest.raises(ToolError, match=r"is a link to .*, outside the repository"):
            await call(box, "read_file", path="abs-link")
        with pytest.raises(ToolError, match=r"is a link to '\.\./outside', outside the repository"):
            await call(box, "read_file", path="rel-link/secret.txt")
        assert "def greet" in await call(box, "read_file", path="ok-link")
        with pytest.raises(ToolError, match="no such file in the commit"):
            await call(box, "read_file", path="missing.txt")
        with pytest.raises(ToolError, match="is a directory"):
            await call(box, "read_file", path="src")
        assert "binary file" in await call(box, "read_file", path="blob.bin")
        listing = await call(box, "list_files", path="src")
        assert listing.splitlines() == ["src/app.py", "src/util.py"]
        assert await call(box, "list_files", pattern="*.md") == "README.md\ndocs/guide.md"
        assert "top secret" not in await call(box, "grep", pattern="secret")
        assert await call(box, "grep", pattern="GREET", ignore_case=True, path="src") == (
            "src/app.py:1:def greet(name):"
        )
        log = await call(box, "git_log")
        assert "links" in log and "initial" in log
        diff = await call(box, "git_diff", stat=True)
        assert "blob.bin" in diff and "README.md" not in diff
        show = await call(box, "git_show", rev=sha)
        assert "abs-link" in show
        with pytest.raises(ToolError, match="not a valid revision"):
            await call(box, "git_show", rev="--output=/tmp/x")
    finally:
        await box.aclose()


@pytest.mark.anyio
async def test_read_only_box_offers_no_writing_tools(repo: tuple[Path, str]) -> None:
    root, sha = repo
    box = Toolbox(Workspace(git_dir=root / ".git", commit=sha), IMPLEMENTER.tools, sandbox_ok=True)
    try:
        assert "write_file" not in box.names and "run_command" not in box.names
        with pytest.raises(ToolError, match="not available to this agent"):
            await call(box, "write_file", path="x", content="y")
    finally:
        await box.aclose()


@pytest.mark.anyio
async def test_local_root_refuses_symlinks_out(linked_repo: tuple[Path, str]) -> None:
    root, _ = linked_repo
    box = Toolbox(Workspace(local_root=root), EXPLORER.tools)
    assert "changed" not in await call(box, "read_file", path="README.md")
    for path in ("abs-link", "rel-link/secret.txt"):
        with pytest.raises(ToolError, match="leads outside the repository"):
            await call(box, "read_file", path=path)
    assert "def greet" in await call(box, "read_file", path="ok-link")
    assert "ok-link" in await call(box, "list_files")


@pytest.mark.anyio
async def test_list_and_grep_cap_their_output(tmp_path: Path) -> None:
    files = {f"pkg/m{i:04}.py": "needle = 1\n" for i in range(LIST_CAP + 10)}
    root, sha = make_repo(tmp_path / "many", files)
    box = Toolbox(Workspace(git_dir=root / ".git", commit=sha), EXPLORER.tools)
    try:
        listing = await call(box, "list_files")
        assert listing.endswith(f"[listing truncated: {LIST_CAP + 10} in all, {LIST_CAP} shown]")
        found = await call(box, "grep", pattern="needle")
        assert len(found.splitlines()) == GREP_LINES_CAP + 1
        assert "[matches truncated:" in found
        assert await call(box, "grep", pattern="absent-string") == "no matches"
    finally:
        await box.aclose()


@pytest.fixture
def worktree(repo: tuple[Path, str]) -> Workspace:
    root, sha = repo
    wt = create_worktree(root, base=sha, run_id="wf_aaaaaaaaaaaa", index=1, label="impl")
    return Workspace(git_dir=root / ".git", commit=sha, worktree=wt.path, branch=wt.branch)


@pytest.mark.anyio
async def test_worktree_tools_materialize_edit_and_commit(
    worktree: Workspace, repo: tuple[Path, str]
) -> None:
    root, sha = repo
    assert worktree.worktree is not None
    wt = worktree.worktree
    assert not (wt / "src/app.py").exists()  # sparse: nothing checked out yet
    box = Toolbox(worktree, IMPLEMENTER.tools)
    assert "run_command" not in box.names  # sandbox not offered in this test
    assert "def add" in await call(box, "read_file", path="src/app.py")
    assert (wt / "src/app.py").exists()
    assert "src/util.py" in await call(box, "list_files")
    assert "src/util.py:1:TOKEN" in await call(box, "grep", pattern="TOKEN")
    with pytest.raises(ToolError, match="occurs 2 times"):
        await call(box, "edit_file", path="src/app.py", old_text="    return", new_text="  return")
    with pytest.raises(ToolError, match="was not found"):
        await call(box, "edit_file", path="src/app.py", old_text="nope", new_text="x")
    await call(box, "edit_file", path="src/app.py", old_text="a + b", new_text="a + b + 0")
    await call(box, "write_file", path="notes/new.txt", content="hello\n")
    with pytest.raises(ToolError, match=r"paths with `\.\.` are refused"):
        await call(box, "write_file", path="../escape.txt", content="x")
    assert "a + b + 0" in await call(box, "git_diff")
    out = await call(box, "commit", message="Tweak add and add notes")
    assert out.startswith("committed ") and worktree.branch in out
    assert len(box.commits) == 1
    log = git(root, "log", "--format=%s", worktree.branch or "")
    assert log.splitlines()[0] == "Tweak add and add notes"
    files = git(root, "show", "--name-only", "--format=", box.commits[0]).splitlines()
    assert sorted(files) == ["notes/new.txt", "src/app.py"]
    with pytest.raises(ToolError, match="nothing to commit"):
        await call(box, "commit", message="again")
    assert git(root, "rev-parse", "main") == sha  # the base branch is untouched


@pytest.mark.anyio
async def test_worktree_refuses_symlink_escape(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root, _ = make_repo(tmp_path / "repo")
    os.symlink(str(outside), root / "out")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "link")
    sha = git(root, "rev-parse", "HEAD")
    wt = create_worktree(root, base=sha, run_id="wf_bbbbbbbbbbbb", index=1, label="impl")
    box = Toolbox(Workspace(git_dir=root / ".git", commit=sha, worktree=wt.path), IMPLEMENTER.tools)
    with pytest.raises(ToolError, match="leads outside the repository"):
        await call(box, "write_file", path="out/planted.txt", content="x")
    with pytest.raises(ToolError, match="leads outside the repository"):
        await call(box, "read_file", path="out")
    with pytest.raises(ToolError, match="leads outside the repository"):
        await call(box, "edit_file", path="out/x", old_text="a", new_text="b")
    assert list(outside.iterdir()) == []


@pytest.mark.anyio
async def test_worktree_follows_links_inside_the_tree(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path / "repo")
    os.symlink("src/app.py", root / "alias.py")
    os.symlink("src", root / "code")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "links")
    sha = git(root, "rev-parse", "HEAD")
    wt = create_worktree(root, base=sha, run_id="wf_cccccccccccc", index=1, label="impl")
    box = Toolbox(Workspace(git_dir=root / ".git", commit=sha, worktree=wt.path), IMPLEMENTER.tools)
    assert "def greet" in await call(box, "read_file", path="alias.py")
    assert "TOKEN" in await call(box, "read_file", path="code/util.py")


@pytest.mark.anyio
async def test_run_command_sees_the_whole_tree(worktree: Workspace) -> None:
    box = Toolbox(worktree, IMPLEMENTER.tools, sandbox_ok=True, command_timeout=20)
    assert "run_command" in box.names
    out = await call(box, "run_command", command="cat src/util.py docs/guide.md; ls -a")
    assert "TOKEN = 'x'" in out and "Use greet()" in out
    assert out.endswith("[exit code 0]")
    out = await call(box, "run_command", command="exit 3")
    assert out == "[exit code 3]"


@pytest.mark.anyio
async def test_run_command_cannot_retarget_the_worktrees_git(
    worktree: Workspace, repo: tuple[Path, str]
) -> None:
    assert worktree.worktree is not None
    dotgit = worktree.worktree / ".git"
    before = dotgit.read_text()
    box = Toolbox(worktree, IMPLEMENTER.tools, sandbox_ok=True, command_timeout=20)
    out = await call(
        box,
        "run_command",
        command="echo 'gitdir: /tmp/elsewhere' > .git; rm -f .git; mv .git moved; ls -a",
    )
    assert dotgit.read_text() == before
    assert not (worktree.worktree / "moved").exists()
    assert "Read-only file system" in out or "busy" in out
    await call(box, "write_file", path="ok.txt", content="fine\n")
    assert (await call(box, "commit", message="Still commits here")).startswith("committed")
    root, _ = repo
    assert git(root, "log", "-1", "--format=%s", worktree.branch or "") == "Still commits here"


@pytest.mark.anyio
async def test_object_reader_recovers_from_a_dead_cat_file(repo: tuple[Path, str]) -> None:
    from bot.agents.gitread import GitError, ObjectReader

    root, sha = repo
    reader = ObjectReader(root / ".git", sha)
    try:
        first = await reader.read("README.md")
        assert first is not None and first.data.startswith(b"# Demo")
        assert reader._process is not None
        reader._process.kill()
        await reader._process.wait()
        with pytest.raises(GitError, match=r"reading src/app\.py failed"):
            await reader.read("src/app.py")
        again = await reader.read("src/app.py")
        assert again is not None and again.data.startswith(b"def greet")
    finally:
        await reader.aclose()


@pytest.mark.anyio
async def test_local_tree_hides_secrets_and_ignored_files(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path / "repo", {**FILES, ".gitignore": "build/\n*.log\n"})
    (root / "keep.log").write_text("tracked\n")
    git(root, "add", "-f", "keep.log")
    git(root, "commit", "-q", "-m", "a tracked file that matches an ignore pattern")
    (root / ".env").write_text("BOT_LLM_API_KEY=sk-local-secret\n")
    (root / "deploy.pem").write_text("-----BEGIN PRIVATE KEY----- sk-local-secret\n")
    (root / "build").mkdir()
    (root / "build" / "out.txt").write_text("sk-local-secret in a build output\n")
    (root / "notes.txt").write_text("untracked but visible\n")
    box = Toolbox(Workspace(local_root=root), EXPLORER.tools)
    with pytest.raises(ToolError, match="looks like a secret"):
        await call(box, "read_file", path=".env")
    with pytest.raises(ToolError, match="looks like a secret"):
        await call(box, "read_file", path="deploy.pem")
    with pytest.raises(ToolError, match="ignored by git"):
        await call(box, "read_file", path="build/out.txt")
    assert "untracked but visible" in await call(box, "read_file", path="notes.txt")
    # A link (committed or not) leading to a hidden file does not show it either.
    os.symlink(".env", root / "env-link")
    os.symlink("build/out.txt", root / "out-link")
    with pytest.raises(ToolError, match="looks like a secret"):
        await call(box, "read_file", path="env-link")
    with pytest.raises(ToolError, match="ignored by git"):
        await call(box, "read_file", path="out-link")
    assert "tracked" in await call(box, "read_file", path="keep.log")  # tracked wins
    assert await call(box, "grep", pattern="sk-local-secret") == "no matches"
    listing = (await call(box, "list_files")).splitlines()
    assert "notes.txt" in listing
    assert not {".env", "deploy.pem", "build/out.txt"} & set(listing)


@pytest.mark.anyio
async def test_git_diff_of_a_first_commit_shows_every_file(repo: tuple[Path, str]) -> None:
    root, sha = repo
    box = Toolbox(Workspace(git_dir=root / ".git", commit=sha), EXPLORER.tools)
    try:
        diff = await call(box, "git_diff")
        assert "+def greet(name):" in diff and "+# Demo" in diff
        stat = await call(box, "git_diff", stat=True)
        assert "4 files changed" in stat
    finally:
        await box.aclose()


@pytest.mark.anyio
async def test_commit_links_inside_the_tree_are_followed(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path / "repo")
    os.symlink("src", root / "code")
    os.symlink("../README.md", root / "src" / "readme-link")
    os.symlink("loop-b", root / "loop-a")
    os.symlink("loop-a", root / "loop-b")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "links")
    sha = git(root, "rev-parse", "HEAD")
    box = Toolbox(Workspace(git_dir=root / ".git", commit=sha), EXPLORER.tools)
    try:
        assert "TOKEN" in await call(box, "read_file", path="code/util.py")
        assert "# Demo" in await call(box, "read_file", path="code/readme-link")
        with pytest.raises(ToolError, match="too many levels of symbolic links"):
            await call(box, "read_file", path="loop-a")
    finally:
        await box.aclose()
