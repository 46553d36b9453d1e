"""The workspace tools as offered to a model: names, descriptions, argument schemas."""

from __future__ import annotations

from typing import Any

from bot.agents.models import ToolSpec

STRUCTURED_OUTPUT = "structured_output"


def _obj(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_PATH = {"type": "string", "description": "Repository-relative path, e.g. `src/app.py`."}
_REV = {"type": "string", "description": "A git revision: a commit sha, branch or tag."}

TOOL_SPECS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        ToolSpec(
            "read_file",
            "Read a text file of the repository, with line numbers. Long files come in pages: "
            "pass `offset` (first line, from 1) and `limit` (number of lines) to read further.",
            _obj(
                {
                    "path": _PATH,
                    "offset": {"type": "integer", "minimum": 1},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 2000},
                },
                ["path"],
            ),
        ),
        ToolSpec(
            "list_files",
            "List the repository's files under a directory (default: all), optionally "
            "filtered by a glob pattern such as `*.py` or `tests/**/test_*.py`.",
            _obj({"path": _PATH, "pattern": {"type": "string"}}, []),
        ),
        ToolSpec(
            "grep",
            "Search file contents with a regular expression (extended POSIX syntax, without "
            "back-references). Returns `path:line:text` lines. Narrow it with `path` (a "
            "directory or file).",
            _obj(
                {
                    "pattern": {"type": "string"},
                    "path": _PATH,
                    "ignore_case": {"type": "boolean"},
                    "fixed_string": {"type": "boolean", "description": "Match literally."},
                },
                ["pattern"],
            ),
        ),
        ToolSpec(
            "git_diff",
            "Show a diff. Without arguments: the changes under review (read-only runs: the "
            "commit against its parent; in a worktree: uncommitted changes). `base` and `head` "
            "pick the revisions; `stat` shows a summary only.",
            _obj({"base": _REV, "head": _REV, "path": _PATH, "stat": {"type": "boolean"}}, []),
        ),
        ToolSpec(
            "git_log",
            "Show commit history (newest first), optionally for one path.",
            _obj(
                {
                    "rev": _REV,
                    "path": _PATH,
                    "max_count": {"type": "integer", "minimum": 1, "maximum": 200},
                },
                [],
            ),
        ),
        ToolSpec(
            "git_show",
            "Show one commit: its message and patch (or only a summary with `stat`).",
            _obj({"rev": _REV, "stat": {"type": "boolean"}}, ["rev"]),
        ),
        ToolSpec(
            "write_file",
            "Create or overwrite a file with the given content.",
            _obj({"path": _PATH, "content": {"type": "string"}}, ["path", "content"]),
        ),
        ToolSpec(
            "edit_file",
            "Replace an exact piece of text in a file. `old_text` must occur exactly once "
            "(include surrounding lines to make it unique) unless `replace_all` is true.",
            _obj(
                {
                    "path": _PATH,
                    "old_text": {"type": "string"},
                    "new_text": {"type": "string"},
                    "replace_all": {"type": "boolean"},
                },
                ["path", "old_text", "new_text"],
            ),
        ),
        ToolSpec(
            "run_command",
            "Run a shell command (/bin/sh -c) in the repository, inside a sandbox: no network, "
            "only the repository is writable. Returns its output and exit code.",
            _obj(
                {
                    "command": {"type": "string"},
                    "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": 180},
                },
                ["command"],
            ),
        ),
        ToolSpec(
            "commit",
            "Commit every change in the worktree with a message. It does not push.",
            _obj({"message": {"type": "string", "minLength": 1}}, ["message"]),
        ),
    )
}

CLARIFICATION_SPEC_PARAMETERS = _obj(
    {
        "question": {"type": "string"},
        "clarification_type": {
            "type": "string",
            "enum": [
                "missing_info",
                "ambiguous_requirement",
                "approach_choice",
                "risk_confirmation",
                "suggestion",
            ],
        },
        "context": {"type": "string"},
        "options": {"type": "array", "items": {"type": "string"}},
    },
    ["question"],
)


def structured_output_spec(schema: dict[str, Any]) -> tuple[ToolSpec, bool]:
    """The terminating tool for `schema`; True when the schema had to be wrapped in `result`
    (tool arguments must be a JSON object)."""
    wrapped = schema.get("type") != "object"
    parameters = _obj({"result": schema}, ["result"]) if wrapped else schema
    spec = ToolSpec(
        STRUCTURED_OUTPUT,
        "Return your final result. Call this exactly once, as your last action; the "
        "arguments must match the schema.",
        parameters,
    )
    return spec, wrapped
