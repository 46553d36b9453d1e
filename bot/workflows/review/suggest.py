"""Prove a suggested fix before anyone sees it: it applies, stays in its lines, and passes.

An implementer agent commits a fix for a finding in its own worktree, on top of the reviewed
head. `prove_suggestion` accepts that commit as a ```suggestion block only when

- the commit sits directly on the head's history and changes exactly the finding's file;
- outside lines `start`..`end` the file is byte for byte what it was (a suggestion block
  replaces exactly the commented lines, so anything else would be silently lost);
- the repository's check command (`review.check_command`) passes in a checkout of the
  commit, run in the sandbox with its time limit; without a configured command, the file
  must at least parse (Python, JSON, TOML, YAML); a file no check applies to is not proven.

Anything else is posted as prose. `reclaim` deletes what the agents and the checks left in
the mirror: their worktree directories (removed by path, never through git inside them, so
a tampered worktree cannot steer the host) and their branches. Nothing is pushed.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import tomllib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread
import yaml

from bot.agents import sandbox
from bot.agents.gitread import run_git
from bot.log import get_logger
from bot.workflows.review.diffs import is_ancestor, read_file

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Proof:
    """Whether a fix became a suggestion; `text` is the new text of the commented lines."""

    ok: bool
    reason: str
    text: str | None = None


def replacement_lines(old: str, new: str, start: int, end: int) -> str | None:
    """The new text of lines `start`..`end` when `new` differs from `old` only there."""
    before, after = old.split("\n"), new.split("\n")
    if start < 1 or end < start or end > len(before):
        return None
    head, tail = before[: start - 1], before[end:]
    if after[: start - 1] != head:
        return None
    if len(after) < len(head) + len(tail) or after[len(after) - len(tail) :] != tail:
        return None
    middle = after[start - 1 : len(after) - len(tail)]
    if middle == before[start - 1 : end]:
        return None
    return "\n".join(middle)


def syntax_error(path: str, text: str) -> str | None:
    """A parse error of the file's language, None when it parses; "" when no check applies."""
    suffix = path.rsplit(".", 1)[-1].lower() if "." in path else ""
    try:
        if suffix in ("py", "pyi"):
            # Compiled to bytecode, never run: unlike `ast.parse`, this builds no AST objects,
            # whose constructor in CPython 3.11 keeps a process-wide recursion counter that
            # other threads' conversions can leave wrong (python/cpython#106905).
            compile(text, path, "exec", dont_inherit=True)
        elif suffix == "json":
            json.loads(text)
        elif suffix == "toml":
            tomllib.loads(text)
        elif suffix in ("yml", "yaml"):
            list(yaml.safe_load_all(text))
        else:
            return ""
    except (SyntaxError, ValueError, yaml.YAMLError) as exc:
        return f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
    return None


async def _changed_paths(git_dir: Path, head: str, commit: str) -> list[str]:
    out = await run_git(
        ["-c", "core.quotePath=false", "diff", "--no-ext-diff", "--name-only", "-z", head, commit],
        git_dir=git_dir,
    )
    if out.code != 0:
        return []
    return [p for p in out.stdout.decode("utf-8", "replace").split("\0") if p]


def _last_line(stderr: bytes) -> str:
    lines = stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[-1][:200] if lines else "no message"


@dataclass(frozen=True, slots=True)
class CheckRun:
    """What a check command did on a commit: `exit_code` None when it did not finish."""

    passed: bool
    exit_code: int | None
    what: str
    output: str = ""


class CheckoutFailed(RuntimeError):
    """A commit could not be checked out for a check; the message says why."""


@asynccontextmanager
async def scratch_checkout(git_dir: Path, commit: str) -> AsyncIterator[Path]:
    """A fresh checkout of `commit` in a temporary directory, removed (and the mirror's
    worktree list pruned) afterwards; raises CheckoutFailed."""
    tmp = Path(tempfile.mkdtemp(prefix="bot-check-"))
    tree = tmp / "tree"
    try:
        added = await run_git(
            ["worktree", "add", "--detach", "--no-checkout", str(tree), commit], git_dir=git_dir
        )
        if added.code != 0:
            raise CheckoutFailed(f"could not check the commit out ({_last_line(added.stderr)})")
        # A mirror is bare; with per-worktree config (which the engine's worktrees turn on)
        # its `core.bare = true` reaches every worktree that does not override it.
        per_worktree = await run_git(
            ["config", "--get", "extensions.worktreeConfig"], git_dir=git_dir
        )
        if per_worktree.stdout.strip() == b"true":
            await run_git(["config", "--worktree", "core.bare", "false"], cwd=tree)
        checkout = await run_git(["read-tree", "-mu", "HEAD"], cwd=tree)
        if checkout.code != 0:
            raise CheckoutFailed(f"could not check the commit out ({_last_line(checkout.stderr)})")
        yield tree
    finally:
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(tmp, ignore_errors=True))
        await run_git(["worktree", "prune"], git_dir=git_dir)


def described(result: sandbox.CommandResult, command: str, keep: int | None) -> CheckRun:
    """A sandboxed command's result as a CheckRun (`keep`: see `check_commit`)."""
    output = result.output if keep is None else result.output[-keep:]
    if result.timed_out:
        return CheckRun(False, None, f"`{command}` ran past its time limit", output)
    if result.exit_code != 0:
        return CheckRun(
            False, result.exit_code, f"`{command}` failed (exit code {result.exit_code})", output
        )
    return CheckRun(True, 0, f"`{command}` passed", output)


SANDBOX_MISSING = "the sandbox is not available here, so the check could not run"


async def check_commit(
    git_dir: Path,
    commit: str,
    command: str,
    *,
    time_limit: float,
    output_cap: int = sandbox.OUTPUT_CAP,
    keep: int | None = 4000,
) -> CheckRun:
    """Run `command` in the sandbox on a fresh checkout of `commit`; `output` is the last
    `keep` characters of what it printed (all of it, up to `output_cap` bytes, with None)."""
    if not sandbox.probe_sandbox().ok:
        return CheckRun(False, None, SANDBOX_MISSING)
    try:
        async with scratch_checkout(git_dir, commit) as tree:
            result = await sandbox.run_sandboxed(
                tree, command, time_limit=time_limit, output_cap=output_cap
            )
    except CheckoutFailed as exc:
        return CheckRun(False, None, str(exc))
    return described(result, command, keep)


async def run_check(
    git_dir: Path, commit: str, command: str, *, time_limit: float
) -> tuple[bool, str]:
    """Run `command` in the sandbox on a fresh checkout of `commit`; (passed, what happened)."""
    done = await check_commit(git_dir, commit, command, time_limit=time_limit)
    return done.passed, done.what


async def prove_suggestion(
    git_dir: Path,
    *,
    head: str,
    commit: str | None,
    path: str,
    start: int,
    end: int,
    check_command: str | None,
    time_limit: float,
) -> Proof:
    """See the module docstring."""
    if not commit:
        return Proof(False, "no fix was committed")
    if commit == head or not await is_ancestor(git_dir, head, commit):
        return Proof(False, "the fix is not a commit on top of the reviewed head")
    changed = await _changed_paths(git_dir, head, commit)
    if changed != [path]:
        return Proof(False, "the fix changes other files than the finding's")
    old = await read_file(git_dir, head, path)
    new = await read_file(git_dir, commit, path)
    if old is None or new is None:
        return Proof(False, "the file could not be read")
    text = replacement_lines(old, new, start, end)
    if text is None:
        return Proof(False, f"the fix changes lines outside {start}-{end}")
    if check_command:
        passed, what = await run_check(git_dir, commit, check_command, time_limit=time_limit)
        return Proof(passed, what, text if passed else None)
    problem = syntax_error(path, new)
    if problem is None:
        return Proof(True, "the file parses after the fix", text)
    if problem == "":
        return Proof(False, "no check is configured (`review.check_command`) for this file")
    return Proof(False, f"the file no longer parses: {problem}")


async def reclaim(git_dir: Path, worktrees: Sequence[str], branches: Sequence[str]) -> None:
    """Remove the agents' leftover worktree directories and their branches from the mirror."""

    def remove_dirs() -> None:
        for raw in worktrees:
            target = Path(raw)
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target, ignore_errors=True)

    await anyio.to_thread.run_sync(remove_dirs)
    if worktrees:
        await run_git(["worktree", "prune"], git_dir=git_dir)
    for branch in branches:
        if branch.startswith("bot/") and ".." not in branch:
            out = await run_git(["update-ref", "-d", f"refs/heads/{branch}"], git_dir=git_dir)
            if out.code != 0:
                log.warning("could not delete a suggestion branch", extra={"branch": branch})
