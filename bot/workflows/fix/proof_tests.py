"""A fix of a pull request carries the tests that reproduced its review's findings.

When `@app fix` runs on a pull request whose last review proved findings with a failing test
(`bot.workflows.review.proofs`) on the very commit the fix starts from, `reproduced_tests`
reads those tests from the review memory, `with_tests` adds them to the fix's commit (same
parent, same message, the tree plus the test files: one commit, as ever), and `tests_pass`
runs them with `review.test_command` in the sandbox on that commit. A fix they do not pass
is not pushed. A test whose text the memory holds cut short is left out.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from bot.git import hostgit
from bot.workflows.review.memory import load_state
from bot.workflows.review.proofs import SOURCE_CAP
from bot.workflows.review.suggest import CheckRun, check_commit
from policies.proofs import command_for_tests

if TYPE_CHECKING:
    from bot.store.contract import Storage


class ProofTestError(RuntimeError):
    """The tests could not be added to the fix's commit."""


def _safe(path: str) -> bool:
    parts = path.split("/")
    return (
        bool(path)
        and not path.startswith("/")
        and all(p not in ("", ".", "..", ".git") for p in parts)
        and "\\" not in path
    )


async def reproduced_tests(
    store: Storage, repo: str, number: int, head: str, *, bot_login: str
) -> dict[str, str]:
    """The test files (path: text) that reproduced findings of pull request `number` on
    `head`, as its review memory keeps them."""
    state = await load_state(store, repo, number, bot_login=bot_login)
    files: dict[str, str] = {}
    for proof in state.proofs.values():
        if proof.get("status") != "reproduced" or proof.get("head") != head:
            continue
        path = str(proof.get("test") or "").split("::", 1)[0]
        source = proof.get("source")
        if _safe(path) and isinstance(source, str) and 0 < len(source) < SOURCE_CAP:
            files[path] = source if source.endswith("\n") else source + "\n"
    return files


async def _git(git_dir: Path, args: list[str], env: dict[str, str], stdin: bytes = b"") -> str:
    done = await hostgit.run_async(args, git_dir=git_dir, extra_env=env, stdin=stdin or None)
    if done.returncode != 0:
        raise ProofTestError(
            f"git {args[0]} failed: " + done.stderr.decode("utf-8", "replace")[-300:]
        )
    return str(done.stdout.decode("utf-8", "replace")).strip()


async def with_tests(
    git_dir: Path, commit: str, files: dict[str, str], *, name: str, email: str
) -> str:
    """A commit like `commit` (its parent, its message) whose tree also holds `files`."""
    with tempfile.TemporaryDirectory(prefix="bot-index-") as tmp:
        env = {
            "GIT_INDEX_FILE": str(Path(tmp) / "index"),
            "GIT_AUTHOR_NAME": name,
            "GIT_AUTHOR_EMAIL": email,
            "GIT_COMMITTER_NAME": name,
            "GIT_COMMITTER_EMAIL": email,
        }
        await _git(git_dir, ["read-tree", f"{commit}^{{tree}}"], env)
        for path, text in sorted(files.items()):
            oid = await _git(git_dir, ["hash-object", "-w", "--stdin"], env, text.encode())
            await _git(
                git_dir, ["update-index", "--add", "--cacheinfo", f"100644,{oid},{path}"], env
            )
        tree = await _git(git_dir, ["write-tree"], env)
        parent = await _git(git_dir, ["rev-parse", "--verify", f"{commit}^"], env)
        message = await _git(git_dir, ["log", "-1", "--format=%B", commit], env)
        return await _git(
            git_dir, ["commit-tree", tree, "-p", parent, "-F", "-"], env, message.encode() + b"\n"
        )


async def tests_pass(
    git_dir: Path, commit: str, paths: list[str], command: str, *, time_limit: float
) -> CheckRun:
    """The tests at `paths` run with `command` in the sandbox on `commit`."""
    return await check_commit(
        git_dir, commit, command_for_tests(command, sorted(paths)), time_limit=time_limit
    )
