"""The writing tools of an agent's own sparse worktree: write, edit, run a command, commit.

Every tool first checks the worktree's `.git` (`bot.git.gitguard`): once it is found changed the
worktree is quarantined, every tool call fails and the runtime ends the agent. Writes land only
where `resolve_writable` allows (inside the tree, never in any `.git`) and never through a link.
`commit` refuses nested repositories and gitlinks, so host git never has a submodule to enter.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from bot.agents import sandbox
from bot.agents.gitread import run_git
from bot.agents.paths import (
    ToolError,
    check_path,
    read_no_follow,
    resolve_in,
    resolve_writable,
    write_no_follow,
)
from bot.agents.sandbox_limits import SandboxLimits
from bot.agents.toolargs import int_arg, str_arg
from bot.engine import worktree as worktree_ops
from bot.engine.git import GitError as EngineGitError
from bot.engine.types import Workspace
from bot.git import gitguard
from bot.git.gitguard import WorktreeQuarantined

WRITE_CAP = 2 * 1024 * 1024
EDIT_CAP = 32 * 1024 * 1024
NESTED_CAP = 20  # nested repositories named in one refusal


async def materialize(worktree: Path, paths: list[str]) -> None:
    """Check these files out of the sparse worktree's index (the engine's helper, off-loop)."""
    try:
        await anyio.to_thread.run_sync(worktree_ops.materialize, worktree, paths)
    except WorktreeQuarantined as exc:
        raise ToolError(str(exc)) from exc
    except EngineGitError as exc:
        raise ToolError(f"cannot check out {', '.join(paths)}: {exc}") from exc


async def materialize_all(worktree: Path) -> None:
    """Check the whole tree out (before a command runs)."""
    try:
        await anyio.to_thread.run_sync(worktree_ops.materialize_all, worktree)
    except WorktreeQuarantined as exc:
        raise ToolError(str(exc)) from exc
    except EngineGitError as exc:
        raise ToolError(f"cannot check out the whole tree: {exc}") from exc


class WorktreeTools:
    """Mixed into Toolbox; these handlers run only when the workspace has a worktree."""

    workspace: Workspace
    commits: list[str]
    command_timeout: float
    sandbox_limits: SandboxLimits

    @property
    def _worktree(self) -> Path:
        """The worktree, after checking that its `.git` is the one the engine made."""
        if self.workspace.worktree is None:
            raise ToolError("this agent has no worktree to write to")
        try:
            gitguard.check(self.workspace.worktree)
        except WorktreeQuarantined as exc:
            raise ToolError(str(exc)) from exc
        return self.workspace.worktree

    @property
    def quarantined(self) -> str | None:
        """Why this agent's worktree was quarantined (the agent cannot go on), or None."""
        worktree = self.workspace.worktree
        return gitguard.quarantined(worktree) if worktree is not None else None

    async def _materialized(self, path: str) -> Path:
        """The file's real location in the worktree, checked out first (with any link on
        the way to it), and refused when a link leads outside."""
        worktree = self._worktree
        await materialize(worktree, [path, *await self._tracked_parents(path)])
        target = resolve_in(worktree, path)
        if not target.exists():
            real = target.relative_to(worktree.resolve()).as_posix()
            if real != path:
                await materialize(worktree, [real])
        return target

    async def _writable_target(self, path: str) -> str:
        """Where a write to `path` lands, relative to the worktree (checked out first)."""
        target = await self._materialized(path)
        real = resolve_writable(self._worktree, path)
        if target.is_dir():
            raise ToolError(f"{path} is a directory")
        return real

    async def _tracked_parents(self, path: str) -> list[str]:
        """Parent paths the base tree holds as files or links (not directories): they must
        be checked out before writing below them, so a link out of the tree is seen."""
        parts = path.split("/")[:-1]
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if not prefixes:
            return []
        out = await run_git(
            ["--literal-pathspecs", "ls-tree", "-z", "HEAD", "--", *prefixes], cwd=self._worktree
        )
        found: list[str] = []
        for record in out.stdout.split(b"\0"):
            meta, _, name = record.partition(b"\t")
            if name and not meta.startswith(b"040000"):
                found.append(name.decode("utf-8", "surrogateescape"))
        return found

    async def _tool_write_file(self, args: Mapping[str, Any]) -> str:
        path = check_path(str_arg(args, "path", required=True))
        content = str_arg(args, "content", required=True) or ""
        data = content.encode("utf-8")
        if len(data) > WRITE_CAP:
            raise ToolError(f"content too large ({len(data)} bytes; at most {WRITE_CAP})")
        real = await self._writable_target(path)
        existed = write_no_follow(self._worktree.resolve(), real, data)
        return f"{'overwrote' if existed else 'created'} {path} ({len(data)} bytes)"

    async def _tool_edit_file(self, args: Mapping[str, Any]) -> str:
        path = check_path(str_arg(args, "path", required=True))
        old = str_arg(args, "old_text", required=True) or ""
        new = str_arg(args, "new_text", required=True)
        assert new is not None
        if not old:
            raise ToolError("`old_text` must not be empty; use write_file to create a file")
        real = await self._writable_target(path)
        root = self._worktree.resolve()
        raw = read_no_follow(root, real, EDIT_CAP + 1)
        if len(raw) > EDIT_CAP:
            raise ToolError(f"{path} is too large to edit (over {EDIT_CAP // (1024 * 1024)} MiB)")
        text = raw.decode("utf-8", "surrogateescape")
        count = text.count(old)
        if count == 0:
            raise ToolError(
                f"`old_text` was not found in {path}; read the file and copy the text exactly"
            )
        if count > 1 and not args.get("replace_all"):
            raise ToolError(
                f"`old_text` occurs {count} times in {path}; include more surrounding lines "
                "so it is unique, or set replace_all"
            )
        write_no_follow(root, real, text.replace(old, new).encode("utf-8", "surrogateescape"))
        return f"edited {path}: replaced {count} occurrence(s)"

    async def _tool_run_command(self, args: Mapping[str, Any]) -> str:
        command = str_arg(args, "command", required=True) or ""
        if not command.strip():
            raise ToolError("`command` is empty")
        timeout = float(int_arg(args, "timeout_seconds", 180, 1, 180))
        worktree = self._worktree
        await materialize_all(worktree)
        # Stop the command a little before the tool timeout, so its partial output survives.
        limit = min(timeout, max(1.0, self.command_timeout - 2.0))
        result = await sandbox.run_sandboxed(
            worktree, command, time_limit=limit, limits=self.sandbox_limits
        )
        return result.render()

    async def _tool_commit(self, args: Mapping[str, Any]) -> str:
        message = (str_arg(args, "message", required=True) or "").strip()
        if not message:
            raise ToolError("the commit message is empty")
        worktree = self._worktree
        nested = await anyio.to_thread.run_sync(nested_repositories, worktree)
        if nested:
            raise ToolError(
                "refusing to commit: nested git repositories are never committed (their "
                "contents would become a submodule link); remove their `.git` or move them "
                "out of the tree: " + ", ".join(nested)
            )
        added = await run_git(["add", "-A", "--sparse"], cwd=worktree)
        if added.code != 0:
            added = await run_git(["add", "-A"], cwd=worktree)
        if added.code != 0:
            raise ToolError(
                f"git add failed: {added.stderr.decode(errors='replace').strip()[:300]}"
            )
        links = await self._new_gitlinks(worktree)
        if links:
            await run_git(
                ["--literal-pathspecs", "reset", "-q", "HEAD", "--", *links], cwd=worktree
            )
            raise ToolError(
                "refusing to commit submodule links (gitlinks); they were unstaged: "
                + ", ".join(links[:NESTED_CAP])
            )
        staged = await run_git(["diff", "--cached", "--quiet"], cwd=worktree)
        if staged.code == 0:
            raise ToolError("nothing to commit: the worktree has no changes")
        done = await run_git(["commit", "--no-verify", "-q", "-m", message], cwd=worktree)
        if done.code != 0:
            raise ToolError(
                f"git commit failed: {done.stderr.decode(errors='replace').strip()[:300]}"
            )
        sha = (await run_git(["rev-parse", "HEAD"], cwd=worktree)).stdout.decode().strip()
        stat = await run_git(["show", "--stat", "--format=", "HEAD"], cwd=worktree)
        self.commits.append(sha)
        branch = self.workspace.branch or "the worktree's branch"
        summary = stat.stdout.decode("utf-8", "replace").strip().splitlines()
        return f"committed {sha[:12]} on {branch}" + (f": {summary[-1].strip()}" if summary else "")

    async def _new_gitlinks(self, worktree: Path) -> list[str]:
        """Gitlinks (mode 160000) staged in the index that HEAD does not hold as they are."""
        staged = await run_git(["ls-files", "--stage", "-z"], cwd=worktree)
        base = await run_git(["ls-tree", "-r", "-z", "--full-tree", "HEAD"], cwd=worktree)
        if staged.code != 0 or base.code != 0:
            raise ToolError("cannot read the index to check it for submodule links")
        before = _gitlinks(base.stdout)
        after = _gitlinks(staged.stdout)
        return sorted(path for path, sha in after.items() if before.get(path) != sha)


def _gitlinks(listing: bytes) -> dict[str, str]:
    """`path -> sha` of the mode-160000 records in `ls-files --stage -z` or `ls-tree -z`."""
    found: dict[str, str] = {}
    for record in listing.split(b"\0"):
        meta, _, name = record.partition(b"\t")
        fields = meta.split()
        if name and fields and fields[0] == b"160000":
            sha = fields[2] if fields[1] == b"commit" else fields[1]
            found[name.decode("utf-8", "surrogateescape")] = sha.decode()
    return found


def nested_repositories(worktree: Path) -> list[str]:
    """Directories below the worktree's root that hold a `.git` of their own (a directory, a
    file or a link), found without following links; at most NESTED_CAP of them."""
    found: list[str] = []
    root = worktree.resolve()
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        names = [*dirnames, *filenames]
        if here != root and any(name.casefold() == ".git" for name in names):
            found.append(here.relative_to(root).as_posix())
            if len(found) >= NESTED_CAP:
                break
        dirnames[:] = [d for d in dirnames if d.casefold() != ".git"]
    return sorted(found)
