"""The agent loop: prompt, model turns, tool calls, the structured result, usage and limits."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import jsonschema

from bot import log, metrics
from bot.agents.models import (
    ChatModel,
    Message,
    ModelError,
    ModelTurn,
    ToolCall,
    ToolSpec,
    WatchdogTimeout,
    price_of,
    user_message,
)
from bot.agents.openai_model import OpenAIChatModel
from bot.agents.prompt import system_prompt
from bot.agents.sandbox import DEFAULT_LIMITS, SandboxStatus, probe_sandbox
from bot.agents.sandbox_limits import SandboxLimits
from bot.agents.tools import TOOL_RESULT_CAP, Toolbox, ToolError, cap_output
from bot.agents.toolspecs import (
    CLARIFICATION_SPEC_PARAMETERS,
    STRUCTURED_OUTPUT,
    structured_output_spec,
)
from bot.agents.transcript import Transcript
from bot.engine.types import AgentInvocation, AgentRunner, RunnerResult, Usage
from bot.settings import Settings
from bot.store.queue.fence import check_fence
from policies.budget import estimate_tokens
from policies.interaction import ASK_CLARIFICATION_TOOL_NAME, NO_HUMAN_TOOL_MESSAGE

OUTPUT_CAP = 64 * 1024
NO_MODEL = "no model configured (set BOT_MODEL and BOT_LLM_BASE_URL)"
_log = log.get_logger("bot.agents")


@dataclass(frozen=True, slots=True)
class Limits:
    """The runtime's bounds; tests shrink them."""

    first_response_timeout: float = 45.0
    tool_timeout: float = 180.0
    max_turns: int = 50
    transport_retries: int = 2
    invalid_retries: int = 3
    backoff: float = 1.0
    backoff_cap: float = 20.0
    output_cap: int = OUTPUT_CAP
    sandbox: SandboxLimits = DEFAULT_LIMITS


@dataclass(slots=True)
class _State:
    """One agent call's working state."""

    messages: list[Message]
    transcript: Transcript
    usage: Usage = field(default_factory=Usage)
    strikes: int = 0
    structured: Any = None
    finished: bool = False
    output: str = ""


class NoModelRunner:
    """The runner used when no model is configured: every call fails with the fix."""

    def __init__(self, reason: str = NO_MODEL) -> None:
        self.reason = reason

    async def run(self, call: AgentInvocation) -> RunnerResult:
        return RunnerResult(error=self.reason)


class AgentRuntime:
    """Runs one agent call to completion against a ChatModel; implements AgentRunner."""

    def __init__(
        self,
        model: ChatModel,
        *,
        default_model: str | None,
        sandbox: SandboxStatus,
        limits: Limits | None = None,
        role_models: Mapping[str, str] | None = None,
        prices: Mapping[str, Mapping[str, float]] | None = None,
        providers: Mapping[str, ChatModel] | None = None,
    ) -> None:
        """`model` serves calls that name no provider; `providers` those that do (by name)."""
        self.model = model
        self.providers = dict(providers or {})
        self.default_model = default_model
        self.sandbox = sandbox
        self.limits = limits or Limits()
        self.role_models = dict(role_models or {})
        self.prices = {k: dict(v) for k, v in (prices or {}).items()}

    async def aclose(self) -> None:
        await self.model.aclose()
        for other in self.providers.values():
            if other is not self.model:
                await other.aclose()

    def chat_for(self, call: AgentInvocation) -> ChatModel | str:
        """The ChatModel for the call's provider, or the error saying it is not configured.

        A call that names its model keeps its own provider (None: the default one), as the
        engine resolved them together; the agent type's provider goes with the type's model.
        """
        provider = call.provider if call.model is not None else call.agent_type.provider
        if provider is None:
            return self.model
        chat = self.providers.get(provider.lower())
        if chat is None:
            known = ", ".join(sorted(self.providers)) or "none"
            return (
                f"provider {provider!r} is not configured (configured: {known}); set "
                "BOT_ANTHROPIC_API_KEY for anthropic, BOT_LLM_BASE_URL for openai"
            )
        return chat

    def model_for(self, call: AgentInvocation) -> str | None:
        """Explicit model, then the agent type's, then the role's, then the default."""
        return (
            call.model
            or call.agent_type.model
            or self.role_models.get(call.agent_type.name)
            or self.default_model
        )

    async def run(self, call: AgentInvocation) -> RunnerResult:
        with log.bound(run_id=call.run_id, agent=call.label, agent_index=call.index):
            model = self.model_for(call)
            if model is None:
                return RunnerResult(error=NO_MODEL)
            chat = self.chat_for(call)
            if isinstance(chat, str):
                return RunnerResult(error=chat)
            if call.agent_type.requires_worktree and call.workspace.worktree is None:
                return RunnerResult(
                    error=f"agent type {call.agent_type.name!r} writes files and needs "
                    "worktree isolation (isolation='worktree'); it was not given one"
                )
            toolbox = Toolbox(
                call.workspace,
                call.agent_type.tools,
                sandbox_ok=self.sandbox.ok,
                command_timeout=self.limits.tool_timeout,
                sandbox_limits=self.limits.sandbox,
            )
            try:
                return await self._run(call, chat, model, toolbox)
            finally:
                with anyio.CancelScope(shield=True):
                    await toolbox.aclose()

    def _offered(self, call: AgentInvocation, toolbox: Toolbox) -> tuple[list[ToolSpec], bool]:
        specs = toolbox.specs()
        if call.interaction.allows_clarification:
            specs.append(
                ToolSpec(
                    ASK_CLARIFICATION_TOOL_NAME,
                    "Ask the user a question and stop until they answer.",
                    CLARIFICATION_SPEC_PARAMETERS,
                )
            )
        wrapped = False
        if call.schema is not None:
            spec, wrapped = structured_output_spec(call.schema)
            specs.append(spec)
        return specs, wrapped

    async def _run(
        self, call: AgentInvocation, chat: ChatModel, model: str, toolbox: Toolbox
    ) -> RunnerResult:
        if call.schema is not None:
            try:
                jsonschema.validators.validator_for(call.schema).check_schema(call.schema)
            except jsonschema.SchemaError as exc:
                return RunnerResult(error=f"the result schema is invalid: {exc.message}")
        specs, wrapped = self._offered(call, toolbox)
        offered = {spec.name for spec in specs}
        system = system_prompt(call, toolbox.names, with_schema=call.schema is not None)
        asked = user_message(call.prompt)
        state = _State(
            messages=[{"role": "system", "content": system}, asked],
            transcript=Transcript(),
        )
        state.transcript.offered(
            system,
            [
                {"name": spec.name, "description": spec.description, "parameters": spec.parameters}
                for spec in specs
            ],
        )
        state.transcript.add("user", asked["content"], model=model, tools=sorted(offered))
        effort = call.effort or call.agent_type.effort
        price = self.prices.get(model)
        error: str | None = None
        turns = 0
        for turns in range(1, self.limits.max_turns + 1):  # noqa: B007 - read after the loop
            sending = estimate_tokens(request_chars(state.messages, specs))
            held = price_of(Usage(input=sending), price)
            if call.budget is not None:
                refused = await call.budget.admit(sending, held)
                if refused is not None:
                    error = refused
                    break
            try:
                turn = await self._complete(chat, state.messages, specs, model, effort)
            except ModelError as exc:
                error = str(exc)
                if call.budget is not None:
                    await call.budget.settle(sending, held, Usage())
                break
            turn.usage.cost = price_of(turn.usage, price)
            if call.budget is not None:
                await call.budget.settle(sending, held, turn.usage)
            state.usage.add(turn.usage)
            state.messages.append(turn.as_message())
            state.transcript.add(
                "assistant",
                turn.content,
                tool_calls=[
                    {"name": c.name, "arguments": c.arguments[:2000]} for c in turn.tool_calls
                ]
                or None,
            )
            if not turn.tool_calls:
                state.output = turn.content
                if call.schema is not None:
                    error = "finished without calling structured_output"
                    if turn.finish_reason == "length":
                        error += " (its reply was cut off at the model's output limit)"
                break
            error = await self._tools(call, turn, toolbox, offered, wrapped, state)
            if error is not None or state.finished:
                break
        else:
            error = f"stopped after {self.limits.max_turns} model turns without finishing"
        usage = state.usage
        metrics.agent_call(
            error is None,
            {
                "input": usage.input,
                "cache_read": usage.cache_read,
                "cache_write": usage.cache_write,
                "output": usage.output,
            },
        )
        _log.info(
            "agent finished" if error is None else "agent failed",
            extra={
                "model": model,
                "turns": turns,
                "tokens_in": state.usage.input + state.usage.cache_read,
                "tokens_out": state.usage.output,
                "commits": len(toolbox.commits),
                "error": error,
            },
        )
        return RunnerResult(
            output=cap_output(state.output, self.limits.output_cap),
            structured=state.structured,
            usage=state.usage,
            error=error,
            transcript=state.transcript.entries(),
            commits=list(toolbox.commits),
        )

    async def _complete(
        self,
        chat: ChatModel,
        messages: list[Message],
        specs: list[ToolSpec],
        model: str,
        effort: str | None,
    ) -> ModelTurn:
        attempt = 0
        while True:
            # Every request to the model, retries too, only while the job's lease is held:
            # LeaseLost is not a model error and ends the agent (`bot.store.queue.fence`).
            await check_fence()
            try:
                try:
                    return await chat.complete(
                        messages,
                        specs,
                        model=model,
                        effort=effort,
                        first_response_timeout=self.limits.first_response_timeout,
                    )
                except ModelError:
                    raise
                except Exception as exc:  # a reply shaped in a way no check foresaw
                    _log.warning("unreadable model reply", exc_info=True)
                    raise ModelError(
                        f"the model's reply could not be read ({type(exc).__name__}: {exc})",
                        retryable=True,
                    ) from exc
            except WatchdogTimeout:
                raise
            except ModelError as exc:
                if not exc.retryable or attempt >= self.limits.transport_retries:
                    if attempt:
                        raise ModelError(f"{exc} (after {attempt + 1} attempts)") from exc
                    raise
                delay = exc.retry_after
                if delay is None:
                    delay = self.limits.backoff * (2**attempt) * (0.5 + random.random() / 2)
                attempt += 1
                _log.info(
                    "model call failed; retrying", extra={"error": str(exc), "attempt": attempt}
                )
                await anyio.sleep(min(delay, self.limits.backoff_cap))

    async def _tools(
        self,
        call: AgentInvocation,
        turn: ModelTurn,
        toolbox: Toolbox,
        offered: set[str],
        wrapped: bool,
        state: _State,
    ) -> str | None:
        """Run one turn's tool calls; an error string ends the agent."""
        results: list[Message] = []
        bad: list[str] = []
        for tc in turn.tool_calls:
            text, ok = await self._one_tool(call, tc, toolbox, offered, wrapped, state)
            if not ok:
                bad.append(text)
            results.append({"role": "tool", "tool_call_id": tc.id, "content": text})
            state.transcript.add("tool", text, name=tc.name)
            if toolbox.quarantined is not None:  # its `.git` was tampered with: stop here
                state.messages.extend(results)
                return f"the agent's worktree was quarantined: {toolbox.quarantined}"
            if state.finished:
                break
        state.messages.extend(results)
        if state.finished:
            # The run ends here; calls after structured_output in the same turn are not run.
            return None
        if bad and len(bad) == len(turn.tool_calls):
            state.strikes += 1
            if state.strikes > self.limits.invalid_retries:
                return (
                    f"the model made invalid tool calls {state.strikes} times in a row; "
                    f"last: {bad[-1][:300]}"
                )
        else:
            state.strikes = 0
        return None

    async def _one_tool(
        self,
        call: AgentInvocation,
        tc: ToolCall,
        toolbox: Toolbox,
        offered: set[str],
        wrapped: bool,
        state: _State,
    ) -> tuple[str, bool]:
        """The tool's answer and whether the call itself was well formed."""
        if tc.name not in offered:
            if tc.name == ASK_CLARIFICATION_TOOL_NAME and not call.interaction.allows_clarification:
                return NO_HUMAN_TOOL_MESSAGE, True
            return (
                f"error: there is no tool named `{tc.name}`; use one of: {', '.join(sorted(offered))}",
                False,
            )
        try:
            args = json.loads(tc.arguments) if tc.arguments.strip() else {}
        except ValueError as exc:
            return (
                f"error: the arguments of `{tc.name}` are not valid JSON ({exc}); send a JSON object",
                False,
            )
        if not isinstance(args, dict):
            return f"error: the arguments of `{tc.name}` must be a JSON object", False
        if tc.name == STRUCTURED_OUTPUT:
            return self._structured(call, args, wrapped, state)
        if tc.name == ASK_CLARIFICATION_TOOL_NAME:
            question = str(args.get("question") or "").strip()
            state.output = (
                f"Clarification needed: {question}" if question else "Clarification needed."
            )
            state.finished = True
            return "The question was passed on; the run stops here until it is answered.", True
        with anyio.move_on_after(self.limits.tool_timeout) as scope:
            try:
                answer = await toolbox.call(tc.name, args)
                return cap_output(answer, TOOL_RESULT_CAP, "tool result"), True
            except ToolError as exc:
                return f"error: {exc}", True
            except Exception as exc:  # a tool bug must not end the run or lose its result
                _log.exception("tool crashed", extra={"tool": tc.name})
                return f"error: `{tc.name}` failed unexpectedly ({type(exc).__name__})", True
        if scope.cancelled_caught:
            return (
                f"error: `{tc.name}` timed out after {self.limits.tool_timeout:g} s and was stopped",
                True,
            )
        return "error: the tool produced no result", True

    @staticmethod
    def _structured(
        call: AgentInvocation, args: dict[str, Any], wrapped: bool, state: _State
    ) -> tuple[str, bool]:
        assert call.schema is not None
        value: Any = args.get("result") if wrapped else args
        try:
            jsonschema.validate(value, call.schema)
        except jsonschema.ValidationError as exc:
            where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
            # jsonschema quotes the whole offending value (a list of thousands of items, say):
            # its start and its end tell the model enough.
            text = exc.message
            detail = text if len(text) <= 300 else f"{text[:120]} … {text[-120:]}"
            return (
                f"error: the result does not match the schema at {where}: {detail}; call structured_output again with a corrected result",
                False,
            )
        state.structured = value
        state.finished = True
        if not state.output:
            state.output = json.dumps(value, ensure_ascii=False, indent=2)
        return "result recorded", True


def request_chars(messages: list[Message], specs: list[ToolSpec]) -> int:
    """The size of what one model request sends: its messages and its tools' specs."""
    sent = sum(len(json.dumps(m, ensure_ascii=False, default=str)) for m in messages)
    return sent + sum(
        len(s.name) + len(s.description) + len(json.dumps(s.parameters)) for s in specs
    )


def build_models(
    settings: Settings, *, http_client: httpx.AsyncClient | None = None
) -> dict[str, ChatModel]:
    """Every configured provider's ChatModel by name: `openai` (any OpenAI-compatible
    endpoint, when BOT_LLM_BASE_URL is set; its chat completions, or its Responses API with
    BOT_LLM_API=responses), `azure` (instead of `openai`, with BOT_LLM_PROVIDER=azure) and
    `anthropic` (when it has a key)."""
    models: dict[str, ChatModel] = {}
    anthropic_default = settings.llm_provider.lower() == "anthropic"
    if settings.llm_base_url and settings.llm_provider.lower() == "azure":
        from bot.agents.azure_model import AzureChatModel

        models["azure"] = AzureChatModel(
            settings.llm_base_url,
            settings.llm_api_key.get_secret_value() if settings.llm_api_key else None,
            api_version=settings.llm_api_version,
            http_client=http_client,
            stream=settings.llm_stream,
            send_reasoning_effort=settings.llm_reasoning_effort,
        )
    elif settings.llm_base_url and not anthropic_default and settings.llm_api == "responses":
        from bot.agents.responses_model import OpenAIResponsesModel

        models["openai"] = OpenAIResponsesModel(
            settings.llm_base_url,
            settings.llm_api_key.get_secret_value() if settings.llm_api_key else None,
            http_client=http_client,
            stream=settings.llm_stream,
            send_reasoning_effort=settings.llm_reasoning_effort,
        )
    elif settings.llm_base_url and not anthropic_default:
        models["openai"] = OpenAIChatModel(
            settings.llm_base_url,
            settings.llm_api_key.get_secret_value() if settings.llm_api_key else None,
            http_client=http_client,
            stream=settings.llm_stream,
            send_reasoning_effort=settings.llm_reasoning_effort,
        )
    key = settings.anthropic_api_key or (settings.llm_api_key if anthropic_default else None)
    if key is not None or anthropic_default:
        from bot.agents.anthropic_model import AnthropicChatModel

        base = settings.llm_base_url if anthropic_default and settings.llm_base_url else None
        models["anthropic"] = AnthropicChatModel(
            base_url=base or "https://api.anthropic.com",
            api_key=key.get_secret_value() if key else None,
            http_client=http_client,
            stream=settings.llm_stream,
            thinking=settings.llm_reasoning_effort,
        )
    return models


def build_model(
    settings: Settings, *, http_client: httpx.AsyncClient | None = None
) -> ChatModel | None:
    """The default provider's ChatModel (BOT_LLM_PROVIDER), or None when not configured."""
    models = build_models(settings, http_client=http_client)
    return models.get(settings.llm_provider.lower())


def build_runner(
    settings: Settings,
    *,
    http_client: httpx.AsyncClient | None = None,
    sandbox: SandboxStatus | None = None,
    limits: Limits | None = None,
) -> AgentRunner:
    """The app's AgentRunner from settings. Without a model, a runner that explains the fix.

    The sandbox is probed here (once) unless a status is given; where it does not work the
    `run_command` tool is withheld from every agent.
    """
    models = build_models(settings, http_client=http_client)
    default = models.get(settings.llm_provider.lower())
    if default is None:
        return NoModelRunner()
    box_limits = SandboxLimits.from_settings(settings)
    status = sandbox if sandbox is not None else probe_sandbox(limits=box_limits)
    if not status.ok:
        _log.warning("sandbox unavailable; run_command withheld", extra={"reason": status.reason})
    return AgentRuntime(
        default,
        default_model=settings.model,
        sandbox=status,
        limits=limits
        or Limits(
            first_response_timeout=settings.first_response_timeout,
            tool_timeout=settings.tool_timeout,
            max_turns=settings.max_turns,
            sandbox=box_limits,
        ),
        role_models=settings.role_models,
        prices=settings.model_prices,
        providers=models,
    )
