"""Model endpoints in their own dialects, each against a fake that speaks it as strictly as the
real service: Azure OpenAI (deployment URL, `api-version`, `api-key`), OpenAI's Responses API
(`input` items, `function_call` / `function_call_output`, encrypted reasoning replayed) and
Anthropic's extended thinking (signed thinking blocks replayed on later tool-use turns). The runtime is built from
settings the way the app builds it (`build_runner`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bot.agents.anthropic_model import AnthropicChatModel
from bot.agents.azure_model import AzureChatModel
from bot.agents.models import ModelError
from bot.agents.openai_model import OpenAIChatModel
from bot.agents.responses_model import OpenAIResponsesModel
from bot.agents.runtime import AgentRuntime, build_runner
from bot.agents.sandbox import SandboxStatus
from bot.agents.types import EXPLORER
from bot.engine.types import RunnerResult, Workspace
from bot.settings import Settings, SettingsError, load_settings
from tests.agents.conftest import invocation, make_repo
from tests.fakes.anthropic_llm import AnthropicReply, FakeAnthropic, call, reply, signature_of
from tests.fakes.llm import FakeLLM, Reply, UsageSpec, text, tool_call
from tests.fakes.responses_llm import FakeResponses

OFF = SandboxStatus(False, "off")


def settings_of(env: Mapping[str, str]) -> Settings:
    return load_settings(environ=dict(env), dotenv=None)


# -- Azure OpenAI ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_azure_deployment_url_gets_api_version_and_api_key() -> None:
    fake = FakeLLM([tool_call("list_files", {"path": "."}), text("done")], api_key="az-key")
    settings = settings_of(
        {
            "BOT_MODEL": "gpt-4o",
            "BOT_LLM_PROVIDER": "azure",
            "BOT_LLM_BASE_URL": fake.azure_url("prod-gpt4o"),
            "BOT_LLM_API_KEY": "az-key",
            "BOT_LLM_API_VERSION": "2024-06-01",
        }
    )
    async with fake.client() as client:
        runner = build_runner(settings, http_client=client, sandbox=OFF)
        assert isinstance(runner, AgentRuntime) and sorted(runner.providers) == ["azure"]
        result = await runner.run(invocation())
    assert result.error is None and result.output == "done"
    assert len(fake.bodies) == 2
    for recorded in fake.requests:
        assert recorded.path == "/openai/deployments/prod-gpt4o/chat/completions"
        assert recorded.headers["api-key"] == "az-key"
        assert "authorization" not in recorded.headers
    assert fake.bodies[1]["messages"][-1]["role"] == "tool"


@pytest.mark.anyio
async def test_azure_resource_url_names_the_deployment_by_the_model() -> None:
    fake = FakeLLM([text("hi")], api_key="az-key")
    settings = settings_of(
        {
            "BOT_MODEL": "team-deployment",
            "BOT_LLM_PROVIDER": "azure",
            "BOT_LLM_BASE_URL": fake.base_url.removesuffix("/v1"),
            "BOT_LLM_API_KEY": "az-key",
        }
    )
    async with fake.client() as client:
        runner = build_runner(settings, http_client=client, sandbox=OFF)
        result = await runner.run(invocation())
    assert result.error is None and result.output == "hi"
    assert fake.requests[0].path == "/openai/deployments/team-deployment/chat/completions"


@pytest.mark.anyio
async def test_the_fake_refuses_what_azure_refuses() -> None:
    fake = FakeLLM([text("never")], api_key="az-key")
    url = fake.azure_url("d1")
    async with fake.client() as client:
        bearer = OpenAIChatModel(url, "az-key", http_client=client)
        with pytest.raises(ModelError) as refused:
            await bearer.complete([{"role": "user", "content": "x"}], (), model="m")
        assert refused.value.status == 401
        unversioned = AzureChatModel(url, "az-key", api_version="", http_client=client)
        with pytest.raises(ModelError) as missing:
            await unversioned.complete([{"role": "user", "content": "x"}], (), model="m")
        assert missing.value.status == 404
    assert fake.remaining == 1


# -- Anthropic extended thinking ------------------------------------------------------------------


def anthropic_env(fake: FakeAnthropic, **more: str) -> dict[str, str]:
    return {
        "BOT_MODEL": "claude-x",
        "BOT_LLM_PROVIDER": "anthropic",
        "BOT_LLM_BASE_URL": fake.base_url,
        "BOT_LLM_API_KEY": fake.api_key,
        **more,
    }


async def run_anthropic(
    script: list[AnthropicReply], env: Mapping[str, str], effort: str | None
) -> tuple[FakeAnthropic, RunnerResult]:
    fake = FakeAnthropic(script)
    settings = settings_of({**anthropic_env(fake), **env})
    async with fake.client() as client:
        runner = build_runner(settings, http_client=client, sandbox=OFF)
        result = await runner.run(invocation(agent_type=replace(EXPLORER, effort=effort)))
    return fake, result


def first_blocks(body: dict[str, Any]) -> list[str]:
    """The type of the first block of each assistant turn of a request."""
    return [m["content"][0]["type"] for m in body["messages"] if m["role"] == "assistant"]


@pytest.mark.anyio
@pytest.mark.parametrize("stream", ["true", "false"], ids=["streamed", "whole"])
async def test_signed_thinking_blocks_round_trip_through_tool_use(stream: str) -> None:
    script = [
        reply(thinking="List the tree first.", calls=[call("list_files", {"path": "."})]),
        reply("Now read it.", [call("read_file", {"path": "README.md"})], thinking="Read it."),
        reply("done", thinking="Enough."),
    ]
    env = {"BOT_LLM_REASONING_EFFORT": "true", "BOT_LLM_STREAM": stream}
    fake, result = await run_anthropic(script, env, "medium")
    assert result.error is None and result.output == "done"
    assert [b["thinking"] for b in fake.bodies] == [{"type": "enabled", "budget_tokens": 8192}] * 3
    assert first_blocks(fake.bodies[1]) == ["thinking"]
    assert first_blocks(fake.bodies[2]) == ["thinking", "thinking"]
    replayed = fake.bodies[2]["messages"][3]["content"]
    assert [b["type"] for b in replayed] == ["thinking", "text", "tool_use"]
    assert replayed[0] == {
        "type": "thinking",
        "thinking": "Read it.",
        "signature": signature_of("Read it."),
    }


@pytest.mark.anyio
async def test_redacted_thinking_is_replayed_as_it_came() -> None:
    script = [
        reply(thinking="secret", redacted=True, calls=[call("list_files", {"path": "."})]),
        reply("done"),
    ]
    fake, result = await run_anthropic(script, {"BOT_LLM_REASONING_EFFORT": "true"}, "high")
    assert result.error is None and result.output == "done"
    (replayed,) = [m for m in fake.bodies[1]["messages"] if m["role"] == "assistant"]
    assert replayed["content"][0]["type"] == "redacted_thinking"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("env", "effort"),
    [
        pytest.param({}, "high", id="setting-off"),
        pytest.param({"BOT_LLM_REASONING_EFFORT": "true"}, None, id="no-effort"),
        pytest.param({"BOT_LLM_REASONING_EFFORT": "true"}, "off", id="effort-off"),
    ],
)
async def test_no_thinking_unless_asked(env: dict[str, str], effort: str | None) -> None:
    script = [reply(thinking="x", calls=[call("list_files", {"path": "."})]), reply("done")]
    fake, result = await run_anthropic(script, env, effort)
    assert result.error is None
    assert all("thinking" not in body for body in fake.bodies)
    assert first_blocks(fake.bodies[1]) == ["tool_use"]


@pytest.mark.anyio
async def test_the_largest_effort_keeps_the_budget_under_max_tokens() -> None:
    script = [reply("done", thinking="hm")]
    fake, result = await run_anthropic(script, {"BOT_LLM_REASONING_EFFORT": "true"}, "max")
    assert result.error is None
    budget = fake.bodies[0]["thinking"]["budget_tokens"]
    assert 1024 <= budget < fake.bodies[0]["max_tokens"]


TOOL_USE_HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": "look"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "toolu_1",
                "type": "function",
                "function": {"name": "list_files", "arguments": "{}"},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "toolu_1", "content": "README.md"},
]


@pytest.mark.anyio
async def test_the_fake_refuses_tool_use_after_thinking_without_the_signed_block() -> None:
    fake = FakeAnthropic([reply("never")])
    async with fake.client() as client:
        model = AnthropicChatModel(fake.base_url, fake.api_key, http_client=client, thinking=True)
        with pytest.raises(ModelError) as refused:
            await model.complete(TOOL_USE_HISTORY, (), model="claude-x", effort="low")
        forged = [
            TOOL_USE_HISTORY[0],
            {
                **TOOL_USE_HISTORY[1],
                "anthropic_thinking": [
                    {"type": "thinking", "thinking": "edited", "signature": signature_of("x")}
                ],
            },
            TOOL_USE_HISTORY[2],
        ]
        with pytest.raises(ModelError) as tampered:
            await model.complete(forged, (), model="claude-x", effort="low")
    assert refused.value.status == 400
    assert "Expected `thinking` or `redacted_thinking`" in refused.value.message
    assert tampered.value.status == 400 and "Invalid `signature`" in tampered.value.message
    assert fake.remaining == 1


# -- the OpenAI Responses API ---------------------------------------------------------------------


async def run_responses(
    script: list[Reply],
    env: Mapping[str, str],
    effort: str | None = None,
    workspace: Workspace | None = None,
) -> tuple[FakeResponses, RunnerResult]:
    fake = FakeResponses(script, api_key="sk-r")
    settings = settings_of(
        {
            "BOT_MODEL": "o4-mini",
            "BOT_LLM_BASE_URL": fake.base_url,
            "BOT_LLM_API_KEY": "sk-r",
            "BOT_LLM_API": "responses",
            **env,
        }
    )
    async with fake.client() as client:
        runner = build_runner(settings, http_client=client, sandbox=OFF)
        agent = replace(EXPLORER, effort=effort)
        result = await runner.run(invocation(agent_type=agent, workspace=workspace))
    return fake, result


@pytest.mark.anyio
@pytest.mark.parametrize("stream", ["true", "false"], ids=["streamed", "whole"])
async def test_responses_api_runs_a_tool_loop_in_input_items(stream: str, tmp_path: Path) -> None:
    root, sha = make_repo(tmp_path / "repo")
    script = [
        Reply(
            content="Looking.",
            calls=tool_call("list_files", {"path": "."}, id="call_a").calls,
            reasoning="need the tree",
            usage=UsageSpec(prompt=100, completion=20, cached=40),
        ),
        text("done", usage=UsageSpec(prompt=150, completion=5)),
    ]
    workspace = Workspace(git_dir=root / ".git", commit=sha)
    env = {"BOT_LLM_STREAM": stream, "BOT_LLM_REASONING_EFFORT": "true"}
    fake, result = await run_responses(script, env, "medium", workspace)
    assert result.error is None and result.output == "done"
    first, second = fake.bodies
    assert "messages" not in first and first["store"] is False
    assert {t["name"] for t in first["tools"]} >= {"list_files", "read_file"}
    kinds = [item.get("type", item.get("role")) for item in second["input"]]
    assert kinds[-4:] == ["reasoning", "assistant", "function_call", "function_call_output"]
    call_item, output_item = second["input"][-2:]
    assert call_item["call_id"] == output_item["call_id"] == "call_a"
    assert call_item["name"] == "list_files" and "README" in output_item["output"]
    assert (result.usage.input, result.usage.output, result.usage.cache_read) == (210, 25, 40)


@pytest.mark.anyio
async def test_responses_api_sends_effort_as_reasoning() -> None:
    fake, result = await run_responses(
        [text("a")], {"BOT_LLM_REASONING_EFFORT": "true"}, effort="xhigh"
    )
    assert result.error is None
    assert fake.bodies[0]["reasoning"] == {"effort": "high"}
    assert fake.bodies[0]["include"] == ["reasoning.encrypted_content"]


@pytest.mark.anyio
async def test_responses_api_asks_no_reasoning_of_a_model_not_said_to_reason() -> None:
    script = [
        Reply(calls=tool_call("list_files", {"path": "."}).calls, reasoning="hidden"),
        text("done"),
    ]
    fake, result = await run_responses(script, {}, "high")
    assert result.error is None and result.output == "done"
    assert all("include" not in body and "reasoning" not in body for body in fake.bodies)
    assert all(item.get("type") != "reasoning" for item in fake.bodies[1]["input"])


@pytest.mark.anyio
async def test_the_fake_refuses_chat_format_at_the_responses_endpoint() -> None:
    fake = FakeResponses([text("never")], api_key="sk-r")
    history: list[dict[str, Any]] = [*TOOL_USE_HISTORY]
    async with fake.client() as client:
        chat = OpenAIChatModel(fake.base_url, "sk-r", http_client=client)
        chat.url = fake.base_url + "/responses"
        with pytest.raises(ModelError) as as_chat:
            await chat.complete(history, (), model="o4-mini")
        responses = OpenAIResponsesModel(fake.base_url, "sk-r", http_client=client)
        unanswered = history[:2]
        with pytest.raises(ModelError) as no_output:
            await responses.complete(unanswered, (), model="o4-mini")
        forged = [
            history[0],
            {
                **history[1],
                "openai_reasoning": [
                    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "x"}
                ],
            },
            history[2],
        ]
        with pytest.raises(ModelError) as bad_reasoning:
            await responses.complete(forged, (), model="o4-mini")
    assert as_chat.value.status == 400 and "Unknown parameter: 'messages'" in as_chat.value.message
    assert no_output.value.status == 400 and "No tool output found" in no_output.value.message
    assert (
        bad_reasoning.value.status == 400 and "could not be verified" in bad_reasoning.value.message
    )
    assert fake.remaining == 1


@pytest.mark.anyio
async def test_an_unknown_llm_api_is_refused_at_start() -> None:
    with pytest.raises(SettingsError, match="BOT_LLM_API"):
        settings_of({"BOT_LLM_API": "completions"})
