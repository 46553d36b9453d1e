"""OpenAI's Responses API (`POST /v1/responses`) behind the ChatModel interface.

For models offered only there, or better there (BOT_LLM_API=responses). The OpenAI-format
history is converted on each call: messages become `input` items, an assistant's tool calls
`function_call` items and tool results `function_call_output` items, both keyed by `call_id`.
Nothing is stored on OpenAI's side (`store: false`, the whole history is sent each time); with
BOT_LLM_REASONING_EFFORT (a reasoning model) its `reasoning` items come back encrypted
(`include`), are kept in the assistant message under REASONING_FIELD, and go back in front of
that turn's calls, as OpenAI asks for tool use. Streamed, so the first-response watchdog fires on the first event; the turn is read
from the final `response.completed` (or `response.incomplete`) event's response.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from bot.agents.models import ERROR_TEXT_CAP, Message, ModelError, ModelTurn, ToolCall, ToolSpec
from bot.agents.openai_model import OpenAIChatModel, first_data_line, parse_json
from bot.engine.types import Usage

# The assistant message's field that keeps the Responses API's reasoning items as they came.
REASONING_FIELD = "openai_reasoning"

_EFFORT = {
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "high",
    "max": "high",
}


@dataclass(frozen=True, slots=True)
class ResponsesTurn(ModelTurn):
    """A turn with the reasoning items the Responses API sent (encrypted), kept verbatim."""

    reasoning: tuple[dict[str, Any], ...] = ()

    def as_message(self) -> Message:
        message = ModelTurn.as_message(self)
        if self.reasoning:
            message[REASONING_FIELD] = [dict(item) for item in self.reasoning]
        return message


def to_input(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """`input` items from OpenAI chat-format messages."""
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role in ("system", "user"):
            items.append({"role": role, "content": str(message.get("content") or "")})
        elif role == "assistant":
            for item in message.get(REASONING_FIELD) or []:
                if isinstance(item, dict) and item.get("type") == "reasoning":
                    items.append(dict(item))
            if message.get("content"):
                items.append({"role": "assistant", "content": str(message["content"])})
            for call in message.get("tool_calls") or []:
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call["id"],
                        "name": call["function"]["name"],
                        "arguments": call["function"]["arguments"] or "{}",
                    }
                )
        elif role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.get("tool_call_id"),
                    "output": str(message.get("content") or ""),
                }
            )
    return items


def responses_usage(raw: Mapping[str, Any] | None) -> Usage:
    """Usage from a Responses `usage` object; cached input tokens count as cache reads."""
    if not raw:
        return Usage()
    total_in = int(raw.get("input_tokens") or 0)
    details = raw.get("input_tokens_details") or {}
    cached = int(details.get("cached_tokens") or 0) if isinstance(details, Mapping) else 0
    return Usage(
        input=max(0, total_in - cached),
        output=int(raw.get("output_tokens") or 0),
        cache_read=cached,
    )


def parse_response(data: Any) -> ResponsesTurn:
    """The turn from a Responses API `response` object."""
    if not isinstance(data, dict) or not isinstance(data.get("output"), list):
        raise ModelError("model endpoint sent a response without `output`", retryable=True)
    texts: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[dict[str, Any]] = []
    for item in data["output"]:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or []:
                if isinstance(part, dict) and part.get("type") == "output_text":
                    texts.append(str(part.get("text") or ""))
        elif kind == "function_call":
            if not item.get("name") or not item.get("call_id"):
                raise ModelError(
                    "model sent a malformed function call (no name or call_id)", retryable=True
                )
            calls.append(
                ToolCall(str(item["call_id"]), str(item["name"]), str(item.get("arguments") or ""))
            )
        elif kind == "reasoning" and item.get("encrypted_content"):
            reasoning.append(
                {
                    "type": "reasoning",
                    "id": item.get("id"),
                    "summary": item.get("summary") or [],
                    "encrypted_content": item["encrypted_content"],
                }
            )
    status = data.get("status")
    if status == "failed":
        error = data.get("error") or {}
        message = error.get("message") if isinstance(error, dict) else None
        raise ModelError(
            f"model response failed: {str(message or 'unknown error')[:ERROR_TEXT_CAP]}",
            retryable=True,
        )
    incomplete = data.get("incomplete_details") or {}
    finish = "tool_calls" if calls else "stop"
    if status == "incomplete":
        reason = incomplete.get("reason") if isinstance(incomplete, dict) else None
        finish = "length" if reason == "max_output_tokens" else str(reason or "incomplete")
    return ResponsesTurn(
        "".join(texts),
        tuple(calls),
        responses_usage(data.get("usage")),
        finish,
        reasoning=tuple(reasoning),
    )


class OpenAIResponsesModel(OpenAIChatModel):
    """The Responses API over plain httpx, with the chat client's transport and watchdog."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        http_client: httpx.AsyncClient | None = None,
        stream: bool = True,
        send_reasoning_effort: bool = False,
    ) -> None:
        super().__init__(
            base_url,
            api_key,
            http_client=http_client,
            stream=stream,
            send_reasoning_effort=send_reasoning_effort,
        )
        self.url = base_url.rstrip("/") + "/responses"

    def request_body(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        model: str,
        effort: str | None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            "input": to_input(messages),
            "store": False,
        }
        if self.send_reasoning_effort:
            # A reasoning model (the operator says so): its reasoning comes back encrypted,
            # to be replayed, since nothing is stored on OpenAI's side.
            body["include"] = ["reasoning.encrypted_content"]
        if tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                }
                for t in tools
            ]
        if self.send_reasoning_effort and effort in _EFFORT:
            body["reasoning"] = {"effort": _EFFORT[effort]}
        if self.stream:
            body["stream"] = True
        return body

    def parse_whole(self, data: Any) -> ModelTurn:
        return parse_response(data)

    async def _read_stream(self, first: str | None, lines: AsyncIterator[str]) -> ModelTurn:
        data = first
        while data is not None:
            event = parse_json(data.encode())
            kind = event.get("type") if isinstance(event, dict) else None
            if kind in ("response.completed", "response.incomplete", "response.failed"):
                return parse_response(event.get("response"))
            if kind == "error":
                message = str(event.get("message") or "unknown error")[:ERROR_TEXT_CAP]
                raise ModelError(f"model stream reported an error: {message}", retryable=True)
            # Deltas (`response.output_text.delta`, `response.function_call_arguments.delta`)
            # only keep the stream alive here: the final event carries the whole response.
            data = await first_data_line(lines)
        raise ModelError("the model stream ended before `response.completed`", retryable=True)
