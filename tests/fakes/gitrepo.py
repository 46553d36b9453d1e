"""Build small bare git repositories for tests: an initial commit, then commits on branches."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

_GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}


@dataclass(frozen=True)
class Link:
    """A symbolic link to `target` (mode 120000), for `commit_files`."""

    target: str


@dataclass(frozen=True)
class Gitlink:
    """A submodule pointer at `commit` (mode 160000), for `commit_files`."""

    commit: str


Entry = str | bytes | Link | Gitlink | None


def _git_sync(
    git_dir: Path, *args: str, env: dict[str, str] | None = None, data: bytes = b""
) -> str:
    result = subprocess.run(
        ["git", f"--git-dir={git_dir}", *args],
        input=data,
        capture_output=True,
        check=False,
        env={**os.environ, **_GIT_ENV, **(env or {})},
    )
    if result.returncode != 0:
        raise RuntimeError(f"git {args[0]}: {result.stderr.decode(errors='replace')}")
    return result.stdout.decode()


def init_bare_repo(
    path: Path, files: dict[str, str | bytes], *, default_branch: str = "main"
) -> Path:
    """A bare repository at `path` whose `default_branch` has one commit holding `files`."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["git", "init", "--bare", "-q", f"--initial-branch={default_branch}", str(path)],
        check=True,
        env={**os.environ, **_GIT_ENV},
    )
    commit_files(path, default_branch, files, "Initial commit")
    return path


def commit_files(
    git_dir: Path,
    branch: str,
    files: Mapping[str, Entry],
    message: str,
    *,
    base: str | None = None,
) -> str:
    """Commit `files` (None deletes; a `Link` or `Gitlink` is that kind of entry) onto `branch`,
    starting from `base` (default: the branch)."""
    parent = base or branch
    has_parent = subprocess.run(
        ["git", f"--git-dir={git_dir}", "rev-parse", "-q", "--verify", f"{parent}^{{commit}}"],
        capture_output=True,
        check=False,
    )
    parent_sha = has_parent.stdout.decode().strip() if has_parent.returncode == 0 else ""
    with tempfile.TemporaryDirectory() as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        if parent_sha:
            _git_sync(git_dir, "read-tree", parent_sha, env=env)
        for name, content in files.items():
            if content is None:
                removal = f"0 {'0' * 40}\t{name}\n".encode()
                _git_sync(git_dir, "update-index", "--index-info", env=env, data=removal)
                continue
            if isinstance(content, Gitlink):
                mode, oid = "160000", content.commit
            else:
                data = content.target if isinstance(content, Link) else content
                raw = data.encode() if isinstance(data, str) else data
                mode = "120000" if isinstance(content, Link) else "100644"
                oid = _git_sync(git_dir, "hash-object", "-w", "--stdin", data=raw).strip()
            _git_sync(
                git_dir, "update-index", "--add", "--cacheinfo", f"{mode},{oid},{name}", env=env
            )
        tree = _git_sync(git_dir, "write-tree", env=env).strip()
    args = ["commit-tree", tree, "-m", message] + (["-p", parent_sha] if parent_sha else [])
    sha = _git_sync(git_dir, *args).strip()
    _git_sync(git_dir, "update-ref", f"refs/heads/{branch}", sha)
    return sha
