"""Sparse git worktrees for writing agents: create one cheaply, materialize files on demand.

A writing agent's worktree is created with `git worktree add --no-checkout` on its own branch
and turned into a sparse checkout of that worktree only: the index holds the whole base tree
with every entry marked skip-worktree, and no file is written. Files appear when the agent's
tools call `materialize(worktree, paths)`; `materialize_all(worktree)` checks the whole tree out
(the agent's tools call it before running a command). `git status` is clean for an untouched
sparse worktree, writing a new file and `git add`/`git commit` work as usual, and a file written
at a path that was never materialized is still seen as a change.

The sparse pattern file lists `/*` (everything), so any git operation that re-applies the
patterns (a checkout, a merge) simply fills the tree in; sparseness lives in the index bits.

Every git command here runs through `bot.git.hostgit`. The worktree's `.git` file is recorded when
the worktree is made (`bot.git.gitguard.seal`) and checked before each command run inside it; a
worktree whose `.git` changed raises `bot.git.gitguard.WorktreeQuarantined` and is never used again.
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.engine.git import GitError, git_out, repo_lock, run_git
from bot.git import gitguard
from bot.git.gitguard import WORKTREES_DIR, WorktreeQuarantined, read_flat_config

_MATCH_NOTHING = "!/*\n"
_MATCH_ALL = "/*\n"


class WorktreeError(RuntimeError):
    """A worktree could not be created or inspected; fails only the agent that needed it."""


@dataclass(frozen=True, slots=True)
class Worktree:
    """A writing agent's worktree: where it is, its branch, and the commit it started from."""

    path: Path
    branch: str
    base: str
    common_dir: Path
    index: int


def branch_slug(label: str, limit: int = 40) -> str:
    """A ref-safe slug of an agent label: lower case, `[a-z0-9-]` only, never empty."""
    slug = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")[:limit].strip("-")
    return slug or "agent"


def worktree_git_dir(worktree: Path) -> Path:
    """The per-worktree git dir (`<common>/worktrees/<name>`) named by `<worktree>/.git`."""
    dotgit = worktree / ".git"
    try:
        text = dotgit.read_text(encoding="utf-8")
    except OSError as exc:
        raise WorktreeError(f"{worktree} is not a linked git worktree ({exc.strerror})") from exc
    if not text.startswith("gitdir:"):
        raise WorktreeError(f"{worktree} is not a linked git worktree")
    gitdir = Path(text.removeprefix("gitdir:").strip())
    return gitdir if gitdir.is_absolute() else (worktree / gitdir).resolve()


def _read_config(worktree: Path) -> dict[str, str]:
    """`section.key -> value` (lower-case names) from the worktree's config.worktree."""
    return read_flat_config(worktree_git_dir(worktree) / "config.worktree")


def is_sparse(worktree: Path) -> bool:
    """True while the worktree is a sparse checkout (files appear only when materialized)."""
    return _read_config(worktree).get("core.sparsecheckout", "").lower() == "true"


def base_commit(worktree: Path) -> str | None:
    """The commit the worktree was created from (recorded at creation), or None if unknown."""
    return _read_config(worktree).get("bot.base") or None


def _safe_relpath(path: str) -> str | None:
    """A normalized repository-relative path, or None when it is absolute or escapes the tree."""
    text = path.replace("\\", "/").strip()
    if not text or text.startswith("/") or "\0" in text:
        return None
    norm = posixpath.normpath(text)
    if norm == ".." or norm.startswith("../") or norm.startswith(".git/") or norm == ".git":
        return None
    return norm


def materialize(worktree: Path, paths: Sequence[str]) -> None:
    """Make these repository-relative files exist in a sparse worktree, from its index.

    A no-op for files already present, for paths git does not track (new files are the
    writer's business), for paths outside the tree, and once the worktree is no longer sparse.
    A directory path materializes every tracked file under it.
    """
    clean = sorted({p for p in (_safe_relpath(p) for p in paths) if p is not None})
    if not clean or not is_sparse(worktree):
        return
    listed = run_git(
        ["--literal-pathspecs", "ls-files", "-v", "-z", "--", *clean], worktree
    ).stdout.decode("utf-8", "surrogateescape")
    wanted: list[str] = []
    for entry in listed.split("\0"):
        if len(entry) > 2 and entry[0] == "S" and entry[1] == " ":
            rel = entry[2:]
            if not os.path.lexists(worktree / rel):
                wanted.append(rel)
    if not wanted:
        return
    data = "\0".join(wanted).encode("utf-8", "surrogateescape") + b"\0"
    # Only tracked, absent files reach here, so no local change can be overwritten; the
    # checkout also clears their skip-worktree bits, so a later deletion shows as one.
    run_git(
        [
            "--literal-pathspecs",
            "checkout",
            "--ignore-skip-worktree-bits",
            "--pathspec-from-file=-",
            "--pathspec-file-nul",
        ],
        worktree,
        stdin=data,
        retry_locks=True,
    )


def materialize_all(worktree: Path) -> None:
    """Check the whole tree out and leave sparse mode; local changes are kept. Idempotent."""
    if not is_sparse(worktree):
        return
    run_git(["sparse-checkout", "disable"], worktree, retry_locks=True)


def resolve_commit(repo: Path, rev: str = "HEAD") -> str:
    """The full sha of `rev` in `repo` (a git dir or a work tree)."""
    try:
        return git_out(["rev-parse", "--verify", "--end-of-options", f"{rev}^{{commit}}"], repo)
    except GitError as exc:
        raise WorktreeError(f"cannot resolve {rev!r} in {repo}: {exc.stderr or exc}") from exc


def _ensure_worktree_config(common: Path) -> None:
    """Per-worktree config on (checked each time: a mirror may be re-created); under the lock."""
    proc = run_git(["config", "--get", "extensions.worktreeConfig"], common, check=False)
    if proc.stdout.strip().lower() != b"true":
        run_git(["config", "extensions.worktreeConfig", "true"], common, retry_locks=True)


def _probe(repo: Path, base: str) -> tuple[Path, bool, str]:
    """(git common dir, bare?, base sha) in one git process."""
    if not base or base.startswith("-"):
        raise WorktreeError(f"cannot resolve {base!r}: not a revision")
    proc = run_git(
        [
            "rev-parse",
            "--path-format=absolute",
            "--git-common-dir",
            "--is-bare-repository",
            f"{base}^{{commit}}",
        ],
        repo,
        check=False,
    )
    err = proc.stderr.decode("utf-8", "replace").strip()
    lines = proc.stdout.decode("utf-8", "replace").split()
    if proc.returncode != 0 or len(lines) != 3:
        if "not a git repository" in err or len(lines) < 2:
            detail = err.splitlines()[-1] if err else f"exit status {proc.returncode}"
            raise WorktreeError(f"{repo} is not a git repository ({detail})")
        raise WorktreeError(f"cannot resolve {base!r} in {repo}: unknown revision")
    return Path(lines[0]).resolve(), lines[1] == "true", lines[2]


def create_worktree(repo: Path, *, base: str, run_id: str, index: int, label: str) -> Worktree:
    """Create a sparse worktree for agent `index` of `run_id` on a new branch from `base`.

    The worktree lives at `<git common dir>/bot-worktrees/<run_id>/<index>` on branch
    `bot/<label-slug>-<run id suffix>-<index>`. Works on a bare repository (a mirror) and on
    a normal one. Blocking: call it from a worker thread. Raises WorktreeError.
    """
    common, bare, sha = _probe(repo, base)
    path = common / WORKTREES_DIR / run_id / str(index)
    suffix = run_id.removeprefix("wf_")[-6:] or "run"
    branch = f"bot/{branch_slug(label)}-{suffix}-{index}"
    try:
        with repo_lock(common):
            _ensure_worktree_config(common)
            if path.exists():  # left by an earlier attempt of the same run: keep it
                path = path.with_name(f"{index}-{os.urandom(3).hex()}")
            path.parent.mkdir(parents=True, exist_ok=True)
            add = ["worktree", "add", "--quiet", "--no-checkout", "-b", branch, str(path), sha]
            proc = run_git(add, common, check=False, retry_locks=True)
            if proc.returncode != 0 and b"already exists" in proc.stderr:
                branch = f"{branch}-{os.urandom(3).hex()}"  # an earlier attempt's branch
                add[5] = branch
                proc = run_git(add, common, check=False, retry_locks=True)
            if proc.returncode != 0:
                raise GitError(add, proc.returncode, proc.stderr.decode("utf-8", "replace"))
            gitguard.seal(path)  # host git checks `.git` against this before each command
    except (GitError, OSError) as exc:
        raise WorktreeError(f"cannot create worktree for agent {index}: {exc}") from exc
    try:
        _make_sparse(path, sha, bare)
    except (GitError, OSError, WorktreeError, WorktreeQuarantined) as exc:
        _discard(path, common, branch, sha)
        raise WorktreeError(f"cannot create worktree for agent {index}: {exc}") from exc
    return Worktree(path=path, branch=branch, base=sha, common_dir=common, index=index)


def _make_sparse(path: Path, sha: str, bare: bool) -> None:
    gitdir = worktree_git_dir(path)
    config = gitdir / "config.worktree"
    # With per-worktree config the shared `core.bare = true` of a mirror would apply here too.
    core = ("\tbare = false\n" if bare else "") + "\tsparseCheckout = true\n"
    with open(config, "x", encoding="utf-8") as fh:  # new worktree: the file cannot exist
        fh.write(f"[core]\n{core}[bot]\n\tbase = {sha}\n")
    info = gitdir / "info"
    info.mkdir(exist_ok=True)
    patterns = info / "sparse-checkout"
    patterns.write_text(_MATCH_NOTHING, encoding="utf-8")
    # Fill the index from the base tree, every entry skip-worktree, no file written.
    run_git(["read-tree", "-mu", "HEAD"], path, retry_locks=True)
    patterns.write_text(_MATCH_ALL, encoding="utf-8")


def _discard(path: Path, common: Path, branch: str, sha: str) -> None:
    """Best effort: undo a half-created worktree (no agent work can be in it yet)."""
    gitguard.forget(path)
    shutil.rmtree(path, ignore_errors=True)
    with repo_lock(common):
        run_git(["worktree", "prune"], common, check=False)
        run_git(["update-ref", "-d", f"refs/heads/{branch}", sha], common, check=False)
