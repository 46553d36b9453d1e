"""The interaction policy: precedence, invalid modes, and what each mode says."""

from __future__ import annotations

import pytest

from policies.interaction import (
    ASK_CLARIFICATION_TOOL_NAME,
    RunInteractionMode,
    RunInteractionPolicy,
    resolve_run_interaction_policy,
)

M = RunInteractionMode


@pytest.mark.parametrize(
    ("config", "mode"),
    [
        pytest.param(None, M.INTERACTIVE, id="none"),
        pytest.param({}, M.INTERACTIVE, id="empty"),
        pytest.param({"configurable": {"channel_name": "github"}}, M.WEBHOOK, id="github"),
        pytest.param({"context": {"channel_name": "slack"}}, M.INTERACTIVE, id="other-channel"),
        pytest.param({"context": {"non_interactive": True}}, M.SCHEDULED, id="non-interactive"),
        pytest.param({"context": {"disable_clarification": True}}, M.AUTONOMOUS, id="disable"),
        pytest.param(
            {"context": {"non_interactive": True, "channel_name": "github"}},
            M.SCHEDULED,
            id="non-interactive-beats-github",
        ),
        pytest.param(
            {"context": {"channel_name": "github", "disable_clarification": True}},
            M.WEBHOOK,
            id="github-beats-disable",
        ),
        pytest.param(
            {"context": {"interaction_mode": "autonomous", "channel_name": "github"}},
            M.AUTONOMOUS,
            id="explicit-wins",
        ),
        pytest.param(
            {
                "configurable": {"interaction_mode": "scheduled"},
                "context": {"interaction_mode": "webhook"},
            },
            M.WEBHOOK,
            id="context-over-configurable",
        ),
        pytest.param(
            {"configurable": {"channel_name": "github"}, "context": {"channel_name": "cli"}},
            M.INTERACTIVE,
            id="context-overrides-channel",
        ),
        pytest.param({"configurable": "not a mapping", "context": 7}, M.INTERACTIVE, id="junk"),
    ],
)
def test_precedence(config: dict[str, object] | None, mode: RunInteractionMode) -> None:
    assert resolve_run_interaction_policy(config).mode is mode


@pytest.mark.parametrize("bad", ["chatty", "", "WEBHOOK", 3])
def test_invalid_mode_fails_closed(bad: object) -> None:
    with pytest.raises(ValueError) as err:
        resolve_run_interaction_policy({"context": {"interaction_mode": bad}})
    message = str(err.value)
    assert "Invalid interaction_mode" in message
    for mode in RunInteractionMode:
        assert mode.value in message


def test_only_interactive_offers_clarification() -> None:
    for mode in RunInteractionMode:
        policy = RunInteractionPolicy(mode)
        if mode is M.INTERACTIVE:
            assert policy.allows_clarification
            assert policy.disabled_tool_names == frozenset()
        else:
            assert not policy.allows_clarification
            assert policy.disabled_tool_names == frozenset({ASK_CLARIFICATION_TOOL_NAME})


def test_webhook_fragments_name_their_sources_and_blocked() -> None:
    text = RunInteractionPolicy(M.WEBHOOK).clarification_system
    assert "the issue, pull request, repository, event context, and existing configuration" in text
    assert "BLOCKED" in text
    assert "ask_clarification" not in text


@pytest.mark.parametrize("mode", [M.AUTONOMOUS, M.SCHEDULED])
def test_autonomous_fragments(mode: RunInteractionMode) -> None:
    policy = RunInteractionPolicy(mode)
    assert "the available run context and existing configuration" in policy.clarification_system
    assert "pull request" not in policy.clarification_system
    assert "BLOCKED" in policy.clarification_reminder
    assert "No human" in policy.thinking_guidance or "no human" in policy.thinking_guidance.lower()


def test_interactive_fragments() -> None:
    policy = RunInteractionPolicy.interactive()
    assert policy.mode is M.INTERACTIVE
    assert ASK_CLARIFICATION_TOOL_NAME in policy.clarification_system
    assert "BLOCKED" not in policy.clarification_system
    assert "clarif" in policy.clarification_reminder.lower()
    assert "ask for clarification" in policy.thinking_guidance


def test_policy_is_frozen() -> None:
    policy = RunInteractionPolicy(M.WEBHOOK)
    with pytest.raises(AttributeError):
        policy.mode = M.INTERACTIVE  # type: ignore[misc]
