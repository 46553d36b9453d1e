"""Agent types: the built-in presets and the custom types declared by the operator or a repo."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from bot.engine.types import ALL_TOOLS, EFFORTS, READ_ONLY_TOOLS, WRITING_TOOLS, AgentType

_READ = tuple(sorted(READ_ONLY_TOOLS))
_WRITE = _READ + tuple(sorted(WRITING_TOOLS))

EXPLORER = AgentType(
    name="explorer",
    description="Finds and reads the code that matters to a question.",
    instructions=(
        "You explore a repository to answer a focused question. Read before concluding; cite "
        "evidence as path:line. Report what you found and what you could not confirm."
    ),
    tools=_READ,
)
REVIEWER = AgentType(
    name="reviewer",
    description="Checks code or claims for correctness and risk.",
    instructions=(
        "You review code and claims about it. Verify each point against the source; separate "
        "confirmed problems from suspicions; give path:line evidence and a severity for each."
    ),
    tools=_READ,
)
ADVISOR = AgentType(
    name="advisor",
    description="Weighs findings and writes the recommendation.",
    instructions=(
        "You weigh findings and options and write a clear recommendation with its trade-offs. "
        "Be concise; prefer the lowest-risk option that solves the problem."
    ),
    tools=_READ,
)
IMPLEMENTER = AgentType(
    name="implementer",
    description="Changes code in its own worktree and commits the result.",
    instructions=(
        "You change code in your own git worktree. Make the smallest change that does the job, "
        "keep the style of the surrounding code, run the relevant checks when you can, and "
        "commit your work with a clear message before you finish."
    ),
    tools=_WRITE,
)


def builtin_agent_types() -> dict[str, AgentType]:
    return {t.name: t for t in (EXPLORER, REVIEWER, ADVISOR, IMPLEMENTER)}


class AgentTypeError(ValueError):
    """A declared agent type is invalid; the message names the type and the fix."""


_TYPE_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")
_TYPE_FIELDS = frozenset({"instructions", "tools", "model", "provider", "effort", "description"})


def _parse_type(
    name: str, raw: Mapping[str, Any] | AgentType, allowed: frozenset[str], source: str
) -> AgentType:
    if isinstance(raw, AgentType):
        raw = {
            "instructions": raw.instructions,
            "tools": list(raw.tools),
            "model": raw.model,
            "provider": raw.provider,
            "effort": raw.effort,
            "description": raw.description,
        }
    where = f"agent type {name!r} in {source}"
    if not _TYPE_NAME.match(name):
        raise AgentTypeError(
            f"{where}: the name must match [a-z][a-z0-9_-]* (at most 40 characters)"
        )
    if not isinstance(raw, Mapping):
        raise AgentTypeError(f"{where}: must be a mapping with instructions and tools")
    unknown_keys = sorted(set(raw) - _TYPE_FIELDS)
    if unknown_keys:
        raise AgentTypeError(
            f"{where}: unknown field(s) {', '.join(unknown_keys)}; allowed: "
            + ", ".join(sorted(_TYPE_FIELDS))
        )
    instructions = raw.get("instructions")
    if not isinstance(instructions, str) or not instructions.strip():
        raise AgentTypeError(f"{where}: `instructions` must be a non-empty string")
    tools = raw.get("tools", [])
    if not isinstance(tools, list | tuple) or not all(isinstance(t, str) for t in tools):
        raise AgentTypeError(f"{where}: `tools` must be a list of tool names")
    unknown = sorted(set(tools) - ALL_TOOLS)
    if unknown:
        raise AgentTypeError(
            f"{where}: unknown tool(s) {', '.join(unknown)}; known tools: "
            + ", ".join(sorted(ALL_TOOLS))
        )
    denied = sorted(set(tools) - allowed)
    if denied:
        raise AgentTypeError(
            f"{where}: tool(s) {', '.join(denied)} are not allowed here; the operator allows: "
            + (", ".join(sorted(allowed)) or "none")
        )
    effort = raw.get("effort")
    if effort is not None and effort not in EFFORTS:
        raise AgentTypeError(f"{where}: effort must be one of {', '.join(EFFORTS)}")
    values = {k: raw.get(k) for k in ("model", "provider", "description")}
    for key, value in values.items():
        if value is not None and not isinstance(value, str):
            raise AgentTypeError(f"{where}: `{key}` must be a string")
    if values["provider"] and not values["model"]:
        raise AgentTypeError(f"{where}: a provider needs a model")
    return AgentType(
        name=name,
        instructions=instructions.strip(),
        tools=tuple(dict.fromkeys(tools)),
        model=values["model"],
        provider=values["provider"],
        effort=effort,
        description=values["description"] or "",
    )


def resolve_agent_types(
    settings_types: Mapping[str, Mapping[str, Any] | AgentType] | None,
    repo_types: Mapping[str, Mapping[str, Any] | AgentType] | None,
    *,
    repo_allowed_tools: frozenset[str] | None = None,
    repo_models: frozenset[str] = frozenset(),
) -> dict[str, AgentType]:
    """The built-in presets, then the operator's types (from settings), then the repository's.

    The operator may define or redefine any type with any known tool and model. A repository
    may add types but not redefine an existing one, may only use `repo_allowed_tools` (by
    default the read-only tools), so it cannot grant a tool the operator's settings do not
    allow, and may only name a model in `repo_models` (none by default), never a provider:
    a model an operator type names comes with that type's provider.
    Raises AgentTypeError with a message naming the type and the fix.
    """
    types = builtin_agent_types()
    for name, raw in (settings_types or {}).items():
        types[name] = _parse_type(name, raw, ALL_TOOLS, "the settings (BOT_AGENT_TYPES)")
    providers = {t.model: t.provider for t in types.values() if t.model and t.provider}
    allowed = READ_ONLY_TOOLS if repo_allowed_tools is None else repo_allowed_tools & ALL_TOOLS
    for name, raw in (repo_types or {}).items():
        if name in types:
            raise AgentTypeError(
                f"agent type {name!r} in .github/bot.yml: a repository cannot redefine an "
                "existing agent type; choose another name"
            )
        parsed = _parse_type(name, raw, allowed, ".github/bot.yml")
        if parsed.provider is not None:
            raise AgentTypeError(
                f"agent type {name!r} in .github/bot.yml: a repository cannot choose a provider"
            )
        if parsed.model is not None and parsed.model not in repo_models:
            raise AgentTypeError(
                f"agent type {name!r} in .github/bot.yml: model {parsed.model!r} is not one "
                "the operator configured; leave `model` out or name one of: "
                + (", ".join(sorted(repo_models)) or "none")
            )
        types[name] = replace(parsed, provider=providers.get(parsed.model or ""))
    return types


def repo_allowed_tools(raw: str | None) -> frozenset[str]:
    """The operator's allow-list for repository-declared types (BOT_REPO_AGENT_TOOLS, comma
    separated); unset means the read-only tools. Unknown names raise AgentTypeError."""
    if raw is None or not raw.strip():
        return READ_ONLY_TOOLS
    names = frozenset(part.strip() for part in raw.split(",") if part.strip())
    unknown = sorted(names - ALL_TOOLS)
    if unknown:
        raise AgentTypeError(
            f"BOT_REPO_AGENT_TOOLS names unknown tool(s) {', '.join(unknown)}; known tools: "
            + ", ".join(sorted(ALL_TOOLS))
        )
    return names
