"""The small interface every chat model sits behind: messages, tools, turns, errors, prices."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from bot.engine.types import Usage

Message = dict[str, Any]

ERROR_TEXT_CAP = 500

CACHE_MARK = "\n\n<!-- the part of this prompt shared by the run's calls ends here -->\n\n"
"""Where a prompt's stable part ends (`bot.runs.context.context_prompt` puts it): the prompt is
sent without it, and an Anthropic request marks the text before it as a cache breakpoint."""
CACHE_PREFIX = "cache_prefix_chars"
"""A user message's field: how many characters of its content are the stable part."""


def user_message(prompt: str) -> Message:
    """The user message of `prompt`: its text without CACHE_MARK, and where the mark was."""
    head, mark, tail = prompt.partition(CACHE_MARK)
    if not mark:
        return {"role": "user", "content": prompt}
    return {"role": "user", "content": f"{head}\n\n{tail}", CACHE_PREFIX: len(head) + 2}


def plain_messages(messages: Sequence[Message]) -> list[Message]:
    """The messages as an OpenAI-compatible API takes them: without our own fields."""
    return [
        {k: v for k, v in m.items() if k != CACHE_PREFIX} if CACHE_PREFIX in m else m
        for m in messages
    ]


class ModelError(Exception):
    """The model endpoint failed; `retryable` says whether trying again may help."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after

    def __str__(self) -> str:
        return self.message


class WatchdogTimeout(ModelError):
    """The model sent nothing within the first-response window."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as offered to the model: its name, what it does and a JSON Schema of arguments."""

    name: str
    description: str
    parameters: dict[str, Any]

    def as_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call as the model sent it; `arguments` is the raw JSON text, unparsed."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ModelTurn:
    """One assistant reply: its text, the tool calls it made, and what it cost."""

    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None

    def as_message(self) -> Message:
        """The reply as an OpenAI-format assistant message, for the conversation history."""
        message: Message = {"role": "assistant", "content": self.content or None}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in self.tool_calls
            ]
        return message


class ChatModel(Protocol):
    """What the runtime needs from a model provider. Messages use the OpenAI chat format."""

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        model: str,
        effort: str | None = None,
        first_response_timeout: float = 45.0,
    ) -> ModelTurn: ...

    async def aclose(self) -> None: ...


def _error_text(response: httpx.Response, body: bytes) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace")[:ERROR_TEXT_CAP].strip()
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:ERROR_TEXT_CAP]
        if isinstance(err, str):
            return err[:ERROR_TEXT_CAP]
        if data.get("message"):
            return str(data["message"])[:ERROR_TEXT_CAP]
    return body.decode("utf-8", "replace")[:ERROR_TEXT_CAP].strip()


def _retry_after(response: httpx.Response) -> float | None:
    raw = response.headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        return None


def http_error(response: httpx.Response, body: bytes) -> ModelError:
    """A clear ModelError for an HTTP error answer; 429 and 5xx are retryable."""
    status = response.status_code
    retryable = status == 429 or status >= 500 or status == 408
    return ModelError(
        f"model endpoint answered HTTP {status}: {_error_text(response, body) or 'no detail'}",
        retryable=retryable,
        status=status,
        retry_after=_retry_after(response),
    )


class ClientHolder:
    """An httpx client given by the caller, or one we own, made per event loop: a runtime
    built once may serve several `anyio.run` calls, and pooled connections belong to one."""

    def __init__(self, given: httpx.AsyncClient | None, timeout: httpx.Timeout) -> None:
        self._given = given
        self._timeout = timeout
        self._owned: httpx.AsyncClient | None = None
        self._loop: int | None = None

    def get(self) -> httpx.AsyncClient:
        if self._given is not None:
            return self._given
        loop = _loop_id()
        if self._owned is None or loop != self._loop:
            self._owned = httpx.AsyncClient(timeout=self._timeout)
            self._loop = loop
        return self._owned

    async def aclose(self) -> None:
        if self._owned is not None and self._loop == _loop_id():
            await self._owned.aclose()
        self._owned = None


def _loop_id() -> int | None:
    try:
        return id(asyncio.get_running_loop())
    except RuntimeError:  # no asyncio loop running in this thread
        return None


def price_of(usage: Usage, price: Mapping[str, float] | None) -> float | None:
    """Cost in the price's currency; prices are per million tokens by kind."""
    if not price:
        return None
    per = 1_000_000.0
    input_price = float(price.get("input", 0.0))
    return (
        usage.input * input_price
        + usage.output * float(price.get("output", 0.0))
        + usage.cache_read * float(price.get("cache_read", input_price))
        + usage.cache_write * float(price.get("cache_write", input_price))
    ) / per
