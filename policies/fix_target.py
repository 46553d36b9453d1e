"""Where a `fix` starts from and where its commit goes: pure, from facts the caller read.

- An issue: a `bot/fix-<n>-<slug>` branch from the default branch's head, and a draft pull
  request into the default branch; when an open pull request of the app already has such a
  branch for this issue, the new commit goes onto that branch instead (same pull request).
- The app's own pull request (head `bot/...` in the same repository): new commits on its
  head branch.
- Anyone else's pull request in the same repository: a new `bot/fix-<n>-...` branch from its
  head, and a draft pull request into its head branch.
- A pull request from a fork: nothing can be pushed there (and the app never pushes to a
  fork); the change is attached as a patch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from policies._fix_text import is_fix_branch

FixWhere = Literal["new_branch", "existing_branch", "patch_only"]


@dataclass(frozen=True, slots=True)
class PullFacts:
    """What the fix needs to know about the pull request it was asked on."""

    number: int
    head_ref: str
    head_sha: str
    head_repo: str | None
    """`owner/name` of the head's repository; None when the fork was deleted."""
    base_ref: str


@dataclass(frozen=True, slots=True)
class FixTarget:
    """Where the fix starts (`start_ref`/`start_sha`) and where it goes."""

    where: FixWhere
    start_sha: str | None
    """The commit the agents read and the change is made on; None: the default branch head."""
    branch: str | None
    """The branch to push onto (existing_branch), or None when a new name is to be made."""
    pull_base: str | None
    """The branch a new pull request goes into (new_branch)."""
    closes: bool
    """Whether the pull request body says `Fixes #n` (only for an issue)."""
    reason: str = ""


def for_issue(number: int, default_branch: str, open_fix_branches: dict[str, str]) -> FixTarget:
    """An issue's fix; `open_fix_branches` are this issue's `bot/fix-*` branches that have an
    open pull request (name -> head commit)."""
    own = sorted(name for name in open_fix_branches if is_fix_branch(name, number))
    if own:
        name = own[0]
        return FixTarget("existing_branch", open_fix_branches[name], name, None, closes=True)
    return FixTarget("new_branch", None, None, default_branch, closes=True)


def for_pull(pull: PullFacts, repo_full_name: str, default_branch: str) -> FixTarget:
    """A pull request's fix (see the module docstring)."""
    same_repo = pull.head_repo is not None and pull.head_repo.lower() == repo_full_name.lower()
    if not same_repo:
        return FixTarget(
            "patch_only",
            pull.head_sha,
            None,
            None,
            closes=False,
            reason="the pull request comes from a fork, and the app never pushes to a fork",
        )
    if pull.head_ref.startswith("bot/") and pull.head_ref != default_branch:
        return FixTarget("existing_branch", pull.head_sha, pull.head_ref, None, closes=False)
    if pull.head_ref == default_branch:
        return FixTarget(
            "patch_only",
            pull.head_sha,
            None,
            None,
            closes=False,
            reason="the pull request's head is the default branch, which the app never pushes to",
        )
    return FixTarget("new_branch", pull.head_sha, None, pull.head_ref, closes=False)
