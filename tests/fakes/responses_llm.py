"""A fake OpenAI Responses API (`POST /v1/responses`), scripted with tests/fakes/llm.py's replies.

    fake = FakeResponses([tool_call("list_files", {"path": "."}), text("done")])
    client = fake.client()     # in-process; base URL `fake.base_url` (".../v1")

As strict as OpenAI's: 401 without `Authorization: Bearer <api_key>` (when one is set); 400
(`invalid_request_error`, OpenAI's wording) for a chat-completions body (`messages`), an
`input` item in chat format (role `tool`, `tool_calls`, `tool_call_id`), a tool in chat format
(`function: {...}` instead of top-level `name`), a `function_call_output` without an earlier
`function_call` of its `call_id`, a `function_call` without its output, and a `reasoning`
item whose `encrypted_content` this server did not issue. A reply's `reasoning` (Reply field)
comes back as a `reasoning` item, its `encrypted_content` only when the request `include`s
`reasoning.encrypted_content`. Served whole or as SSE events (`response.created`,
`response.output_item.added`, `response.output_text.delta`,
`response.function_call_arguments.delta`, `response.output_item.done`,
`response.completed`), with usage `input_tokens` / `output_tokens`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.llm import Reply

_KEY = b"fake-responses-reasoning"
_ROLES = ("assistant", "system", "developer", "user")


class InvalidRequest(Exception):
    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


def sealed(summary: str) -> str:
    return "enc_" + hmac.new(_KEY, summary.encode(), hashlib.sha256).hexdigest()


class FakeResponses:
    base_url = "http://fake-responses.test/v1"

    def __init__(self, script: Sequence[Reply], *, api_key: str | None = None) -> None:
        self.api_key = api_key
        self._queue = list(script)
        self._lock = threading.Lock()
        self._counter = 0
        self.bodies: list[dict[str, Any]] = []
        self.app = Starlette(routes=[Route("/v1/responses", self._responses, methods=["POST"])])

    @property
    def remaining(self) -> int:
        return len(self._queue)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app), base_url=self.base_url
        )

    async def _responses(self, request: Request) -> Response:
        if self.api_key is not None and (
            request.headers.get("authorization") != f"Bearer {self.api_key}"
        ):
            return _error(401, "Incorrect API key provided.", None)
        try:
            body = json.loads(await request.body())
        except ValueError:
            return _error(400, "We could not parse the JSON body of your request.", None)
        self.bodies.append(body)
        try:
            _validate(body)
        except InvalidRequest as exc:
            return _error(400, str(exc), exc.param)
        with self._lock:
            if not self._queue:
                return _error(500, "fake responses: script exhausted", None)
            reply = self._queue.pop(0)
            self._counter += 1
            number = self._counter
        if reply.status != 200:
            return _error(reply.status, reply.error_message or "fake error", None)
        encrypted = "reasoning.encrypted_content" in (body.get("include") or [])
        response = _response(number, body, reply, encrypted=encrypted)
        if body.get("stream"):
            return StreamingResponse(_stream(response), media_type="text/event-stream")
        return JSONResponse(response)


def _validate(body: Any) -> None:
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    if "messages" in body:
        raise InvalidRequest("Unknown parameter: 'messages'.", "messages")
    if not isinstance(body.get("model"), str):
        raise InvalidRequest("Missing required parameter: 'model'.", "model")
    items = body.get("input")
    if isinstance(items, str):
        return
    if not isinstance(items, list):
        raise InvalidRequest("Missing required parameter: 'input'.", "input")
    for i, tool in enumerate(body.get("tools") or []):
        if not isinstance(tool, dict) or "function" in tool or not tool.get("name"):
            raise InvalidRequest(
                f"Missing required parameter: 'tools[{i}].name'.", f"tools[{i}].name"
            )
    calls: set[str] = set()
    answered: set[str] = set()
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise InvalidRequest(f"Invalid type for 'input[{i}]'.", f"input[{i}]")
        for key in ("tool_calls", "tool_call_id"):
            if key in item:
                raise InvalidRequest(f"Unknown parameter: 'input[{i}].{key}'.", f"input[{i}]")
        kind = item.get("type", "message")
        if kind == "message":
            if item.get("role") not in _ROLES:
                raise InvalidRequest(
                    f"Invalid value: '{item.get('role')}'. Supported values are: 'assistant', "
                    "'system', 'developer', and 'user'.",
                    f"input[{i}].role",
                )
        elif kind == "function_call":
            calls.add(str(item.get("call_id")))
        elif kind == "function_call_output":
            call_id = str(item.get("call_id"))
            if call_id not in calls:
                raise InvalidRequest(
                    f"No tool call found for function call output with call_id {call_id}.",
                    "input",
                )
            answered.add(call_id)
        elif kind == "reasoning":
            content = item.get("encrypted_content")
            summary = "".join(str(s.get("text") or "") for s in item.get("summary") or [])
            if content != sealed(summary):
                raise InvalidRequest(
                    f"The encrypted content for item {item.get('id')} could not be verified.",
                    "input",
                )
        else:
            raise InvalidRequest(f"Invalid value: '{kind}'.", f"input[{i}].type")
    missing = sorted(calls - answered)
    if missing:
        raise InvalidRequest(f"No tool output found for function call {missing[0]}.", "input")


def _response(
    number: int, body: dict[str, Any], reply: Reply, *, encrypted: bool
) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if reply.reasoning is not None:
        item: dict[str, Any] = {
            "type": "reasoning",
            "id": f"rs_fake_{number}",
            "summary": [{"type": "summary_text", "text": reply.reasoning}],
        }
        if encrypted:
            item["encrypted_content"] = sealed(reply.reasoning)
        output.append(item)
    if reply.content:
        output.append(
            {
                "type": "message",
                "id": f"msg_fake_{number}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": reply.content, "annotations": []}],
            }
        )
    for i, spec in enumerate(reply.calls):
        output.append(
            {
                "type": "function_call",
                "id": f"fc_fake_{number}_{i}",
                "call_id": spec.id or f"call_fake_{number}_{i}",
                "name": spec.name,
                "arguments": spec.arguments,
                "status": "completed",
            }
        )
    prompt = len(json.dumps(body.get("input"))) // 4 + 1
    produced = len(json.dumps(output)) // 4 + 1
    usage = reply.usage
    return {
        "id": f"resp_fake_{number}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": body["model"],
        "output": output,
        "usage": {
            "input_tokens": usage.prompt if usage else prompt,
            "input_tokens_details": {"cached_tokens": usage.cached if usage else 0},
            "output_tokens": usage.completion if usage else produced,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": (usage.prompt + usage.completion) if usage else prompt + produced,
        },
    }


async def _stream(response: dict[str, Any]) -> AsyncIterator[bytes]:
    sequence = 0

    def event(kind: str, **data: Any) -> bytes:
        nonlocal sequence
        sequence += 1
        payload = {"type": kind, "sequence_number": sequence, **data}
        return f"event: {kind}\ndata: {json.dumps(payload)}\n\n".encode()

    pending = {**response, "status": "in_progress", "output": [], "usage": None}
    yield event("response.created", response=pending)
    yield event("response.in_progress", response=pending)
    for index, item in enumerate(response["output"]):
        if item["type"] == "message":
            yield event(
                "response.output_item.added", output_index=index, item={**item, "content": []}
            )
            text = item["content"][0]["text"]
            for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
                yield event(
                    "response.output_text.delta",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    delta=piece,
                )
            yield event(
                "response.output_text.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                text=text,
            )
        elif item["type"] == "function_call":
            yield event(
                "response.output_item.added", output_index=index, item={**item, "arguments": ""}
            )
            yield event(
                "response.function_call_arguments.delta",
                item_id=item["id"],
                output_index=index,
                delta=item["arguments"],
            )
            yield event(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                arguments=item["arguments"],
            )
        else:
            yield event("response.output_item.added", output_index=index, item=item)
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed", response=response)


def _error(status: int, message: str, param: str | None) -> JSONResponse:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": param, "code": None}},
        status_code=status,
    )
