"""The OpenAI-compatible chat-completions client (OpenAI, vLLM, Ollama, llama.cpp server, ...).

Plain httpx, our own SSE reader: streaming by default so the first-response watchdog fires on
the first chunk, not on the whole answer; usage from the final chunk (`stream_options`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import anyio
import httpx

from bot.agents.models import (
    ERROR_TEXT_CAP,
    ClientHolder,
    Message,
    ModelError,
    ModelTurn,
    ToolCall,
    ToolSpec,
    WatchdogTimeout,
    http_error,
    plain_messages,
)
from bot.engine.types import Usage

# Provider values for OpenAI's `reasoning_effort`; our wider scale folds onto them.
_OPENAI_EFFORT = {
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "high",
    "max": "high",
}


def openai_usage(raw: Mapping[str, Any] | None) -> Usage:
    """Usage from an OpenAI `usage` object; cached prompt tokens count as cache reads."""
    if not raw:
        return Usage()
    prompt = int(raw.get("prompt_tokens") or 0)
    completion = int(raw.get("completion_tokens") or 0)
    details = raw.get("prompt_tokens_details") or {}
    cached = int(details.get("cached_tokens") or 0) if isinstance(details, Mapping) else 0
    return Usage(input=max(0, prompt - cached), output=completion, cache_read=cached)


class _ToolCallBuilder:
    """Accumulates streamed tool-call fragments by index."""

    def __init__(self) -> None:
        self.parts: dict[int, dict[str, str]] = {}

    def add(self, fragment: Mapping[str, Any]) -> None:
        index = int(fragment.get("index") or 0)
        slot = self.parts.setdefault(index, {"id": "", "name": "", "arguments": ""})
        if fragment.get("id"):
            slot["id"] = str(fragment["id"])
        function = fragment.get("function") or {}
        if function.get("name"):
            slot["name"] += str(function["name"])
        if function.get("arguments"):
            slot["arguments"] += str(function["arguments"])

    def calls(self) -> tuple[ToolCall, ...]:
        return tuple(
            ToolCall(id=p["id"] or f"call_{i}", name=p["name"], arguments=p["arguments"])
            for i, p in sorted(self.parts.items())
        )


def _parse_message(data: Any) -> ModelTurn:
    if not isinstance(data, dict):
        raise ModelError(
            "model endpoint sent a malformed reply (not a JSON object)", retryable=True
        )
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ModelError("model endpoint sent a reply without choices", retryable=True)
    message = choices[0].get("message") or {}
    calls: list[ToolCall] = []
    for i, raw in enumerate(message.get("tool_calls") or []):
        function = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(function, dict) or not function.get("name"):
            raise ModelError("model sent a malformed tool call (no function name)", retryable=True)
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments) if arguments is not None else ""
        calls.append(ToolCall(str(raw.get("id") or f"call_{i}"), str(function["name"]), arguments))
    return ModelTurn(
        content=str(message.get("content") or ""),
        tool_calls=tuple(calls),
        usage=openai_usage(data.get("usage")),
        finish_reason=choices[0].get("finish_reason"),
    )


class OpenAIChatModel:
    """Chat completions over plain httpx: streaming by default, so the first-response
    watchdog fires on the first chunk rather than on the whole answer."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        http_client: httpx.AsyncClient | None = None,
        stream: bool = True,
        send_reasoning_effort: bool = False,
        stall_timeout: float = 300.0,
        connect_timeout: float = 10.0,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self._headers = {"content-type": "application/json"}
        self._params: dict[str, str] = {}
        if api_key:
            self._headers["authorization"] = f"Bearer {api_key}"
        self._timeout = httpx.Timeout(stall_timeout, connect=connect_timeout)
        self._clients = ClientHolder(http_client, self._timeout)
        self.stream = stream
        self.send_reasoning_effort = send_reasoning_effort
        self.stall_timeout = stall_timeout

    async def aclose(self) -> None:
        await self._clients.aclose()

    def endpoint(self, model: str) -> str:
        """The URL a request for `model` goes to (one for every model here)."""
        return self.url

    def request_body(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        model: str,
        effort: str | None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, "messages": plain_messages(messages)}
        if tools:
            body["tools"] = [t.as_openai() for t in tools]
        if self.send_reasoning_effort and effort in _OPENAI_EFFORT:
            body["reasoning_effort"] = _OPENAI_EFFORT[effort]
        if self.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
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
        client = self._clients.get()
        request = client.build_request(
            "POST",
            self.endpoint(model),
            params=self._params,
            content=json.dumps(body).encode(),
            headers=self._headers,
            timeout=self._timeout,
        )
        response: httpx.Response | None = None
        try:
            with anyio.fail_after(first_response_timeout):
                response = await client.send(request, stream=True)
                if response.status_code >= 400:
                    raise http_error(response, await response.aread())
                content_type = response.headers.get("content-type", "")
                if not self.stream or content_type.startswith("application/json"):
                    # Some servers ignore `stream` and answer with one JSON body.
                    return self.parse_whole(parse_json(await response.aread()))
                lines = response.aiter_lines()
                first = await first_data_line(lines)
            return await self._read_stream(first, lines)
        except TimeoutError:
            raise WatchdogTimeout(
                f"the model sent no response within {first_response_timeout:g} s"
            ) from None
        except httpx.ReadTimeout as exc:
            raise ModelError(
                f"the model stream stalled for {self.stall_timeout:g} s", retryable=True
            ) from exc
        except httpx.TimeoutException as exc:
            raise ModelError(
                f"model endpoint timed out ({type(exc).__name__})", retryable=True
            ) from exc
        except httpx.TransportError as exc:
            raise ModelError(
                f"cannot reach the model endpoint {self.url}: {exc or type(exc).__name__}",
                retryable=True,
            ) from exc
        finally:
            if response is not None:
                with anyio.CancelScope(shield=True):
                    await response.aclose()

    def parse_whole(self, data: Any) -> ModelTurn:
        """The turn from one whole (not streamed) JSON answer."""
        return _parse_message(data)

    async def _read_stream(self, first: str | None, lines: AsyncIterator[str]) -> ModelTurn:
        content: list[str] = []
        builder = _ToolCallBuilder()
        usage = Usage()
        finish: str | None = None
        data = first
        while data is not None:
            if data == "[DONE]":
                # Read the stream's end too, so the connection goes back to the pool.
                with anyio.move_on_after(1.0):
                    async for _ in lines:
                        pass
                break
            chunk = parse_json(data.encode())
            if isinstance(chunk, dict) and isinstance(chunk.get("error"), dict):
                message = str(chunk["error"].get("message") or "unknown error")[:ERROR_TEXT_CAP]
                raise ModelError(f"model stream reported an error: {message}", retryable=True)
            if isinstance(chunk, dict):
                if chunk.get("usage"):
                    usage = openai_usage(chunk["usage"])
                for choice in chunk.get("choices") or []:
                    delta = choice.get("delta") or {}
                    if delta.get("content"):
                        content.append(str(delta["content"]))
                    for fragment in delta.get("tool_calls") or []:
                        builder.add(fragment)
                    if choice.get("finish_reason"):
                        finish = str(choice["finish_reason"])
            # A stalled stream ends in httpx's read timeout (set per request to stall_timeout).
            data = await first_data_line(lines)
        calls = builder.calls()
        for call in calls:
            if not call.name:
                raise ModelError(
                    "model sent a malformed tool call (no function name)", retryable=True
                )
        return ModelTurn("".join(content), calls, usage, finish)


async def first_data_line(lines: AsyncIterator[str]) -> str | None:
    """The payload of the next SSE `data:` line, or None at the end of the stream."""
    async for line in lines:
        if line.startswith("data:"):
            return line[5:].strip()
    return None


def parse_json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        raise ModelError(
            "model endpoint sent a reply that is not JSON: " + raw.decode("utf-8", "replace")[:200],
            retryable=True,
        ) from None
