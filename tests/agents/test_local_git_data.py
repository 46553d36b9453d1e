"""Git's own data is never shown by the reading tools on a local tree or a worktree, even
through a symbolic link: `.git/config` may hold a token in a remote URL."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from bot.agents.tools import Toolbox, ToolError
from bot.agents.types import EXPLORER, IMPLEMENTER
from bot.engine.types import Workspace
from bot.engine.worktree import create_worktree
from tests.agents.conftest import git, make_repo

pytestmark = pytest.mark.anyio

TOKEN = "ghs_0123456789abcdefghijklmnopqrstuvwxyz"


@pytest.fixture
def local(tmp_path: Path) -> Path:
    """A local clone whose remote URL holds a token, with links into `.git` committed and not,
    and a nested repository with a token of its own."""
    root, _ = make_repo(tmp_path / "clone")
    git(root, "config", "remote.origin.url", f"https://x-access-token:{TOKEN}@github.com/o/r")
    os.symlink(".git/config", root / "innocent")
    os.symlink(".git", root / "gl")
    os.symlink("src/../.git/config", root / "roundabout")
    git(root, "add", "innocent", "gl", "roundabout")
    git(root, "commit", "-q", "-m", "links")
    os.symlink(".git/config", root / "fresh-link")  # untracked
    nested, _ = make_repo(root / "vendor" / "lib")
    git(nested, "config", "remote.origin.url", f"https://x-access-token:{TOKEN}@example.com/x")
    os.symlink("vendor/lib/.git/config", root / "nested-link")
    os.symlink("vendor/lib/.git", root / "nested-dir")
    return root


LINKS = ["innocent", "fresh-link", "roundabout", "gl/config", "nested-link", "nested-dir/config"]


async def call(box: Toolbox, name: str, **args: Any) -> str:
    return await box.call(name, args)


@pytest.mark.parametrize("path", LINKS)
async def test_read_file_refuses_links_into_git_data(local: Path, path: str) -> None:
    box = Toolbox(Workspace(local_root=local), EXPLORER.tools)
    with pytest.raises(ToolError, match="git's own data"):
        await call(box, "read_file", path=path)


async def test_grep_and_listing_show_nothing_of_git_data(local: Path) -> None:
    box = Toolbox(Workspace(local_root=local), EXPLORER.tools)
    assert await call(box, "grep", pattern=TOKEN) == "no matches"
    assert await call(box, "grep", pattern="x-access-token", fixed_string=True) == "no matches"
    for path in ("gl", "nested-dir"):
        with pytest.raises(ToolError, match="git's own data"):
            await call(box, "grep", pattern="url", path=path)
        with pytest.raises(ToolError, match="git's own data"):
            await call(box, "list_files", path=path)
    listing = (await call(box, "list_files")).splitlines()
    assert "innocent" in listing  # the link's name is the repository's; its target is not
    assert not [name for name in listing if ".git/" in name or name.endswith(".git")]


async def test_a_tree_that_is_not_a_repository_hides_nested_git_data(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("hello\n")
    nested, _ = make_repo(plain / "sub")
    git(nested, "config", "remote.origin.url", f"https://t:{TOKEN}@example.com/x")
    (plain / "wt").mkdir()
    (plain / "wt" / ".git").write_text("gitdir: /somewhere/else\n")
    os.symlink("sub/.git/config", plain / "link")
    box = Toolbox(Workspace(local_root=plain), EXPLORER.tools)
    with pytest.raises(ToolError, match="git's own data"):
        await call(box, "read_file", path="link")
    assert await call(box, "grep", pattern=TOKEN) == "no matches"
    listing = (await call(box, "list_files")).splitlines()
    assert "notes.txt" in listing
    assert not [name for name in listing if name.endswith(".git") or "/.git/" in name]


async def test_worktree_reads_refuse_links_to_its_git_file(tmp_path: Path) -> None:
    root, sha = make_repo(tmp_path / "repo")
    os.symlink(".git", root / "pointer")
    git(root, "add", "pointer")
    git(root, "commit", "-q", "-m", "a link to the git file")
    sha = git(root, "rev-parse", "HEAD")
    wt = create_worktree(root, base=sha, run_id="wf_bbbbbbbbbbbb", index=1, label="impl")
    workspace = Workspace(git_dir=root / ".git", commit=sha, worktree=wt.path, branch=wt.branch)
    box = Toolbox(workspace, IMPLEMENTER.tools)
    with pytest.raises(ToolError, match="git's own data"):
        await call(box, "read_file", path="pointer")
    assert "def greet" in await call(box, "read_file", path="src/app.py")
