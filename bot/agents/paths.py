"""Repository-relative paths for agent tools: anything that could escape is refused."""

from __future__ import annotations

from pathlib import Path


class ToolError(Exception):
    """A tool call failed in a way the model can act on; the message goes back to it."""


def check_path(raw: object, *, allow_root: bool = False) -> str:
    """A normalized repository-relative path, or ToolError for anything that could escape."""
    if raw is None or raw == "":
        if allow_root:
            return ""
        raise ToolError("a path is required")
    if not isinstance(raw, str):
        raise ToolError("the path must be a string")
    if "\0" in raw or "\n" in raw:
        raise ToolError("the path contains a NUL byte or a newline")
    if raw.startswith(("/", "\\")) or (len(raw) > 1 and raw[1] == ":"):
        raise ToolError(
            f"absolute paths are refused: {raw!r}; use a path relative to the repository"
        )
    parts = [p for p in raw.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ToolError(f"paths with `..` are refused: {raw!r}")
    if ".git" in parts:
        raise ToolError("`.git` is git's own data, not part of the repository's files")
    path = "/".join(parts)
    if not path and not allow_root:
        raise ToolError("a file path is required")
    return path


def resolve_in(root: Path, rel: str) -> Path:
    """`root/rel` with symlinks resolved; ToolError when that leads outside `root`."""
    base = root.resolve()
    target = (base / rel).resolve()
    if target != base and base not in target.parents:
        raise ToolError(f"{rel!r} leads outside the repository (through a symbolic link)")
    return target


def is_git_data(name: str) -> bool:
    """True for a path component that is git's own data: `.git` (a directory or a file)."""
    return name.lower() == ".git"


def resolve_readable(root: Path, rel: str) -> Path:
    """`root/rel` with symlinks resolved, for reading: ToolError when that leads outside `root`
    or into any `.git`, whose config may hold a token in a remote URL."""
    target = resolve_in(root, rel)
    if any(is_git_data(part) for part in target.relative_to(root.resolve()).parts):
        raise ToolError(
            f"{rel!r} leads into `.git` (through a symbolic link): git's own data is not shown"
        )
    return target
