"""The workspace tools one agent uses: reading a commit, a local tree or its own worktree."""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from bot.agents.gitread import GitError, ObjectReader, check_rev, run_git
from bot.agents.large_files import WHOLE_READ_LIMIT, LargeFile, file_feeder, render_large
from bot.agents.models import ToolSpec
from bot.agents.paths import ToolError, check_path, is_git_data, resolve_readable
from bot.agents.rendering import (
    READ_BYTES_CAP,
    READ_LINES_DEFAULT,
    TOOL_RESULT_CAP,
    cap_lines,
    cap_output,
    cut_line,
    render_text,
)
from bot.agents.sandbox import DEFAULT_LIMITS, DEFAULT_TIMEOUT
from bot.agents.sandbox_limits import SandboxLimits
from bot.agents.toolargs import int_arg, str_arg
from bot.agents.toolspecs import TOOL_SPECS
from bot.agents.worktree_tools import WorktreeTools
from bot.engine.types import READ_ONLY_TOOLS, Workspace

__all__ = [
    "GREP_LINES_CAP",
    "LIST_CAP",
    "READ_BYTES_CAP",
    "TOOL_RESULT_CAP",
    "ToolError",
    "Toolbox",
    "cap_output",
    "check_path",
    "render_text",
]

LIST_CAP = 2000
GREP_LINES_CAP = 500
GREP_TIMEOUT = 20.0
"""Seconds one grep may take (all its git commands together), well under a tool's limit."""
# A back-reference (`\1` to `\9`, not after an escaped backslash) is the one thing that makes
# git's POSIX regex engine backtrack, exponentially; without it matching stays polynomial.
_BACK_REFERENCE = re.compile(r"(?<!\\)(?:\\\\)*\\[1-9]")
_REGEX_SPECIAL = frozenset(".[]()*+?{}|^$\\")


_SECRET_NAMES = (".env", ".env.*", "*.pem", "*.key", "id_rsa*", "id_ed25519*", "*.p12", "*.pfx")


def is_secret_name(path: str) -> bool:
    """True for file names that usually hold credentials."""
    name = posixpath.basename(path)
    return any(fnmatch.fnmatch(name, pattern) for pattern in _SECRET_NAMES)


def _walk(tree: Path) -> list[str]:
    files: list[str] = []
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames[:] = [d for d in dirnames if not is_git_data(d)]
        rel = os.path.relpath(dirpath, tree)
        files.extend(
            posixpath.normpath(posixpath.join(rel, f)) for f in filenames if not is_git_data(f)
        )
    return sorted(files)


class Toolbox(WorktreeTools):
    """The tools offered to one agent, bound to its workspace. Call `aclose()` at the end."""

    def __init__(
        self,
        workspace: Workspace,
        tool_names: tuple[str, ...] | list[str],
        *,
        sandbox_ok: bool = False,
        command_timeout: float = DEFAULT_TIMEOUT,
        grep_timeout: float = GREP_TIMEOUT,
        sandbox_limits: SandboxLimits = DEFAULT_LIMITS,
    ) -> None:
        self.workspace = workspace
        self.command_timeout = command_timeout
        self.sandbox_limits = sandbox_limits
        self.grep_timeout = min(grep_timeout, command_timeout)
        self.commits: list[str] = []
        names = [n for n in tool_names if n in TOOL_SPECS]
        if workspace.worktree is None:
            # No worktree: the writing tools simply do not exist for this agent.
            names = [n for n in names if n in READ_ONLY_TOOLS]
        if not sandbox_ok:
            names = [n for n in names if n != "run_command"]
        no_tree = workspace.worktree is None and workspace.local_root is None
        if no_tree and (workspace.git_dir is None or workspace.commit is None):
            names = []
        self.names: tuple[str, ...] = tuple(names)
        self._reader: ObjectReader | None = None
        if workspace.worktree is None and workspace.local_root is None and self.names:
            assert workspace.git_dir is not None and workspace.commit is not None
            self._reader = ObjectReader(workspace.git_dir, workspace.commit)

    def specs(self) -> list[ToolSpec]:
        return [TOOL_SPECS[name] for name in self.names]

    async def aclose(self) -> None:
        if self._reader is not None:
            await self._reader.aclose()

    async def call(self, name: str, args: Mapping[str, Any]) -> str:
        """Run one tool; ToolError for anything the model should hear about."""
        if name not in self.names:
            raise ToolError(f"the tool `{name}` is not available to this agent")
        handler = getattr(self, f"_tool_{name}")
        try:
            result: str = await handler(args)
        except GitError as exc:
            raise ToolError(str(exc)) from exc
        except OSError as exc:
            raise ToolError(f"{name} failed: {exc.strerror or exc}") from exc
        return result

    # -- where files come from -----------------------------------------------------------

    @property
    def _tree(self) -> Path | None:
        """The directory read from, when not reading the object database."""
        return self.workspace.worktree or self.workspace.local_root

    async def _load(self, path: str) -> bytes | LargeFile:
        """A file's content, or how to stream it when it is over WHOLE_READ_LIMIT; the size
        is known before anything is read, so a large file is never held whole."""
        if self._reader is not None:
            path = await self._reader.resolve_links(path)
            blob = await self._reader.read(path)
            if blob is None:
                raise ToolError(f"no such file in the commit: {path}")
            if blob.kind == "tree":
                raise ToolError(f"{path} is a directory; use list_files")
            if blob.kind == "submodule":
                raise ToolError(f"{path} is a submodule; its files are not available")
            if not blob.whole:
                return LargeFile(blob.size, partial(self._reader.stream, path))
            return blob.data
        tree = self._tree
        assert tree is not None
        if self.workspace.worktree is not None:
            await self._materialized(path)
            target = resolve_readable(tree, path)
        else:
            await self._check_local_visible(tree, path)
            target = resolve_readable(tree, path)
            real = target.relative_to(tree.resolve()).as_posix()
            if real != path:  # through a link: what it leads to must be visible too
                await self._check_local_visible(tree, real)
        if target.is_dir():
            raise ToolError(f"{path} is a directory; use list_files")
        if not target.is_file():
            raise ToolError(f"no such file: {path}")
        with target.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size <= WHOLE_READ_LIMIT:
                data = handle.read(WHOLE_READ_LIMIT + 1)
                if len(data) <= WHOLE_READ_LIMIT:
                    return data
                size = len(data)  # it grew while being read: at least this large
        return LargeFile(size, file_feeder(target))

    @staticmethod
    async def _check_local_visible(tree: Path, path: str) -> None:
        """A local working tree holds files that are not the repository's: secrets (.env,
        keys) and whatever git ignores. Agents see only what git would commit."""
        if is_secret_name(path):
            raise ToolError(f"{path} looks like a secret (an env file or a key); it is not shown")
        ignored = await run_git(["check-ignore", "-q", "--", path], cwd=tree)
        if ignored.code == 0:
            raise ToolError(f"{path} is ignored by git; only the repository's files are shown")

    async def _all_files(self) -> list[str]:
        if self._reader is not None:
            return [path for path, _, _ in await self._reader.entries()]
        tree = self._tree
        assert tree is not None
        out = await run_git(
            ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=tree
        )
        if out.code == 0:
            names = {p.decode("utf-8", "replace") for p in out.stdout.split(b"\0") if p}
            if self.workspace.worktree is None:
                names = {n for n in names if not is_secret_name(n)}
            return sorted(names)
        files = await anyio.to_thread.run_sync(_walk, tree)
        return [f for f in files if not is_secret_name(f)]

    # -- read-only tools -------------------------------------------------------------------

    async def _tool_read_file(self, args: Mapping[str, Any]) -> str:
        path = check_path(str_arg(args, "path", required=True))
        offset = int_arg(args, "offset", 1, 1, 10**9)
        limit = int_arg(args, "limit", READ_LINES_DEFAULT, 1, READ_LINES_DEFAULT)
        found = await self._load(path)
        if isinstance(found, LargeFile):
            return await render_large(path, found, offset, limit)
        return render_text(path, found, offset, limit)

    async def _tool_list_files(self, args: Mapping[str, Any]) -> str:
        path = check_path(str_arg(args, "path"), allow_root=True)
        pattern = str_arg(args, "pattern")
        if path:
            self._refuse_git_data(path)
        files = await self._all_files()
        if path:
            files = [f for f in files if f == path or f.startswith(path + "/")]
        if pattern:
            files = [
                f
                for f in files
                if fnmatch.fnmatch(f, pattern) or fnmatch.fnmatch(posixpath.basename(f), pattern)
            ]
        if not files:
            return "no files match"
        return cap_lines(files, LIST_CAP, "listing")

    async def _tool_grep(self, args: Mapping[str, Any]) -> str:
        pattern = str_arg(args, "pattern", required=True)
        assert pattern is not None
        path = check_path(str_arg(args, "path"), allow_root=True)
        if path:
            self._refuse_git_data(path)
        fixed = bool(args.get("fixed_string"))
        if not fixed and _BACK_REFERENCE.search(pattern):
            raise ToolError(
                "back-references (`\\1` to `\\9`) are not supported: they can make a search "
                "run for hours; search for the parts separately, or set fixed_string"
            )
        # Never `-P` (PCRE backtracks): extended POSIX syntax, or plain text when that is all
        # the pattern is; either given explicitly, so no repository config can change it.
        fixed = fixed or not _REGEX_SPECIAL.intersection(pattern)
        flags = ["-n", "-I", "--no-color", "--full-name", "-F" if fixed else "-E"]
        if args.get("ignore_case"):
            flags.append("-i")
        try:
            with anyio.fail_after(self.grep_timeout):
                lines = await self._grep(flags, pattern, path)
        except TimeoutError:
            raise ToolError(
                f"grep stopped after {self.grep_timeout:g} s: the pattern is too slow on these "
                "files; make it simpler or more literal, or narrow it with `path`"
            ) from None
        if not lines:
            return "no matches"
        lines = [cut_line(line, f"{len(line)} characters") for line in lines]
        return cap_output(cap_lines(lines, GREP_LINES_CAP, "matches"))

    async def _grep(self, flags: list[str], pattern: str, path: str) -> list[str]:
        spec = ["--", path] if path else []
        lines: list[str] = []
        if self._reader is not None:
            commit = self._reader.commit
            out = await run_git(
                ["grep", *flags, "-e", pattern, commit, *spec], git_dir=self._reader.git_dir
            )
            self._grep_status(out.code, out.stderr)
            prefix = f"{commit}:"
            lines = [
                line.removeprefix(prefix)
                for line in out.stdout.decode("utf-8", "replace").splitlines()
            ]
        else:
            tree = self._tree
            assert tree is not None
            if self.workspace.worktree is None:
                spec = spec or ["--"]
                spec += [f":(exclude,glob)**/{name}" for name in _SECRET_NAMES]
            out = await run_git(["grep", *flags, "--untracked", "-e", pattern, *spec], cwd=tree)
            if out.code not in (0, 1) and b"not a git repository" in out.stderr:
                out = await run_git(["grep", "--no-index", *flags, "-e", pattern, *spec], cwd=tree)
            self._grep_status(out.code, out.stderr)
            lines = out.stdout.decode("utf-8", "replace").splitlines()
            if self.workspace.worktree is not None:
                lines += await self._grep_unmaterialized(flags, pattern, spec, tree)
        return lines

    def _refuse_git_data(self, path: str) -> None:
        """A directory or file argument that leads (through links) into any `.git`."""
        tree = self._tree
        if self._reader is None and tree is not None:
            resolve_readable(tree, path)

    async def _grep_unmaterialized(
        self, flags: list[str], pattern: str, spec: list[str], tree: Path
    ) -> list[str]:
        """Matches in the base commit for files a sparse worktree has not checked out yet."""
        out = await run_git(["grep", *flags, "-e", pattern, "HEAD", *spec], cwd=tree)
        found: list[str] = []
        for line in out.stdout.decode("utf-8", "replace").splitlines():
            rel = line.removeprefix("HEAD:")
            file = rel.split(":", 1)[0]
            if not (tree / file).exists():
                found.append(rel)
        return found

    @staticmethod
    def _grep_status(code: int, stderr: bytes) -> None:
        if code not in (0, 1):
            raise ToolError(f"grep failed: {stderr.decode('utf-8', 'replace').strip()[:300]}")

    async def _git(self, args: list[str]) -> str:
        if self._reader is not None:
            out = await run_git(args, git_dir=self._reader.git_dir)
        else:
            tree = self._tree
            assert tree is not None
            out = await run_git(args, cwd=tree)
        if out.code != 0:
            raise ToolError(
                f"git {args[0]} failed: {out.stderr.decode('utf-8', 'replace').strip()[:300]}"
            )
        text = out.stdout.decode("utf-8", "replace")
        return cap_output(text) if text.strip() else "(empty)"

    async def _tool_git_diff(self, args: Mapping[str, Any]) -> str:
        base = str_arg(args, "base")
        head = str_arg(args, "head")
        path = check_path(str_arg(args, "path"), allow_root=True)
        cmd = ["diff", "--no-ext-diff", "--no-textconv", "--no-color"]
        if args.get("stat"):
            cmd.append("--stat")
        if self._reader is not None and base is None and head is None:
            # The commit against its parent(s); `--root` also shows a first commit in full.
            cmd = ["diff-tree", "-r", "--root", "--no-commit-id", "--no-color"]
            cmd += ["--stat"] if args.get("stat") else ["-p"]
            cmd.append(self._reader.commit)
        elif self._reader is not None:
            commit = self._reader.commit
            cmd += [check_rev(base or f"{commit}^"), check_rev(head or commit)]
        else:
            cmd.append(check_rev(base or "HEAD"))
            if head:
                cmd.append(check_rev(head))
        cmd += ["--", path] if path else []
        return await self._git(cmd)

    async def _tool_git_log(self, args: Mapping[str, Any]) -> str:
        rev = str_arg(args, "rev")
        path = check_path(str_arg(args, "path"), allow_root=True)
        count = int_arg(args, "max_count", 20, 1, 200)
        default = self._reader.commit if self._reader is not None else "HEAD"
        cmd = ["log", f"--max-count={count}", "--no-color", "--format=%H %ad %an%n    %s"]
        cmd += ["--date=short", check_rev(rev or default)]
        cmd += ["--", path] if path else []
        return await self._git(cmd)

    async def _tool_git_show(self, args: Mapping[str, Any]) -> str:
        rev = check_rev(str_arg(args, "rev", required=True) or "")
        cmd = ["show", "--no-ext-diff", "--no-textconv", "--no-color"]
        cmd += ["--stat"] if args.get("stat") else ["--patch", "--stat"]
        return await self._git([*cmd, rev, "--"])
