"""The writing tools of an agent's own sparse worktree: write, edit, run a command, commit."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from bot.agents import sandbox
from bot.agents.gitread import run_git
from bot.agents.paths import ToolError, check_path, resolve_in
from bot.agents.toolargs import int_arg, str_arg
from bot.engine import worktree as worktree_ops
from bot.engine.git import GitError as EngineGitError
from bot.engine.types import Workspace

WRITE_CAP = 2 * 1024 * 1024


async def materialize(worktree: Path, paths: list[str]) -> None:
    """Check these files out of the sparse worktree's index (the engine's helper, off-loop)."""
    try:
        await anyio.to_thread.run_sync(worktree_ops.materialize, worktree, paths)
    except EngineGitError as exc:
        raise ToolError(f"cannot check out {', '.join(paths)}: {exc}") from exc


async def materialize_all(worktree: Path) -> None:
    """Check the whole tree out (before a command runs)."""
    try:
        await anyio.to_thread.run_sync(worktree_ops.materialize_all, worktree)
    except EngineGitError as exc:
        raise ToolError(f"cannot check out the whole tree: {exc}") from exc


class WorktreeTools:
    """Mixed into Toolbox; these handlers run only when the workspace has a worktree."""

    workspace: Workspace
    commits: list[str]
    command_timeout: float

    @property
    def _worktree(self) -> Path:
        if self.workspace.worktree is None:
            raise ToolError("this agent has no worktree to write to")
        return self.workspace.worktree

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

    async def _writable_target(self, path: str) -> Path:
        target = await self._materialized(path)
        if target.is_dir():
            raise ToolError(f"{path} is a directory")
        return target

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
        target = await self._writable_target(path)
        resolve_in(self._worktree, posixpath.dirname(path))
        target.parent.mkdir(parents=True, exist_ok=True)
        resolve_in(self._worktree, path)
        existed = target.exists()
        target.write_bytes(data)
        return f"{'overwrote' if existed else 'created'} {path} ({len(data)} bytes)"

    async def _tool_edit_file(self, args: Mapping[str, Any]) -> str:
        path = check_path(str_arg(args, "path", required=True))
        old = str_arg(args, "old_text", required=True) or ""
        new = str_arg(args, "new_text", required=True)
        assert new is not None
        if not old:
            raise ToolError("`old_text` must not be empty; use write_file to create a file")
        target = await self._writable_target(path)
        if not target.is_file():
            raise ToolError(f"no such file: {path}")
        text = target.read_bytes().decode("utf-8", "surrogateescape")
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
        target.write_bytes(text.replace(old, new).encode("utf-8", "surrogateescape"))
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
        result = await sandbox.run_sandboxed(worktree, command, time_limit=limit)
        return result.render()

    async def _tool_commit(self, args: Mapping[str, Any]) -> str:
        message = (str_arg(args, "message", required=True) or "").strip()
        if not message:
            raise ToolError("the commit message is empty")
        worktree = self._worktree
        added = await run_git(["add", "-A", "--sparse"], cwd=worktree)
        if added.code != 0:
            added = await run_git(["add", "-A"], cwd=worktree)
        if added.code != 0:
            raise ToolError(
                f"git add failed: {added.stderr.decode(errors='replace').strip()[:300]}"
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
