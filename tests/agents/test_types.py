"""Agent types: presets, operator-declared and repository-declared types."""

from __future__ import annotations

from typing import Any

import pytest

from bot.agents.types import (
    AgentTypeError,
    builtin_agent_types,
    repo_allowed_tools,
    resolve_agent_types,
)
from bot.engine.types import READ_ONLY_TOOLS, WRITING_TOOLS


def test_presets() -> None:
    types = builtin_agent_types()
    assert sorted(types) == ["advisor", "explorer", "implementer", "reviewer"]
    for name in ("explorer", "reviewer", "advisor"):
        assert types[name].read_only and not types[name].requires_worktree
    assert types["implementer"].requires_worktree
    assert set(types["implementer"].tools) == READ_ONLY_TOOLS | WRITING_TOOLS


def test_operator_and_repository_types_are_added() -> None:
    types = resolve_agent_types(
        {"tester": {"instructions": "Run the tests.", "tools": ["read_file", "run_command"]}},
        {"doc-reader": {"instructions": "Read docs.", "tools": ["read_file"], "effort": "low"}},
    )
    assert types["tester"].tools == ("read_file", "run_command")
    assert types["tester"].requires_worktree
    assert types["doc-reader"].effort == "low" and types["doc-reader"].read_only
    assert "explorer" in types


def test_operator_may_redefine_a_preset() -> None:
    types = resolve_agent_types(
        {"reviewer": {"instructions": "Be strict.", "tools": ["read_file"], "model": "big"}}, None
    )
    assert types["reviewer"].model == "big" and types["reviewer"].tools == ("read_file",)


@pytest.mark.parametrize(
    ("settings", "repo", "allowed", "message"),
    [
        pytest.param(
            None,
            {"x": {"instructions": "hi", "tools": ["write_file"]}},
            None,
            "tool(s) write_file are not allowed here",
            id="repo-cannot-grant-writing",
        ),
        pytest.param(
            None,
            {"x": {"instructions": "hi", "tools": ["run_command"]}},
            frozenset({"read_file"}),
            "the operator allows: read_file",
            id="repo-outside-allow-list",
        ),
        pytest.param(
            {"x": {"instructions": "hi", "tools": ["rm_rf"]}},
            None,
            None,
            "unknown tool(s) rm_rf",
            id="unknown-tool",
        ),
        pytest.param(
            None,
            {"explorer": {"instructions": "hi", "tools": []}},
            None,
            "cannot redefine an existing agent type",
            id="repo-shadows-preset",
        ),
        pytest.param(
            None, {"x": {"tools": ["read_file"]}}, None, "`instructions` must be", id="no-instr"
        ),
        pytest.param(
            None,
            {"x": {"instructions": "hi", "effort": "huge"}},
            None,
            "effort must be one of",
            id="bad-effort",
        ),
        pytest.param(
            None, {"Bad Name": {"instructions": "hi"}}, None, "the name must match", id="bad-name"
        ),
        pytest.param(
            None,
            {"x": {"instructions": "hi", "shell": True}},
            None,
            "unknown field(s) shell",
            id="unknown-field",
        ),
        pytest.param(
            None,
            {"x": {"instructions": "hi", "provider": "openai"}},
            None,
            "a provider needs a model",
            id="provider-without-model",
        ),
    ],
)
def test_invalid_types_are_rejected_clearly(
    settings: Any, repo: Any, allowed: frozenset[str] | None, message: str
) -> None:
    with pytest.raises(AgentTypeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolve_agent_types(settings, repo, repo_allowed_tools=allowed)


def test_operator_can_allow_writing_tools_for_repositories() -> None:
    allowed = repo_allowed_tools("read_file, write_file,edit_file")
    types = resolve_agent_types(
        None,
        {"fixer": {"instructions": "Fix.", "tools": ["read_file", "write_file"]}},
        repo_allowed_tools=allowed,
    )
    assert types["fixer"].requires_worktree
    assert repo_allowed_tools(None) == READ_ONLY_TOOLS
    with pytest.raises(AgentTypeError, match="unknown tool"):
        repo_allowed_tools("read_file,sudo")


def test_a_repository_type_names_only_a_model_the_operator_configured() -> None:
    operator = {
        "big": {"instructions": "x", "tools": [], "model": "m-big", "provider": "anthropic"}
    }
    repo = {"sec": {"instructions": "Look.", "tools": ["read_file"], "model": "m-big"}}
    with pytest.raises(AgentTypeError, match="model 'm-big' is not one the operator configured"):
        resolve_agent_types(operator, repo)
    types = resolve_agent_types(operator, repo, repo_models=frozenset({"m-big"}))
    # The operator's model comes with the operator's provider; the repository names neither.
    assert (types["sec"].model, types["sec"].provider) == ("m-big", "anthropic")
    chose = {"sec": {"instructions": "Look.", "model": "m-big", "provider": "openai"}}
    with pytest.raises(AgentTypeError, match="a repository cannot choose a provider"):
        resolve_agent_types(operator, chose, repo_models=frozenset({"m-big"}))
