"""A pull request's changes, computed locally from the mirror: no diff is downloaded.

The API truncates large diffs and leaves out the patches of big files, so the review reads
what it needs from the mirror's object database:

- `pull_changes(git_dir, base, head)`: the merge base and every file's patch from it to the
  head, with three lines of context and rename detection, as GitHub shows a pull request
  (the anchors of inline comments are checked against exactly these hunks);
- `push_changes(git_dir, old, new)`: what a push changed, when the old head is still an
  ancestor of the new one; None after a force push or a rebase (the caller then compares
  each file's pull request patch with the one reviewed before);
- `own_changes(git_dir, old, new, old_base=, new_base=)`: what the pull request's own
  changes became since the old head, after a push, a merge of the base branch, a rebase or a
  force push: the files the base branch changed in between are left out (their diff would
  show the base's changes as the pull request's);
- `read_lines(git_dir, commit, path, start, end)`: lines of a file at a commit.

Only plumbing that reads objects runs here (`merge-base`, `diff-tree` between two commits,
`cat-file`): no work tree, no attributes, no filters, no external diff or textconv. Names come
from git's NUL-separated records, never from patch headers, so a file named with a space, a
tab, a quote or non-ASCII letters is the file GitHub names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from bot.agents.gitread import run_git
from policies.diff import FilePatch, parse_raw_diff, raw_diff_args

_SHA = re.compile(r"^[0-9a-f]{40}$")
MAX_DIFF_BYTES = 64 * 1024 * 1024
_DIFF_ARGS = ("-c", "core.quotePath=false", *raw_diff_args(3))


class DiffError(RuntimeError):
    """A diff could not be computed; the message says which commits and git's words."""


@dataclass(frozen=True, slots=True)
class PullChanges:
    merge_base: str
    head: str
    files: tuple[FilePatch, ...]

    def by_path(self) -> dict[str, FilePatch]:
        return {f.path: f for f in self.files}


def _check(sha: str) -> str:
    if not _SHA.match(sha):
        raise DiffError(f"not a commit id: {sha!r}")
    return sha


async def _git_text(git_dir: Path, *args: str) -> str:
    out = await run_git(list(args), git_dir=git_dir)
    if out.code != 0:
        detail = out.stderr.decode("utf-8", "replace").strip().splitlines()
        raise DiffError(f"git {args[0]} failed: {detail[-1] if detail else out.code}")
    if len(out.stdout) > MAX_DIFF_BYTES:
        raise DiffError(f"the diff is larger than {MAX_DIFF_BYTES // (1024 * 1024)} MiB")
    return out.stdout.decode("utf-8", "replace")


async def has_commit(git_dir: Path, sha: str) -> bool:
    if not _SHA.match(sha):
        return False
    out = await run_git(["cat-file", "-e", f"{sha}^{{commit}}"], git_dir=git_dir)
    return out.code == 0


async def branch_head(git_dir: Path, branch: str) -> str | None:
    """The commit a local branch points at, or None."""
    if not branch or branch.startswith("-") or ".." in branch:
        return None
    out = await run_git(
        ["rev-parse", "-q", "--verify", f"refs/heads/{branch}^{{commit}}"], git_dir=git_dir
    )
    sha = out.stdout.decode().strip()
    return sha if out.code == 0 and _SHA.match(sha) else None


async def merge_base(git_dir: Path, base: str, head: str) -> str:
    text = await _git_text(git_dir, "merge-base", _check(base), _check(head))
    return text.strip().splitlines()[0]


async def diff_files(git_dir: Path, old: str, new: str) -> tuple[FilePatch, ...]:
    text = await _git_text(git_dir, *_DIFF_ARGS, _check(old), _check(new), "--")
    return tuple(parse_raw_diff(text))


async def pull_changes(git_dir: Path, base: str, head: str) -> PullChanges:
    """The pull request as GitHub shows it: the merge base of `base` and `head`, to `head`."""
    mb = await merge_base(git_dir, base, head)
    return PullChanges(mb, head, await diff_files(git_dir, mb, head))


async def is_ancestor(git_dir: Path, old: str, new: str) -> bool:
    out = await run_git(["merge-base", "--is-ancestor", _check(old), _check(new)], git_dir=git_dir)
    return out.code == 0


async def push_changes(git_dir: Path, old: str, new: str) -> tuple[FilePatch, ...] | None:
    """What a push from `old` to `new` changed; None when `old` is gone or not an ancestor."""
    if not await has_commit(git_dir, old) or not await is_ancestor(git_dir, old, new):
        return None
    return await diff_files(git_dir, old, new)


async def changed_paths(git_dir: Path, old: str, new: str) -> frozenset[str]:
    """Every path a diff from `old` to `new` touches (both names of a rename)."""
    text = await _git_text(
        git_dir, "diff-tree", "-r", "-z", "--no-renames", "--name-only", _check(old), _check(new)
    )
    return frozenset(p for p in text.split("\0") if p)


async def own_changes(
    git_dir: Path, old: str, new: str, *, old_base: str | None, new_base: str
) -> tuple[FilePatch, ...] | None:
    """What the pull request's own changes became from the head reviewed at `old` (its merge
    base then: `old_base`) to `new` (merge base `new_base`), file by file.

    Where the base branch left a file as it was between the two merge bases, the diff of the
    file from `old` to `new` is the pull request's own change, whatever happened to the
    branch: a push, a merge of the base branch, a rebase or a force push. A file the base
    branch changed in between is left out: its diff would show the base's changes as the pull
    request's (the caller shows its whole patch). None when `old` is not in the mirror; with
    no `old_base` known, what `push_changes` says."""
    if not old_base:
        return await push_changes(git_dir, old, new)
    if not await has_commit(git_dir, old):
        return None
    moved: frozenset[str] = frozenset()
    if old_base != new_base:
        if not await has_commit(git_dir, old_base):
            return None
        moved = await changed_paths(git_dir, old_base, new_base)
    delta = await diff_files(git_dir, old, new)
    return tuple(f for f in delta if f.path not in moved and (f.old_path or f.path) not in moved)


async def read_file(
    git_dir: Path, commit: str, path: str, *, limit: int = 2 * 1024 * 1024
) -> str | None:
    """A file's text at a commit, or None when it is absent, not a file, or over `limit`."""
    if "\n" in path or path.startswith("-"):
        return None
    size = await run_git(["cat-file", "-s", f"{_check(commit)}:{path}"], git_dir=git_dir)
    if size.code != 0:
        return None
    try:
        if int(size.stdout.strip() or b"0") > limit:
            return None
    except ValueError:
        return None
    kind = await run_git(["cat-file", "-t", f"{commit}:{path}"], git_dir=git_dir)
    if kind.stdout.strip() != b"blob":
        return None
    out = await run_git(["cat-file", "blob", f"{commit}:{path}"], git_dir=git_dir)
    if out.code != 0:
        return None
    return out.stdout.decode("utf-8", "replace")


async def read_lines(git_dir: Path, commit: str, path: str, start: int, end: int) -> str:
    """Lines `start`..`end` (1-based, inclusive) of `path` at `commit`; empty when absent."""
    text = await read_file(git_dir, commit, path)
    if text is None or start < 1 or end < start:
        return ""
    return "\n".join(text.split("\n")[start - 1 : end])
