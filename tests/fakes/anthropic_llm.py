"""A fake Anthropic Messages API server, scripted per test, as strict as Anthropic's own.

    fake = FakeAnthropic([reply(thinking="plan", calls=[call("list_files", {"path": "."})]),
                          reply("done")], api_key="ak-1")
    client = fake.client()      # in-process; base URL `fake.base_url`

`POST /v1/messages` only. Each request must carry `x-api-key: <api_key>` (else 401) and
`anthropic-version` (else 400), and a body Anthropic accepts (else 400 `invalid_request_error`,
with Anthropic's wording):
- `model`, a positive integer `max_tokens` and a non-empty `messages` list that starts with a
  `user` turn and alternates roles;
- every `tool_use` of an assistant turn answered by a `tool_result` in the very next user turn;
- `thinking`, when present, is `{"type": "enabled", "budget_tokens": N}` with
  1024 <= N < max_tokens, or `{"type": "disabled"}`;
- with thinking enabled, the last assistant turn, when the conversation is in the middle of
  tool use (it ends with tool results), starts with a `thinking` or `redacted_thinking` block;
- every `thinking` block sent back carries the signature this server gave it, unaltered, and
  every `redacted_thinking` block data this server sent.

Replies: `reply(text="", calls=(), thinking=None, redacted=False)`; with thinking enabled in
the request, a reply's `thinking` comes first as a signed `thinking` block (or, `redacted=True`,
a `redacted_thinking` block); without it, no thinking block is sent, as Anthropic does. Both
`stream: true` (SSE events: message_start, content_block_start/delta/stop with
`thinking_delta`, `signature_delta`, `text_delta`, `input_json_delta`, message_delta,
message_stop) and whole JSON answers are served. `fake.bodies` are the request bodies in order.
Usage bills prompt caching as Anthropic does (`tests.fakes.prompt_cache`): blocks marked
`cache_control` (at most four, `ephemeral`) are cache breakpoints, and a marked prefix of at
least 1,024 tokens seen in the last five minutes is read from the cache.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.prompt_cache import CacheControlError, PromptCache

_SIGNING_KEY = b"fake-anthropic-thinking-signatures"


@dataclass(frozen=True)
class CallSpec:
    name: str
    input: dict[str, Any]
    id: str | None = None


@dataclass(frozen=True)
class AnthropicReply:
    text: str = ""
    calls: tuple[CallSpec, ...] = ()
    thinking: str | None = None
    redacted: bool = False


def reply(
    text: str = "",
    calls: Sequence[CallSpec] = (),
    *,
    thinking: str | None = None,
    redacted: bool = False,
) -> AnthropicReply:
    return AnthropicReply(text, tuple(calls), thinking, redacted)


def call(name: str, arguments: dict[str, Any], id: str | None = None) -> CallSpec:
    return CallSpec(name, arguments, id)


def signature_of(thinking: str) -> str:
    return hmac.new(_SIGNING_KEY, thinking.encode(), hashlib.sha256).hexdigest()


class InvalidRequest(Exception):
    """A body Anthropic answers with 400 invalid_request_error."""


class FakeAnthropic:
    base_url = "http://fake-anthropic.test"

    def __init__(self, script: Sequence[AnthropicReply], *, api_key: str = "ak-test") -> None:
        self.api_key = api_key
        self._queue = list(script)
        self._lock = threading.Lock()
        self._counter = 0
        self._redacted: set[str] = set()
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.cache = PromptCache()
        self.app = Starlette(routes=[Route("/v1/messages", self._messages, methods=["POST"])])

    @property
    def remaining(self) -> int:
        return len(self._queue)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app), base_url=self.base_url
        )

    async def _messages(self, request: Request) -> Response:
        headers = dict(request.headers)
        self.headers.append(headers)
        if headers.get("x-api-key") != self.api_key:
            return _error(401, "authentication_error", "invalid x-api-key")
        if not headers.get("anthropic-version"):
            return _error(400, "invalid_request_error", "anthropic-version: header is required")
        try:
            body = json.loads(await request.body())
        except ValueError:
            return _error(400, "invalid_request_error", "The request body is not valid JSON.")
        self.bodies.append(body)
        try:
            thinking = self._validate(body)
            usage = self.cache.anthropic_usage(body, output_tokens=7)
        except (InvalidRequest, CacheControlError) as exc:
            return _error(400, "invalid_request_error", str(exc))
        with self._lock:
            if not self._queue:
                return _error(500, "api_error", "fake anthropic: script exhausted")
            scripted = self._queue.pop(0)
            self._counter += 1
            number = self._counter
        blocks = self._blocks(scripted, number, thinking=thinking)
        stop = "tool_use" if scripted.calls else "end_turn"
        if body.get("stream"):
            return StreamingResponse(
                _stream(number, body["model"], blocks, usage, stop),
                media_type="text/event-stream",
            )
        return JSONResponse(
            {
                "id": f"msg_fake_{number}",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": blocks,
                "stop_reason": stop,
                "usage": usage,
            }
        )

    def _blocks(
        self, scripted: AnthropicReply, number: int, *, thinking: bool
    ) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if thinking and scripted.thinking is not None:
            if scripted.redacted:
                data = "redacted-" + signature_of(f"{number}:{scripted.thinking}")
                self._redacted.add(data)
                blocks.append({"type": "redacted_thinking", "data": data})
            else:
                blocks.append(
                    {
                        "type": "thinking",
                        "thinking": scripted.thinking,
                        "signature": signature_of(scripted.thinking),
                    }
                )
        if scripted.text:
            blocks.append({"type": "text", "text": scripted.text})
        for i, spec in enumerate(scripted.calls):
            blocks.append(
                {
                    "type": "tool_use",
                    "id": spec.id or f"toolu_fake_{number}_{i}",
                    "name": spec.name,
                    "input": spec.input,
                }
            )
        return blocks

    def _validate(self, body: Any) -> bool:
        """Anthropic's checks of a Messages request; whether thinking is enabled."""
        if not isinstance(body, dict) or not isinstance(body.get("model"), str):
            raise InvalidRequest("model: Field required")
        max_tokens = body.get("max_tokens")
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise InvalidRequest("max_tokens: Field required")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise InvalidRequest("messages: at least one message is required")
        thinking = _thinking(body.get("thinking"), max_tokens)
        system = body.get("system")
        texts = isinstance(system, list) and all(
            isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
            for b in system
        )
        if system is not None and not isinstance(system, str) and not texts:
            raise InvalidRequest("system: Input should be a valid string or a list of text blocks")
        expected = "user"
        pending: set[str] = set()
        for i, message in enumerate(messages):
            if not isinstance(message, dict) or message.get("role") != expected:
                raise InvalidRequest(
                    f"messages.{i}.role: roles must alternate between user and assistant, "
                    "starting with user"
                )
            content = message.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            if not isinstance(blocks, list) or not blocks:
                raise InvalidRequest(f"messages.{i}.content: must be a non-empty list")
            results = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
            if pending - results:
                raise InvalidRequest(
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(sorted(pending - results))}. Each "
                    "`tool_use` block must have a corresponding `tool_result` block in the "
                    "next message."
                )
            pending = {str(b.get("id")) for b in blocks if b.get("type") == "tool_use"}
            for j, block in enumerate(blocks):
                self._check_thinking_block(block, f"messages.{i}.content.{j}")
            expected = "assistant" if expected == "user" else "user"
        if thinking:
            self._check_replayed_thinking(messages)
        return thinking

    def _check_thinking_block(self, block: dict[str, Any], where: str) -> None:
        kind = block.get("type")
        if kind == "thinking":
            text = block.get("thinking")
            signature = block.get("signature")
            if not isinstance(text, str) or not isinstance(signature, str):
                raise InvalidRequest(f"{where}.signature: Field required")
            if not hmac.compare_digest(signature, signature_of(text)):
                raise InvalidRequest(f"{where}: Invalid `signature` in `thinking` block")
        elif kind == "redacted_thinking" and block.get("data") not in self._redacted:
            raise InvalidRequest(f"{where}: Invalid `data` in `redacted_thinking` block")

    @staticmethod
    def _check_replayed_thinking(messages: list[dict[str, Any]]) -> None:
        last = messages[-1]
        content = last.get("content")
        in_tool_use = isinstance(content, list) and any(
            b.get("type") == "tool_result" for b in content
        )
        if not in_tool_use or len(messages) < 2:
            return
        i = len(messages) - 2
        first = messages[i]["content"][0]
        if first.get("type") not in ("thinking", "redacted_thinking"):
            raise InvalidRequest(
                f"messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but "
                f"found `{first.get('type')}`. When `thinking` is enabled, a final `assistant` "
                "message must start with a thinking block (preceeding the lastmost set of "
                "`tool_use` and `tool_result` blocks). We recommend you include thinking "
                "blocks from previous turns."
            )


def _thinking(raw: Any, max_tokens: int) -> bool:
    if raw is None:
        return False
    if not isinstance(raw, dict) or raw.get("type") not in ("enabled", "disabled"):
        raise InvalidRequest("thinking.type: Input should be 'enabled' or 'disabled'")
    if raw["type"] == "disabled":
        return False
    budget = raw.get("budget_tokens")
    if not isinstance(budget, int):
        raise InvalidRequest("thinking.enabled.budget_tokens: Field required")
    if budget < 1024:
        raise InvalidRequest(
            "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
        )
    if budget >= max_tokens:
        raise InvalidRequest("`max_tokens` must be greater than `thinking.budget_tokens`.")
    return True


async def _stream(
    number: int,
    model: str,
    blocks: list[dict[str, Any]],
    usage: dict[str, int],
    stop: str,
) -> AsyncIterator[bytes]:
    def event(kind: str, data: dict[str, Any]) -> bytes:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()

    start = {
        "id": f"msg_fake_{number}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "usage": {**usage, "output_tokens": 1},
    }
    yield event("message_start", {"message": start})
    for index, block in enumerate(blocks):
        kind = block["type"]
        if kind == "thinking":
            yield event(
                "content_block_start",
                {"index": index, "content_block": {"type": "thinking", "thinking": ""}},
            )
            for piece in _halves(block["thinking"]):
                yield event(
                    "content_block_delta",
                    {"index": index, "delta": {"type": "thinking_delta", "thinking": piece}},
                )
            yield event(
                "content_block_delta",
                {
                    "index": index,
                    "delta": {"type": "signature_delta", "signature": block["signature"]},
                },
            )
        elif kind == "redacted_thinking":
            yield event("content_block_start", {"index": index, "content_block": block})
        elif kind == "text":
            yield event(
                "content_block_start",
                {"index": index, "content_block": {"type": "text", "text": ""}},
            )
            for piece in _halves(block["text"]):
                yield event(
                    "content_block_delta",
                    {"index": index, "delta": {"type": "text_delta", "text": piece}},
                )
        else:
            head = {**block, "input": {}}
            yield event("content_block_start", {"index": index, "content_block": head})
            for piece in _halves(json.dumps(block["input"])):
                yield event(
                    "content_block_delta",
                    {
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    },
                )
        yield event("content_block_stop", {"index": index})
    yield event(
        "message_delta",
        {"delta": {"stop_reason": stop}, "usage": {"output_tokens": usage["output_tokens"]}},
    )
    yield event("message_stop", {})


def _halves(value: str) -> list[str]:
    middle = len(value) // 2
    return [part for part in (value[:middle], value[middle:]) if part]


def _error(status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse(
        {"type": "error", "error": {"type": kind, "message": message}}, status_code=status
    )
