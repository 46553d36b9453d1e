"""The agent loop against the fake chat-completions server, in-process."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from bot.agents.openai_model import OpenAIChatModel
from bot.agents.runtime import NO_MODEL, AgentRuntime, Limits, build_runner
from bot.agents.sandbox import SandboxStatus
from bot.agents.types import IMPLEMENTER, REVIEWER
from bot.engine.types import Workspace
from bot.settings import Settings
from policies.interaction import (
    ASK_CLARIFICATION_TOOL_NAME,
    NO_HUMAN_TOOL_MESSAGE,
    RunInteractionPolicy,
)
from tests.agents.conftest import FAST, RuntimeFactory, invocation, make_repo
from tests.fakes.llm import FakeLLM, Reply, UsageSpec, error, hang, text, tool_call, tool_calls

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["ok", "problem"]},
        "findings": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["verdict", "findings"],
    "additionalProperties": False,
}


def tool_messages(fake: FakeLLM, index: int = -1) -> list[str]:
    return [str(m["content"]) for m in fake.messages(index) if m["role"] == "tool"]


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "plain"])
async def test_reads_files_and_answers(
    fake: FakeLLM, runtime_for: RuntimeFactory, read_workspace: Workspace, stream: bool
) -> None:
    fake.push(
        tool_call("read_file", {"path": "src/app.py"}),
        tool_call("grep", {"pattern": "greet"}),
        text("greet is defined in src/app.py:1"),
    )
    result = await runtime_for(stream=stream).run(invocation(workspace=read_workspace))
    assert result.error is None
    assert result.output == "greet is defined in src/app.py:1"
    assert "def greet(name):" in tool_messages(fake)[0]
    assert "src/app.py:1:def greet(name):" in tool_messages(fake)[1]
    assert fake.bodies[0]["stream"] is stream if stream else "stream" not in fake.bodies[0]
    assert fake.messages(0)[1] == {"role": "user", "content": "Look at the code."}
    assert [e["role"] for e in result.transcript] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]


@pytest.mark.anyio
async def test_system_prompt_has_instructions_policy_and_tool_guidance(
    fake: FakeLLM, runtime_for: RuntimeFactory, read_workspace: Workspace
) -> None:
    fake.push(tool_call("structured_output", {"verdict": "ok", "findings": []}))
    call = invocation(agent_type=REVIEWER, workspace=read_workspace, schema=SCHEMA)
    await runtime_for().run(call)
    system = fake.system_prompt(0)
    assert system.startswith(f"Your role: {REVIEWER.description}\n\n{REVIEWER.instructions}")
    assert call.interaction.clarification_system in system
    assert call.interaction.thinking_guidance in system
    assert call.interaction.clarification_reminder in system
    assert "<tools>" in system
    assert "call `structured_output` exactly once" in system


@pytest.mark.anyio
async def test_structured_output_validated_and_returned(
    fake: FakeLLM, runtime_for: RuntimeFactory, read_workspace: Workspace
) -> None:
    fake.push(
        tool_call("structured_output", {"verdict": "maybe", "findings": []}),
        tool_call("structured_output", {"verdict": "problem", "findings": ["src/app.py:2"]}),
    )
    result = await runtime_for().run(
        invocation(agent_type=REVIEWER, workspace=read_workspace, schema=SCHEMA)
    )
    assert result.error is None
    assert result.structured == {"verdict": "problem", "findings": ["src/app.py:2"]}
    first_error = tool_messages(fake)[0]
    assert "does not match the schema at verdict" in first_error
    assert "structured_output" in fake.tool_names(0)


@pytest.mark.anyio
async def test_non_object_schema_is_wrapped(
    fake: FakeLLM, runtime_for: RuntimeFactory, read_workspace: Workspace
) -> None:
    fake.push(tool_call("structured_output", {"result": ["a", "b"]}))
    schema = {"type": "array", "items": {"type": "string"}}
    result = await runtime_for().run(invocation(workspace=read_workspace, schema=schema))
    assert result.error is None
    assert result.structured == ["a", "b"]
    offered = fake.bodies[0]["tools"][-1]["function"]
    assert offered["parameters"]["properties"]["result"] == schema


@pytest.mark.anyio
async def test_finishing_without_structured_output_fails(
    fake: FakeLLM, runtime_for: RuntimeFactory, read_workspace: Workspace
) -> None:
    fake.push(text("all fine"))
    result = await runtime_for().run(invocation(workspace=read_workspace, schema=SCHEMA))
    assert result.error == "finished without calling structured_output"
    assert result.output == "all fine"


@pytest.mark.anyio
async def test_schema_the_model_keeps_violating_ends_with_error(
    fake: FakeLLM, runtime_for: RuntimeFactory, read_workspace: Workspace
) -> None:
    fake.respond_with(lambda body: tool_call("structured_output", {"verdict": 1}))
    result = await runtime_for().run(invocation(workspace=read_workspace, schema=SCHEMA))
    assert result.error is not None
    assert "invalid tool calls 4 times in a row" in result.error
    assert len(fake.bodies) == FAST.invalid_retries + 1


@pytest.mark.anyio
async def test_invalid_tool_json_gets_bounded_retries_then_clear_error(
    fake: FakeLLM, runtime_for: RuntimeFactory, read_workspace: Workspace
) -> None:
    fake.respond_with(lambda body: tool_call("read_file", '{"path": "README.md"'))
    result = await runtime_for().run(invocation(workspace=read_workspace))
    assert result.error is not None
    assert "invalid tool calls" in result.error and "not valid JSON" in result.error
    assert len(fake.bodies) == FAST.invalid_retries + 1
    assert "not valid JSON" in tool_messages(fake)[0]


@pytest.mark.anyio
async def test_invalid_json_once_then_recovers(
    fake: FakeLLM, runtime_for: RuntimeFactory, read_workspace: Workspace
) -> None:
    fake.push(tool_call("read_file", "{oops"), tool_call("read_file", {"path": "README.md"}))
    fake.push(text("ok"))
    result = await runtime_for().run(invocation(workspace=read_workspace))
    assert result.error is None
    assert "# Demo" in tool_messages(fake)[-1]


@pytest.mark.anyio
async def test_watchdog_trips_when_the_model_never_answers(
    fake: FakeLLM, runtime_for: RuntimeFactory
) -> None:
    fake.push(hang())
    limits = Limits(first_response_timeout=0.3, backoff=0.0)
    with anyio.fail_after(10):
        result = await runtime_for(limits=limits).run(invocation())
    assert result.error == "the model sent no response within 0.3 s"
    assert len(fake.bodies) == 1  # not retried


@pytest.mark.anyio
async def test_server_errors_retried_then_fail_clearly(
    fake: FakeLLM, runtime_for: RuntimeFactory
) -> None:
    fake.push(error(500, "boom"), error(503, "still down"), error(502, "nope"), text("late"))
    result = await runtime_for().run(invocation())
    assert result.error == "model endpoint answered HTTP 502: nope (after 3 attempts)"
    assert len(fake.bodies) == 3


@pytest.mark.anyio
async def test_rate_limit_is_retried(fake: FakeLLM, runtime_for: RuntimeFactory) -> None:
    fake.push(error(429, "slow down", headers={"retry-after": "0"}), text("fine"))
    result = await runtime_for().run(invocation())
    assert result.error is None and result.output == "fine"


@pytest.mark.anyio
async def test_client_error_is_not_retried(fake: FakeLLM, runtime_for: RuntimeFactory) -> None:
    fake.push(error(400, "model `x` does not exist"), text("never"))
    result = await runtime_for().run(invocation())
    assert result.error == "model endpoint answered HTTP 400: model `x` does not exist"
    assert fake.remaining == 1


@pytest.mark.anyio
async def test_clarification_tool_absent_in_webhook_mode_and_answered_if_forged(
    fake: FakeLLM, runtime_for: RuntimeFactory, read_workspace: Workspace
) -> None:
    fake.push(tool_call(ASK_CLARIFICATION_TOOL_NAME, {"question": "Which env?"}), text("done"))
    result = await runtime_for().run(invocation(workspace=read_workspace))
    assert ASK_CLARIFICATION_TOOL_NAME not in fake.tool_names(0)
    assert f"{ASK_CLARIFICATION_TOOL_NAME}(" not in fake.system_prompt(0)
    assert tool_messages(fake) == [NO_HUMAN_TOOL_MESSAGE]
    assert result.error is None and result.output == "done"


@pytest.mark.anyio
async def test_interactive_mode_offers_clarification(
    fake: FakeLLM, runtime_for: RuntimeFactory
) -> None:
    fake.push(tool_call(ASK_CLARIFICATION_TOOL_NAME, {"question": "Which env?"}))
    call = invocation(interaction=RunInteractionPolicy.interactive())
    result = await runtime_for().run(call)
    assert ASK_CLARIFICATION_TOOL_NAME in fake.tool_names(0)
    assert result.output == "Clarification needed: Which env?"


@pytest.mark.anyio
async def test_read_only_agent_gets_no_writing_tools_and_forged_call_is_refused(
    fake: FakeLLM, runtime_for: RuntimeFactory, read_workspace: Workspace, repo: Any
) -> None:
    fake.push(
        tool_call("write_file", {"path": "README.md", "content": "pwned"}),
        tool_call("run_command", {"command": "touch /tmp/x"}),
        text("gave up"),
    )
    result = await runtime_for(sandbox_ok=True).run(invocation(workspace=read_workspace))
    offered = fake.tool_names(0)
    assert sorted(offered) == ["git_diff", "git_log", "git_show", "grep", "list_files", "read_file"]
    assert tool_messages(fake)[0].startswith("error: there is no tool named `write_file`")
    assert "no tool named `run_command`" in tool_messages(fake)[1]
    root, _ = repo
    assert (root / "README.md").read_text().startswith("# Demo")
    assert result.output == "gave up"


@pytest.mark.anyio
async def test_implementer_refuses_to_run_without_worktree(
    fake: FakeLLM, runtime_for: RuntimeFactory, read_workspace: Workspace
) -> None:
    result = await runtime_for().run(invocation(agent_type=IMPLEMENTER, workspace=read_workspace))
    assert result.error is not None and "needs worktree isolation" in result.error
    assert fake.bodies == []


@pytest.mark.anyio
async def test_usage_counts_cached_tokens_and_cost(
    fake: FakeLLM, runtime_for: RuntimeFactory, read_workspace: Workspace
) -> None:
    fake.push(
        tool_call("list_files", {}, usage=UsageSpec(prompt=1000, completion=50, cached=400)),
        text("done", usage=UsageSpec(prompt=1200, completion=30, cached=1000)),
    )
    prices = {"fake-model": {"input": 2.0, "output": 10.0, "cache_read": 0.5}}
    result = await runtime_for(prices=prices).run(invocation(workspace=read_workspace))
    usage = result.usage
    assert (usage.input, usage.output, usage.cache_read) == (800, 80, 1400)
    assert usage.cost == pytest.approx((800 * 2.0 + 80 * 10.0 + 1400 * 0.5) / 1e6)


@pytest.mark.anyio
async def test_cost_unknown_without_price(fake: FakeLLM, runtime_for: RuntimeFactory) -> None:
    fake.push(text("done"))
    result = await runtime_for().run(invocation())
    assert result.usage.cost is None and result.usage.output > 0


@pytest.mark.anyio
async def test_max_turns_cap(
    fake: FakeLLM, runtime_for: RuntimeFactory, read_workspace: Workspace
) -> None:
    fake.respond_with(lambda body: tool_call("list_files", {}))
    limits = Limits(max_turns=3, backoff=0.0)
    result = await runtime_for(limits=limits).run(invocation(workspace=read_workspace))
    assert result.error == "stopped after 3 model turns without finishing"
    assert len(fake.bodies) == 3


@pytest.mark.anyio
async def test_output_is_capped(fake: FakeLLM, runtime_for: RuntimeFactory) -> None:
    fake.push(text("x" * 70_000))
    result = await runtime_for(limits=Limits(output_cap=1000)).run(invocation())
    assert result.output.startswith("x" * 1000)
    assert "[output truncated: 70000 bytes in all, first 1000 shown]" in result.output


@pytest.mark.anyio
async def test_transcript_is_bounded(
    fake: FakeLLM, runtime_for: RuntimeFactory, tmp_path: Path
) -> None:
    root, sha = make_repo(tmp_path / "big", {"big.txt": "line of text\n" * 3000})
    workspace = Workspace(git_dir=root / ".git", commit=sha)
    for _ in range(30):
        fake.push(tool_call("read_file", {"path": "big.txt"}))
    fake.push(text("end"))
    result = await runtime_for(limits=Limits(max_turns=40)).run(invocation(workspace=workspace))
    assert result.error is None
    assert len(json.dumps(result.transcript)) < 80_000  # 30 reads of ~24 KiB each went in
    assert [e["role"] for e in result.transcript[:2]] == ["system", "user"]
    assert result.transcript[2]["role"] == "note" and "older entries dropped" in str(
        result.transcript[2]["content"]
    )
    assert result.transcript[-1] == {"role": "assistant", "content": "end"}


@pytest.mark.anyio
async def test_several_tool_calls_in_one_turn(
    fake: FakeLLM, runtime_for: RuntimeFactory, read_workspace: Workspace
) -> None:
    fake.push(
        tool_calls(
            tool_call("read_file", {"path": "README.md"}),
            tool_call("read_file", {"path": "../etc/passwd"}),
        ),
        text("ok"),
    )
    result = await runtime_for().run(invocation(workspace=read_workspace))
    answers = tool_messages(fake)
    assert "# Demo" in answers[0]
    assert answers[1].startswith("error: paths with `..` are refused")
    ids = [m["tool_call_id"] for m in fake.messages() if m["role"] == "tool"]
    assert len(set(ids)) == 2
    assert result.error is None


@pytest.mark.anyio
async def test_tool_timeout_comes_back_as_tool_error(
    fake: FakeLLM,
    runtime_for: RuntimeFactory,
    read_workspace: Workspace,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bot.agents import tools

    async def slow(self: tools.Toolbox, args: dict[str, Any]) -> str:
        await anyio.sleep(30)
        return "never"

    monkeypatch.setattr(tools.Toolbox, "_tool_list_files", slow)
    fake.push(tool_call("list_files", {}), text("recovered"))
    limits = Limits(tool_timeout=0.2, backoff=0.0)
    with anyio.fail_after(10):
        result = await runtime_for(limits=limits).run(invocation(workspace=read_workspace))
    assert tool_messages(fake) == ["error: `list_files` timed out after 0.2 s and was stopped"]
    assert result.output == "recovered"


@pytest.mark.anyio
async def test_cancellation_is_honoured(fake: FakeLLM, runtime_for: RuntimeFactory) -> None:
    fake.push(hang())
    runtime = runtime_for(limits=Limits(first_response_timeout=60))
    with anyio.move_on_after(0.3) as scope:
        await runtime.run(invocation())
    assert scope.cancelled_caught


@pytest.mark.anyio
async def test_model_precedence(fake: FakeLLM, runtime_for: RuntimeFactory) -> None:
    fake.push(text("a"), text("b"), text("c"))
    runtime = runtime_for(role_models={"explorer": "role-model"})
    await runtime.run(invocation(model="explicit"))
    await runtime.run(invocation())
    await runtime.run(invocation(agent_type=REVIEWER))
    assert [b["model"] for b in fake.bodies] == ["explicit", "role-model", "fake-model"]


@pytest.mark.anyio
async def test_build_runner_without_model_explains_the_fix() -> None:
    runner = build_runner(Settings())
    result = await runner.run(invocation())
    assert result.error == NO_MODEL == "no model configured (set BOT_MODEL and BOT_LLM_BASE_URL)"


@pytest.mark.anyio
async def test_build_runner_talks_to_the_configured_endpoint(fake: FakeLLM) -> None:
    fake.api_key = "sk-secret"
    fake.push(text("hi"))
    settings = Settings.model_validate(
        {"model": "m1", "llm_base_url": fake.base_url, "llm_api_key": "sk-secret"}
    )
    async with fake.client() as client:
        runner = build_runner(settings, http_client=client, sandbox=SandboxStatus(False, "off"))
        result = await runner.run(invocation())
    assert result.error is None and result.output == "hi"
    assert fake.requests[0].headers["authorization"] == "Bearer sk-secret"
    assert fake.bodies[0]["model"] == "m1"


@pytest.mark.anyio
async def test_a_crashing_tool_is_reported_to_the_model_and_the_run_goes_on(
    fake: FakeLLM,
    runtime_for: RuntimeFactory,
    read_workspace: Workspace,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bot.agents import tools

    async def broken(self: tools.Toolbox, args: dict[str, Any]) -> str:
        raise KeyError("bug")

    monkeypatch.setattr(tools.Toolbox, "_tool_list_files", broken)
    fake.push(tool_call("list_files", {}), text("carried on"))
    result = await runtime_for().run(invocation(workspace=read_workspace))
    assert tool_messages(fake) == ["error: `list_files` failed unexpectedly (KeyError)"]
    assert result.error is None and result.output == "carried on"


@pytest.mark.anyio
async def test_calls_naming_a_provider_go_to_that_provider(fake: FakeLLM) -> None:
    other = FakeLLM([text("from the other provider")])
    fake.push(text("from the default"))
    async with fake.client() as first, other.client() as second:
        default = OpenAIChatModel(fake.base_url, http_client=first)
        alt = OpenAIChatModel(other.base_url, http_client=second)
        runtime = AgentRuntime(
            default,
            default_model="m",
            sandbox=SandboxStatus(False, "off"),
            limits=FAST,
            providers={"openai": default, "local": alt},
        )
        plain = await runtime.run(invocation())
        routed = await runtime.run(replace(invocation(model="small"), provider="local"))
        missing = await runtime.run(replace(invocation(model="x"), provider="anthropic"))
    assert plain.output == "from the default"
    assert routed.output == "from the other provider"
    assert other.bodies[0]["model"] == "small"
    assert missing.error is not None
    assert missing.error.startswith(
        "provider 'anthropic' is not configured (configured: local, openai)"
    )


def test_build_runner_configures_each_provider_with_a_key() -> None:
    settings = Settings.model_validate(
        {"model": "m", "llm_base_url": "http://127.0.0.1:9/v1", "anthropic_api_key": "ak-1"}
    )
    runner = build_runner(settings, sandbox=SandboxStatus(False, "off"))
    assert isinstance(runner, AgentRuntime)
    assert sorted(runner.providers) == ["anthropic", "openai"]
    assert runner.model is runner.providers["openai"]
    only_anthropic = Settings.model_validate(
        {"model": "claude-x", "llm_provider": "anthropic", "anthropic_api_key": "ak-1"}
    )
    runner = build_runner(only_anthropic, sandbox=SandboxStatus(False, "off"))
    assert isinstance(runner, AgentRuntime) and sorted(runner.providers) == ["anthropic"]


@pytest.mark.anyio
async def test_an_invalid_schema_fails_before_any_model_call(
    fake: FakeLLM, runtime_for: RuntimeFactory
) -> None:
    result = await runtime_for().run(invocation(schema={"type": "no-such-type"}))
    assert result.error is not None and result.error.startswith("the result schema is invalid")
    assert fake.bodies == []


@pytest.mark.anyio
async def test_a_reply_cut_off_by_the_token_limit_is_named(
    fake: FakeLLM, runtime_for: RuntimeFactory
) -> None:
    fake.push(Reply(content="The verdict is", finish_reason="length"))
    result = await runtime_for().run(invocation(schema=SCHEMA))
    assert result.error == (
        "finished without calling structured_output "
        "(its reply was cut off at the model's output limit)"
    )


@pytest.mark.anyio
async def test_concurrent_agents_on_one_runtime_keep_their_own_conversations(
    fake: FakeLLM, runtime_for: RuntimeFactory, read_workspace: Workspace
) -> None:
    def respond(body: dict[str, Any]) -> Reply:
        prompt = str(body["messages"][1]["content"])
        done = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if done == 0:
            return tool_call("read_file", {"path": "src/app.py"})
        tool_answer = str(body["messages"][-1]["content"])
        return text(f"{prompt} saw {'def greet' in tool_answer}")

    fake.respond_with(respond)
    runtime = runtime_for()
    results: dict[int, str] = {}

    async def one(i: int) -> None:
        result = await runtime.run(invocation(f"agent-{i}", workspace=read_workspace))
        results[i] = result.output

    async with anyio.create_task_group() as tg:
        for i in range(8):
            tg.start_soon(one, i)
    assert results == {i: f"agent-{i} saw True" for i in range(8)}
    assert len(fake.bodies) == 16


@pytest.mark.anyio
async def test_an_unreadable_reply_is_a_clear_error_not_a_crash() -> None:
    async def odd(request: Request) -> JSONResponse:
        message = {"role": "assistant", "content": "hi"}
        return JSONResponse({"choices": [{"message": message}], "usage": {"prompt_tokens": "many"}})

    app = Starlette(routes=[Route("/v1/chat/completions", odd, methods=["POST"])])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as client:
        runtime = AgentRuntime(
            OpenAIChatModel("http://x/v1", http_client=client, stream=False),
            default_model="m",
            sandbox=SandboxStatus(False, "off"),
            limits=FAST,
        )
        result = await runtime.run(invocation())
    assert result.error == (
        "the model's reply could not be read (ValueError: invalid literal for int() with "
        "base 10: 'many') (after 3 attempts)"
    )


@pytest.mark.anyio
async def test_an_explicit_model_is_not_sent_to_the_agent_types_provider(fake: FakeLLM) -> None:
    # The engine resolves model and provider together: an explicit model without a provider
    # means the default provider, even when the agent type pins another one with its model.
    other = FakeLLM([text("from the type's provider")])
    fake.push(text("from the default"))
    pinned = replace(REVIEWER, model="type-model", provider="local")
    async with fake.client() as first, other.client() as second:
        default = OpenAIChatModel(fake.base_url, http_client=first)
        alt = OpenAIChatModel(other.base_url, http_client=second)
        runtime = AgentRuntime(
            default,
            default_model="m",
            sandbox=SandboxStatus(False, "off"),
            limits=FAST,
            providers={"openai": default, "local": alt},
        )
        explicit = await runtime.run(invocation(agent_type=pinned, model="explicit"))
        typed = await runtime.run(invocation(agent_type=pinned))
    assert explicit.output == "from the default" and fake.bodies[0]["model"] == "explicit"
    assert typed.output == "from the type's provider" and other.bodies[0]["model"] == "type-model"
