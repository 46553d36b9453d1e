"""Pushes to the fake GitHub: branch protection as GitHub answers it, and a record of each push.

`git receive-pack` (behind `git http-backend`) runs with the fake's own hooks, never the
repository's: `pre-receive` refuses any update of the default branch or of a branch marked
protected with GitHub's `GH006` line, and `post-receive` writes the refs that did change to a
file the fake reads back into `fake.pushes`; open pull requests from a pushed branch move
to its new head. `receive.denyNonFastForwards` refuses a force push
to any branch (stricter than GitHub, which allows it on unprotected branches: the app never
force-pushes, so one is a bug the tests must see).
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from tests.fakes._github_reviews import push_pull
from tests.fakes._github_state import FakeRepo, Push

if TYPE_CHECKING:
    from tests.fakes.github import FakeGitHub

_PRE_RECEIVE = """#!/bin/sh
# The fake GitHub's branch protection: refs named in FAKE_GITHUB_PROTECTED are never updated.
status=0
while read -r old new ref; do
  for protected in $FAKE_GITHUB_PROTECTED; do
    if [ "$ref" = "$protected" ]; then
      echo "error: GH006: Protected branch update failed for $ref." >&2
      status=1
    fi
  done
done
exit $status
"""
_POST_RECEIVE = """#!/bin/sh
# The fake GitHub's push record: every ref this push changed, one "old new ref" a line.
cat >> "$FAKE_GITHUB_PUSH_LOG"
"""


@functools.cache
def hooks_dir() -> Path:
    """A directory holding the fake's hooks, made once per process."""
    path = Path(tempfile.mkdtemp(prefix="fake-github-hooks-"))
    for name, text in (("pre-receive", _PRE_RECEIVE), ("post-receive", _POST_RECEIVE)):
        hook = path / name
        hook.write_text(text)
        hook.chmod(0o755)
    return path


def protected_refs(fr: FakeRepo) -> list[str]:
    return sorted(f"refs/heads/{branch}" for branch in {fr.default_branch, *fr.protected})


def receive_settings(fr: FakeRepo, log: Path) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """The environment and config `git http-backend` gets for one push to `fr`."""
    env = {
        "FAKE_GITHUB_PROTECTED": " ".join(protected_refs(fr)),
        "FAKE_GITHUB_PUSH_LOG": str(log),
    }
    config = [
        ("core.hooksPath", str(hooks_dir())),
        ("receive.denyNonFastForwards", "true"),
        ("receive.denyDeletes", "false"),
    ]
    return env, config


def new_push_log() -> Path:
    fd, name = tempfile.mkstemp(prefix="fake-github-push-", suffix=".log")
    os.close(fd)
    return Path(name)


def read_push_log(fr: FakeRepo, log: Path) -> list[Push]:
    """The refs the push changed, from the log `post-receive` wrote; the log is removed."""
    try:
        lines: Iterable[str] = log.read_text().splitlines()
    finally:
        log.unlink(missing_ok=True)
    pushes = []
    for line in lines:
        parts = line.split()
        if len(parts) == 3:
            old, new, ref = parts
            pushes.append(Push(fr.full_name, ref, old, new))
    return pushes


async def follow_pushes(fake: FakeGitHub, fr: FakeRepo, pushes: Iterable[Push]) -> None:
    """Move the head of each open pull request whose branch was pushed, as GitHub does."""
    for push in pushes:
        if not push.ref.startswith("refs/heads/") or not push.new.strip("0"):
            continue
        branch = push.ref.removeprefix("refs/heads/")
        for number, pull in sorted(fr.pulls.items()):
            head = pull["head"]
            same_repo = head["repo"]["full_name"] == fr.full_name
            if pull["state"] == "open" and same_repo and head["ref"] == branch:
                await push_pull(fake, fr.owner, fr.name, number, push.new)
