"""A lint command's output read as candidate review findings, on changed lines only.

`review.lint_command` runs in the sandbox on a checkout of the head (`/workspace` there).
Its output is the pull request author's code speaking through a tool, so it is parsed, never
trusted:

- SARIF (a JSON document with `runs`): each result's first physical location, its rule id
  and message text;
- otherwise every line of the form `path:line[:col]: message` (ruff's `concise`, flake8,
  pylint's `parseable`, mypy, eslint's `unix`, gcc), anything else ignored;
- a path is made relative to the checkout (`./`, `/workspace/` and `file://` prefixes go);
  a path that leaves it (`..`, another absolute path) is dropped.

`candidates` keeps only hits on lines the pull request added (`changed`: path -> new-side
line numbers), each file's first `per_file`, `limit` in all, as findings the verifier then
rules on like any other (severity `low`, category `style`, the tool named in the title).
`files_argument` is the text `{files}` stands for: each path shell-quoted, `./` before one
that starts with `-`, so no file name can add a command or an option.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypedDict

__all__ = ["LintHit", "candidates", "files_argument", "parse_lint", "relative_path"]

_LINE = re.compile(
    r"^(?P<path>[^:\n\x00]{1,500}?):(?P<line>\d{1,7})(?::(?P<col>\d{1,6}))?(?::|\s-)\s*(?P<msg>\S.*)$"
)
_RULE = re.compile(r"^(?P<rule>[A-Z]{1,8}\d{1,5}|[a-z][a-z0-9-]{1,40}(?:/[a-z0-9-]{1,40})?)\b")
ROOT = "/workspace/"
MAX_HITS = 2_000
MAX_MESSAGE = 300


@dataclass(frozen=True, slots=True)
class LintHit:
    path: str
    line: int
    column: int | None
    message: str
    rule: str = ""


class Candidate(TypedDict):
    """The fields of a `ReviewFinding` (bot.workflows.schemas), as the workflow takes them."""

    path: str
    start_line: int
    end_line: int
    severity: str
    category: str
    title: str
    explanation: str


def relative_path(raw: str) -> str | None:
    """`raw` relative to the checkout, or None when it points outside it."""
    path = raw.strip()
    path = path.removeprefix("file://")
    if path.startswith(ROOT):
        path = path[len(ROOT) :]
    while path.startswith("./"):
        path = path[2:]
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        return None
    return path


def _sarif(data: object) -> list[LintHit] | None:
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
        return None
    hits: list[LintHit] = []
    for run in data["runs"]:
        results = run.get("results") if isinstance(run, dict) else None
        for result in results if isinstance(results, list) else []:
            if not isinstance(result, dict):
                continue
            message = result.get("message")
            text = message.get("text") if isinstance(message, dict) else None
            locations = result.get("locations")
            first = locations[0] if isinstance(locations, list) and locations else None
            physical = first.get("physicalLocation") if isinstance(first, dict) else None
            if not isinstance(physical, dict) or not isinstance(text, str):
                continue
            artifact = physical.get("artifactLocation")
            region = physical.get("region")
            uri = artifact.get("uri") if isinstance(artifact, dict) else None
            line = region.get("startLine") if isinstance(region, dict) else None
            column = region.get("startColumn") if isinstance(region, dict) else None
            path = relative_path(uri) if isinstance(uri, str) else None
            if path is None or not isinstance(line, int) or isinstance(line, bool) or line < 1:
                continue
            rule = result.get("ruleId")
            hits.append(
                LintHit(
                    path,
                    line,
                    column if isinstance(column, int) and not isinstance(column, bool) else None,
                    text,
                    rule if isinstance(rule, str) else "",
                )
            )
            if len(hits) >= MAX_HITS:
                return hits
    return hits


def parse_lint(output: str) -> list[LintHit]:
    """The hits in a lint command's output (SARIF, or `path:line[:col]: message` lines)."""
    stripped = output.strip()
    if stripped.startswith("{"):
        try:
            parsed = _sarif(json.loads(stripped))
        except ValueError:
            parsed = None
        if parsed is not None:
            return parsed
    hits: list[LintHit] = []
    for raw in output.splitlines():
        match = _LINE.match(raw.strip())
        if match is None:
            continue
        path = relative_path(match.group("path"))
        line = int(match.group("line"))
        if path is None or line < 1:
            continue
        col = match.group("col")
        message = match.group("msg").strip()
        rule = _RULE.match(message)
        hits.append(
            LintHit(path, line, int(col) if col else None, message, rule.group() if rule else "")
        )
        if len(hits) >= MAX_HITS:
            break
    return hits


def candidates(
    hits: Iterable[LintHit],
    changed: Mapping[str, frozenset[int]],
    *,
    tool: str,
    per_file: int = 10,
    limit: int = 50,
) -> list[Candidate]:
    """Findings for the hits on added lines (see the module docstring)."""
    out: list[Candidate] = []
    per: dict[str, int] = {}
    seen: set[tuple[str, int, str]] = set()
    name = tool or "lint"
    for hit in hits:
        lines = changed.get(hit.path)
        message = " ".join(hit.message.split())[:MAX_MESSAGE]
        key = (hit.path, hit.line, message)
        if not lines or hit.line not in lines or key in seen or not message:
            continue
        if per.get(hit.path, 0) >= per_file or len(out) >= limit:
            continue
        seen.add(key)
        per[hit.path] = per.get(hit.path, 0) + 1
        where = f"{hit.path}:{hit.line}" + (f":{hit.column}" if hit.column else "")
        out.append(
            Candidate(
                path=hit.path,
                start_line=hit.line,
                end_line=hit.line,
                severity="low",
                category="style",
                title=f"{name}: {message}"[:200],
                explanation=f"`{name}` reports at `{where}`: {message}",
            )
        )
    return out


def files_argument(paths: Iterable[str]) -> str:
    """What `{files}` in a lint command stands for: the paths, each shell-quoted."""
    return " ".join(shlex.quote(f"./{p}" if p.startswith("-") else p) for p in paths)
