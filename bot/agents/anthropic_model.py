"""Anthropic's Messages API behind the ChatModel interface (plain httpx, non-streaming).

The watchdog covers the whole request here. OpenAI-format history is converted on each call:
the system message becomes `system`, tool results become `tool_result` blocks of a user turn.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anyio
import httpx

from bot.agents.models import (
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
            push("user", {"type": "text", "text": str(message.get("content") or "")})
        elif role == "assistant":
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
    ) -> None:
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
            body["system"] = system
        if tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in tools
            ]
        # Effort is not sent: extended thinking with tools requires replaying the signed
        # thinking blocks on every later turn, which the OpenAI-format history does not keep.
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
        body = self.request_body(messages, tools, model=model, effort=effort)
        try:
            with anyio.fail_after(first_response_timeout):
                response = await self._clients.get().post(
                    self.url, json=body, headers=self._headers
                )
        except TimeoutError:
            raise WatchdogTimeout(
                f"the model sent no response within {first_response_timeout:g} s"
            ) from None
        except httpx.TransportError as exc:
            raise ModelError(f"cannot reach {self.url}: {exc}", retryable=True) from exc
        if response.status_code >= 400:
            raise http_error(response, response.content)
        try:
            data = response.json()
        except ValueError:
            raise ModelError(
                "Anthropic endpoint sent a reply that is not JSON", retryable=True
            ) from None
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in data.get("content") or []:
            if block.get("type") == "text":
                texts.append(str(block.get("text") or ""))
            elif block.get("type") == "tool_use":
                calls.append(
                    ToolCall(
                        str(block.get("id")),
                        str(block.get("name")),
                        json.dumps(block.get("input") or {}),
                    )
                )
        raw = data.get("usage") or {}
        usage = Usage(
            input=int(raw.get("input_tokens") or 0),
            output=int(raw.get("output_tokens") or 0),
            cache_read=int(raw.get("cache_read_input_tokens") or 0),
            cache_write=int(raw.get("cache_creation_input_tokens") or 0),
        )
        return ModelTurn("".join(texts), tuple(calls), usage, data.get("stop_reason"))
