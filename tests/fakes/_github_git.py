"""Git plumbing for the fake GitHub: smart HTTP through `git http-backend`, and diffs of pulls."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio

_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


async def git(git_dir: Path, *args: str, check: bool = True) -> str:
    """Run git against a bare repository and return stdout (text)."""
    result = await anyio.run_process(
        ["git", f"--git-dir={git_dir}", *args],
        check=False,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"},
    )
    if check and result.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {result.stderr.decode(errors='replace')}")
    return result.stdout.decode("utf-8", errors="replace")


@dataclass(frozen=True, slots=True)
class CgiAnswer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


async def http_backend(
    git_dir: Path,
    rest: str,
    *,
    method: str,
    query: str,
    body: bytes,
    content_type: str | None,
    content_encoding: str | None,
    git_protocol: str | None,
    extra_env: Mapping[str, str] | None = None,
    config: Sequence[tuple[str, str]] = (),
) -> CgiAnswer:
    """Answer one smart-HTTP request for `git_dir` by running `git http-backend` as a CGI.

    `config` adds command-line-scope settings (hooks, receive rules) and `extra_env` variables
    the hooks read.
    """
    settings = [
        ("http.receivepack", "true"),
        ("uploadpack.allowAnySHA1InWant", "true"),
        *config,
    ]
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "GIT_PROJECT_ROOT": str(git_dir.parent),
        "GIT_HTTP_EXPORT_ALL": "1",
        "PATH_INFO": f"/{git_dir.name}/{rest}",
        "REQUEST_METHOD": method,
        "QUERY_STRING": query,
        "CONTENT_LENGTH": str(len(body)),
        "REMOTE_USER": "x-access-token",
        "REMOTE_ADDR": "127.0.0.1",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_COUNT": str(len(settings)),
        **(extra_env or {}),
    }
    for i, (key, value) in enumerate(settings):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    if content_type:
        env["CONTENT_TYPE"] = content_type
    if content_encoding:
        env["HTTP_CONTENT_ENCODING"] = content_encoding
    if git_protocol:
        env["GIT_PROTOCOL"] = git_protocol
    result = await anyio.run_process(["git", "http-backend"], input=body, env=env, check=False)
    out = result.stdout
    sep = out.find(b"\r\n\r\n")
    head, payload = (out[:sep], out[sep + 4 :]) if sep >= 0 else out.split(b"\n\n", 1)
    status = 200
    headers: list[tuple[str, str]] = []
    for line in head.decode("latin-1").splitlines():
        name, _, value = line.partition(":")
        if name.lower() == "status":
            status = int(value.strip().split()[0])
        elif name:
            headers.append((name.strip(), value.strip()))
    return CgiAnswer(status, headers, payload)


@dataclass(frozen=True, slots=True)
class FileChange:
    filename: str
    status: str
    additions: int
    deletions: int
    patch: str
    previous_filename: str | None = None


_STATUS = {"A": "added", "D": "removed", "M": "modified", "R": "renamed", "C": "copied"}


async def pull_changes(git_dir: Path, base: str, head: str) -> tuple[str, list[FileChange]]:
    """The three-dot diff of a pull (merge base to head) and its per-file changes."""
    merge_base = (await git(git_dir, "merge-base", base, head)).strip()
    diff = await git(git_dir, "diff", "--no-color", "-M", merge_base, head)
    numstat = await git(git_dir, "diff", "--numstat", "-M", "-z", merge_base, head)
    names = await git(git_dir, "diff", "--name-status", "-M", "-z", merge_base, head)
    counts: dict[str, tuple[int, int]] = {}
    parts = numstat.split("\0")
    i = 0
    while i < len(parts) and parts[i]:
        added, deleted, path = parts[i].split("\t", 2)
        if not path:  # a rename: the old and new paths follow as separate fields
            path = parts[i + 2]
            i += 2
        counts[path] = (int(added) if added != "-" else 0, int(deleted) if deleted != "-" else 0)
        i += 1
    changes: list[FileChange] = []
    fields = names.split("\0")
    i = 0
    while i < len(fields) and fields[i]:
        code = fields[i][0]
        previous = None
        if code in "RC":
            previous, path = fields[i + 1], fields[i + 2]
            i += 3
        else:
            path = fields[i + 1]
            i += 2
        patch = await git(git_dir, "diff", "--no-color", "-M", merge_base, head, "--", path)
        body = patch.split("\n@@", 1)
        hunk_text = "@@" + body[1] if len(body) == 2 else ""
        add, delete = counts.get(path, (0, 0))
        changes.append(
            FileChange(path, _STATUS.get(code, "modified"), add, delete, hunk_text, previous)
        )
    return diff, changes


def commentable_lines(patch: str) -> dict[str, set[int]]:
    """Lines a review comment may target in one file's patch: RIGHT (new) and LEFT (old) sides."""
    right: set[int] = set()
    left: set[int] = set()
    old = new = 0
    for line in patch.splitlines():
        match = _HUNK.match(line)
        if match:
            old, new = int(match.group(1)), int(match.group(2))
            continue
        if line.startswith("+"):
            right.add(new)
            new += 1
        elif line.startswith("-"):
            left.add(old)
            old += 1
        elif line.startswith(" ") or line == "":
            right.add(new)
            left.add(old)
            old += 1
            new += 1
    return {"RIGHT": right, "LEFT": left}
