"""Anthropic's Messages API behind the ChatModel interface (plain httpx, streaming).

Streaming, so the first-response watchdog fires on the first event, not on the whole answer
(a long answer takes minutes). OpenAI-format history is converted on each call: the system
message becomes `system`, tool results become `tool_result` blocks of a user turn.

Prompt caching: the system prompt carries a cache breakpoint (with the tools before it, what
every call of one agent type shares), and so does a prompt's stable part (`CACHE_PREFIX`:
the pull request's context every unit's call shares), so Anthropic bills a repeated prefix
as cache reads (`cache_read_input_tokens`, priced at the model's `cache_read`).

Extended thinking (`thinking=True`, BOT_LLM_REASONING_EFFORT): a call's effort becomes
`thinking.budget_tokens` (THINKING_BUDGETS). Anthropic refuses a tool-use turn whose history
lacks the signed thinking block that came before the tool use, and any block altered, so the
assistant message in the history keeps the blocks exactly as they came, under
THINKING_FIELD, and they are sent back first in that turn on every later request.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import httpx

from bot.agents.models import (
    CACHE_PREFIX,
    ClientHolder,
    Message,
    ModelError,
    ModelTurn,
    ToolCall,
    ToolSpec,
    WatchdogTimeout,
    http_error,
)
from bot.engine.types import Usage

API_VERSION = "2023-06-01"

# The assistant message's field that keeps Anthropic's thinking blocks as they came.
THINKING_FIELD = "anthropic_thinking"
_THINKING_TYPES = ("thinking", "redacted_thinking")

# Thinking tokens per effort; "off" (or no effort) sends no thinking. Anthropic's floor is 1024.
THINKING_BUDGETS = {
    "minimal": 1024,
    "low": 4096,
    "medium": 8192,
    "high": 12000,
    "xhigh": 16000,
    "max": 20000,
}
# Anthropic's prompt caching: a breakpoint caches the prompt up to it for five minutes.
EPHEMERAL = {"type": "ephemeral"}

# Room left for the answer beyond the thinking budget: max_tokens must exceed the budget.
_ANSWER_ROOM = 8192


@dataclass(frozen=True, slots=True)
class ThinkingTurn(ModelTurn):
    """A turn with Anthropic's thinking blocks, kept verbatim (signatures included)."""

    thinking: tuple[dict[str, str], ...] = ()

    def as_message(self) -> Message:
        message = ModelTurn.as_message(self)
        if self.thinking:
            message[THINKING_FIELD] = [dict(block) for block in self.thinking]
        return message


def _thinking_blocks(raw: Any) -> list[dict[str, str]]:
    """The thinking blocks kept in an assistant message, with only the fields Anthropic takes."""
    blocks: list[dict[str, str]] = []
    for block in raw if isinstance(raw, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "thinking":
            blocks.append(
                {
                    "type": "thinking",
                    "thinking": str(block.get("thinking") or ""),
                    "signature": str(block.get("signature") or ""),
                }
            )
        elif block.get("type") == "redacted_thinking":
            blocks.append({"type": "redacted_thinking", "data": str(block.get("data") or "")})
    return blocks


def to_anthropic(messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
    """(system text, messages) in Anthropic's shape from OpenAI-format messages."""
    system: list[str] = []
    out: list[dict[str, Any]] = []

    def push(role: str, block: dict[str, Any]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].append(block)
        else:
            out.append({"role": role, "content": [block]})

    for message in messages:
        role = message.get("role")
        if role == "system":
            system.append(str(message.get("content") or ""))
        elif role == "user":
            text = str(message.get("content") or "")
            stable = message.get(CACHE_PREFIX)
            if isinstance(stable, int) and 0 < stable < len(text):
                # The part every call of the run shares, a cache breakpoint, then the rest.
                push("user", {"type": "text", "text": text[:stable], "cache_control": EPHEMERAL})
                push("user", {"type": "text", "text": text[stable:]})
            else:
                push("user", {"type": "text", "text": text})
        elif role == "assistant":
            # Thinking first: Anthropic wants it before the turn's text and tool use.
            for block in _thinking_blocks(message.get(THINKING_FIELD)):
                push("assistant", block)
            if message.get("content"):
                push("assistant", {"type": "text", "text": str(message["content"])})
            for call in message.get("tool_calls") or []:
                try:
                    args = json.loads(call["function"]["arguments"] or "{}")
                except ValueError:
                    args = {"_raw": call["function"]["arguments"]}
                push(
                    "assistant",
                    {
                        "type": "tool_use",
                        "id": call["id"],
                        "name": call["function"]["name"],
                        "input": args if isinstance(args, dict) else {"_value": args},
                    },
                )
        elif role == "tool":
            push(
                "user",
                {
                    "type": "tool_result",
                    "tool_use_id": message.get("tool_call_id"),
                    "content": str(message.get("content") or ""),
                },
            )
    return "\n\n".join(system), out


class AnthropicChatModel:
    """Messages API client; tool calls come back with their input re-encoded as JSON text."""

    def __init__(
        self,
        base_url: str = "https://api.anthropic.com",
        api_key: str | None = None,
        *,
        http_client: httpx.AsyncClient | None = None,
        max_tokens: int = 16000,
        stream: bool = True,
        thinking: bool = False,
    ) -> None:
        self.stream = stream
        self.thinking = thinking
        self.url = base_url.rstrip("/").removesuffix("/v1") + "/v1/messages"
        self._headers = {"content-type": "application/json", "anthropic-version": API_VERSION}
        if api_key:
            self._headers["x-api-key"] = api_key
        self._clients = ClientHolder(http_client, httpx.Timeout(600, connect=10))
        self.max_tokens = max_tokens

    async def aclose(self) -> None:
        await self._clients.aclose()

    def request_body(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        model: str,
        effort: str | None,
    ) -> dict[str, Any]:
        system, converted = to_anthropic(messages)
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": self.max_tokens,
            "messages": converted,
        }
        if system:
            # A breakpoint after the tools and the system prompt, which every call of an
            # agent type shares (Anthropic reads tools, then system, then messages).
            body["system"] = [{"type": "text", "text": system, "cache_control": EPHEMERAL}]
        if tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in tools
            ]
        budget = THINKING_BUDGETS.get(effort or "") if self.thinking else None
        if budget is not None:
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
            body["max_tokens"] = max(self.max_tokens, budget + _ANSWER_ROOM)
        return body

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        model: str,
        effort: str | None = None,
        first_response_timeout: float = 45.0,
    ) -> ModelTurn:
        body = {
            **self.request_body(messages, tools, model=model, effort=effort),
            "stream": self.stream,
        }
        client = self._clients.get()
        request = client.build_request("POST", self.url, json=body, headers=self._headers)
        response: httpx.Response | None = None
        try:
            with anyio.fail_after(first_response_timeout):
                response = await client.send(request, stream=True)
                if response.status_code >= 400:
                    raise http_error(response, await response.aread())
                if response.headers.get("content-type", "").startswith("application/json"):
                    # Not streamed (BOT_LLM_STREAM=false), or a server that ignored the ask.
                    return _parse_message(_json(await response.aread()))
                events = response.aiter_lines()
                first = await _next_event(events)
            return await _read_stream(first, events)
        except TimeoutError:
            raise WatchdogTimeout(
                f"the model sent no response within {first_response_timeout:g} s"
            ) from None
        except httpx.TransportError as exc:
            raise ModelError(f"cannot reach {self.url}: {exc}", retryable=True) from exc
        finally:
            if response is not None:
                with anyio.CancelScope(shield=True):
                    await response.aclose()


def _usage(raw: Any, usage: Usage | None = None) -> Usage:
    """`usage` updated with the counts present in an Anthropic usage object."""
    usage = usage or Usage()
    if isinstance(raw, dict):
        usage.input = int(raw.get("input_tokens") or usage.input)
        usage.output = int(raw.get("output_tokens") or usage.output)
        usage.cache_read = int(raw.get("cache_read_input_tokens") or usage.cache_read)
        usage.cache_write = int(raw.get("cache_creation_input_tokens") or usage.cache_write)
    return usage


def _parse_message(data: Any) -> ModelTurn:
    """A whole (non-streamed) Messages API answer."""
    if not isinstance(data, dict):
        raise ModelError("Anthropic endpoint sent a malformed reply", retryable=True)
    texts: list[str] = []
    calls: list[ToolCall] = []
    thinking: list[dict[str, str]] = []
    for block in data.get("content") or []:
        if block.get("type") in _THINKING_TYPES:
            thinking.extend(_thinking_blocks([block]))
        elif block.get("type") == "text":
            texts.append(str(block.get("text") or ""))
        elif block.get("type") == "tool_use":
            calls.append(
                ToolCall(
                    str(block.get("id")),
                    str(block.get("name")),
                    json.dumps(block.get("input") or {}),
                )
            )
    return ThinkingTurn(
        "".join(texts),
        tuple(calls),
        _usage(data.get("usage")),
        data.get("stop_reason"),
        thinking=tuple(thinking),
    )


async def _read_stream(first: Any, events: AsyncIterator[str]) -> ModelTurn:
    """The turn from the stream's events (message_start, content blocks, message_delta)."""
    blocks: dict[int, dict[str, str]] = {}
    usage = Usage()
    stop: str | None = None
    event = first
    while event is not None:
        kind = event.get("type") if isinstance(event, dict) else None
        if kind == "error":
            error = event.get("error")
            message = error.get("message") if isinstance(error, dict) else None
            raise ModelError(
                f"model stream reported an error: {str(message or 'unknown error')[:500]}",
                retryable=True,
            )
        if kind == "message_start":
            message = event.get("message")
            _usage(message.get("usage") if isinstance(message, dict) else None, usage)
        elif kind == "content_block_start":
            block = event.get("content_block") or {}
            blocks[int(event.get("index") or 0)] = {
                "type": str(block.get("type") or ""),
                "text": str(block.get("text") or ""),
                "id": str(block.get("id") or ""),
                "name": str(block.get("name") or ""),
                "json": "",
                "thinking": str(block.get("thinking") or ""),
                "signature": str(block.get("signature") or ""),
                "data": str(block.get("data") or ""),
            }
        elif kind == "content_block_delta":
            slot = blocks.get(int(event.get("index") or 0))
            delta = event.get("delta") or {}
            if slot is not None and delta.get("type") == "text_delta":
                slot["text"] += str(delta.get("text") or "")
            elif slot is not None and delta.get("type") == "input_json_delta":
                slot["json"] += str(delta.get("partial_json") or "")
            elif slot is not None and delta.get("type") == "thinking_delta":
                slot["thinking"] += str(delta.get("thinking") or "")
            elif slot is not None and delta.get("type") == "signature_delta":
                slot["signature"] += str(delta.get("signature") or "")
        elif kind == "message_delta":
            stop = (event.get("delta") or {}).get("stop_reason") or stop
            _usage(event.get("usage"), usage)
        elif kind == "message_stop":
            break
        event = await _next_event(events)
    texts = [b["text"] for _, b in sorted(blocks.items()) if b["type"] == "text"]
    calls = tuple(
        ToolCall(b["id"], b["name"], b["json"] or "{}")
        for _, b in sorted(blocks.items())
        if b["type"] == "tool_use"
    )
    if any(not call.name for call in calls):
        raise ModelError("model sent a malformed tool call (no name)", retryable=True)
    thinking = _thinking_blocks([b for _, b in sorted(blocks.items())])
    return ThinkingTurn("".join(texts), calls, usage, stop, thinking=tuple(thinking))


async def _next_event(lines: AsyncIterator[str]) -> Any:
    """The JSON payload of the next SSE `data:` line, or None at the end of the stream."""
    async for line in lines:
        if line.startswith("data:"):
            return _json(line[5:].strip().encode())
    return None


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        raise ModelError(
            "Anthropic endpoint sent a reply that is not JSON", retryable=True
        ) from None
