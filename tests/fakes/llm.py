"""A fake OpenAI-compatible chat-completions server, scripted per test, recording every request.

Usage, in-process (no socket; the client talks to the Starlette app through httpx's ASGI transport):

    fake = FakeLLM([tool_call("read_file", {"path": "README.md"}), text("done")])
    client = fake.client()   # httpx.AsyncClient(transport=fake.transport(), base_url=...)
    # then: build_runner(settings, http_client=client), with BOT_LLM_BASE_URL=fake.base_url

On 127.0.0.1 (for the CLI, a subprocess, or anything that needs a real URL):

    with serve(fake) as base_url:      # e.g. "http://127.0.0.1:41234/v1"
        ...

The script is either a list of replies, consumed one per `POST /v1/chat/completions`, or a
function `(request_json) -> Reply` called for every request (also settable later with
`fake.respond_with(fn)`). More replies can be queued with `fake.push(...)`. When a list
script runs out, the server answers 500 "fake llm: script exhausted", so a test that expected
fewer turns fails loudly. `fake.remaining` counts the replies not used yet.

Reply builders (all return `Reply`):
- `text(content)`: an assistant message with no tool calls (finish_reason "stop").
- `tool_call(name, arguments, id=None)`: one tool call; `arguments` is a dict (sent as JSON)
  or a raw string (sent as is: `tool_call("grep", "{not json")` sends invalid JSON).
- `tool_calls(call, call, ...)`: several tool calls in one assistant turn.
- `error(status, message="...", headers=None)`: an HTTP error with an OpenAI-style body,
  e.g. `error(500)`, `error(429, headers={"retry-after": "0"})`.
- `hang(seconds=3600)`: never answers (sleeps; cancelled when the client gives up).
- Any reply can carry `usage=UsageSpec(prompt=, completion=, cached=)`; by default usage is
  derived deterministically from the request and reply sizes (prompt = len(json(messages))//4).
- `FakeLLM(..., prefix_cache=True)` counts and caches like OpenAI (`tests.fakes.prompt_cache`):
  `prompt_tokens` counts the tools too, and a request sharing a prefix of at least 1,024
  tokens with one of the last five minutes reports it as `prompt_tokens_details.cached_tokens`.
- `delay=` on a reply waits that many seconds before answering (before the first chunk);
  `Reply(content="x", stall=60)` sends the first stream chunk, then goes silent;
  `Reply(..., hold=event)` waits until the `threading.Event` is set (the test releases it).

Both `stream: false` (one JSON body) and `stream: true` (SSE `data:` chunks ending in
`data: [DONE]`, tool-call arguments split over several chunks, a usage chunk when
`stream_options.include_usage` is true) are served. `GET /v1/models` lists `fake.model`.

Recording: `fake.requests` holds a `Recorded(path, body, headers, peer)` per request in order;
`fake.bodies` the chat-completion request bodies; `fake.tool_names(i)` the names of the tools
offered in request i; `fake.system_prompt(i)`, `fake.messages(i)` for prompt assertions.
If `api_key` is given, requests without `Authorization: Bearer <api_key>` get 401.

Azure OpenAI's dialect is served too, at `/openai/deployments/<deployment>/chat/completions`
(base URL `fake.azure_url("<deployment>")`): a request without the `api-version` query
parameter gets Azure's 404, one without `api-key: <api_key>` (a Bearer token instead) its 401.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.prompt_cache import PromptCache


@dataclass(frozen=True)
class UsageSpec:
    """Token counts the fake reports for one reply."""

    prompt: int
    completion: int
    cached: int = 0


@dataclass(frozen=True)
class ToolCallSpec:
    name: str
    arguments: str
    id: str | None = None


@dataclass(frozen=True)
class Reply:
    """One scripted answer to one chat-completions request."""

    content: str | None = None
    calls: tuple[ToolCallSpec, ...] = ()
    status: int = 200
    error_message: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    hang_seconds: float | None = None
    delay: float = 0.0
    usage: UsageSpec | None = None
    finish_reason: str | None = None
    reasoning: str | None = None
    stall: float | None = None
    hold: threading.Event | None = field(default=None, compare=False)


def text(content: str, *, usage: UsageSpec | None = None, delay: float = 0.0) -> Reply:
    return Reply(content=content, usage=usage, delay=delay)


def tool_call(
    name: str,
    arguments: dict[str, Any] | str,
    id: str | None = None,
    *,
    content: str | None = None,
    usage: UsageSpec | None = None,
    delay: float = 0.0,
) -> Reply:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return Reply(content=content, calls=(ToolCallSpec(name, args, id),), usage=usage, delay=delay)


def tool_calls(*calls: Reply, usage: UsageSpec | None = None) -> Reply:
    """Merge single-call replies into one assistant turn with several tool calls."""
    merged = tuple(c for reply in calls for c in reply.calls)
    return Reply(calls=merged, usage=usage)


def error(
    status: int, message: str = "fake llm error", *, headers: dict[str, str] | None = None
) -> Reply:
    return Reply(status=status, error_message=message, headers=dict(headers or {}))


def hang(seconds: float = 3600.0) -> Reply:
    return Reply(hang_seconds=seconds)


@dataclass(frozen=True)
class Recorded:
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    peer: str = ""  # "host:port" of the client connection (shows connection reuse)


Script = Sequence[Reply] | Callable[[dict[str, Any]], Reply]


class FakeLLM:
    """The fake server's state: the script, the recorded requests, and the Starlette app."""

    base_url = "http://fake-llm.test/v1"

    def __init__(
        self,
        script: Script | None = None,
        *,
        model: str = "fake-model",
        api_key: str | None = None,
        prefix_cache: bool = False,
    ) -> None:
        self.model = model
        self.api_key = api_key
        # OpenAI's automatic prompt caching (`tests.fakes.prompt_cache`), when asked for.
        self.cache = PromptCache() if prefix_cache else None
        self._queue: list[Reply] = []
        self._fn: Callable[[dict[str, Any]], Reply] | None = None
        if callable(script):
            self._fn = script
        elif script is not None:
            self._queue.extend(script)
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._counter = 0
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route(
                    "/openai/deployments/{deployment}/chat/completions",
                    self._azure_chat,
                    methods=["POST"],
                ),
            ]
        )

    # -- scripting and inspection -------------------------------------------------------

    def push(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    def respond_with(self, fn: Callable[[dict[str, Any]], Reply]) -> None:
        """Answer every later request by calling `fn(request_json)`."""
        self._fn = fn

    @property
    def remaining(self) -> int:
        return len(self._queue)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path.endswith("/chat/completions")]

    def tool_names(self, index: int = -1) -> list[str]:
        tools = self.bodies[index].get("tools") or []
        return [t["function"]["name"] for t in tools]

    def messages(self, index: int = -1) -> list[dict[str, Any]]:
        return list(self.bodies[index]["messages"])

    def system_prompt(self, index: int = -1) -> str:
        for message in self.messages(index):
            if message.get("role") == "system":
                return str(message.get("content") or "")
        return ""

    def azure_url(self, deployment: str) -> str:
        """The deployment URL Azure shows for `deployment` of this (fake) resource."""
        return self.base_url.removesuffix("/v1") + f"/openai/deployments/{deployment}"

    def transport(self) -> httpx.ASGITransport:
        return httpx.ASGITransport(app=self.app)

    def client(self) -> httpx.AsyncClient:
        """An httpx client wired to the app in-process, with `base_url` set."""
        return httpx.AsyncClient(transport=self.transport(), base_url=self.base_url)

    def close(self) -> None:
        """Release any hanging replies (used when a served fake shuts down)."""
        self._closed.set()

    # -- HTTP handlers ---------------------------------------------------------------------

    def _authorized(self, request: Request) -> bool:
        if self.api_key is None:
            return True
        return request.headers.get("authorization") == f"Bearer {self.api_key}"

    async def _models(self, request: Request) -> Response:
        self.requests.append(Recorded(request.url.path, {}, dict(request.headers), _peer(request)))
        if not self._authorized(request):
            return _error_response(401, "invalid api key")
        return JSONResponse(
            {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "fake"}]}
        )

    def _next(self, body: dict[str, Any]) -> Reply:
        if self._fn is not None:
            return self._fn(body)
        with self._lock:
            if not self._queue:
                return error(500, "fake llm: script exhausted")
            return self._queue.pop(0)

    async def _azure_chat(self, request: Request) -> Response:
        """Azure OpenAI's dialect: a key anywhere but the `api-key` header (a Bearer token
        included) is Azure's 401, no `api-version` its 404; then the same chat completions."""
        if self.api_key is not None and request.headers.get("api-key") != self.api_key:
            self.requests.append(Recorded(request.url.path, {}, dict(request.headers)))
            return _error_response(
                401,
                "Access denied due to invalid subscription key or wrong API endpoint. Make "
                "sure to provide a valid key for an active subscription and use a correct "
                "regional API endpoint for your resource.",
            )
        if not request.query_params.get("api-version"):
            self.requests.append(Recorded(request.url.path, {}, dict(request.headers)))
            return _error_response(404, "Resource not found")
        return await self._chat(request, authorized=True)

    async def _chat(self, request: Request, *, authorized: bool = False) -> Response:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError:
            return _error_response(400, "request body is not JSON")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error_response(400, "`messages` is required")
        self.requests.append(
            Recorded(request.url.path, body, dict(request.headers), _peer(request))
        )
        if not (authorized or self._authorized(request)):
            return _error_response(401, "invalid api key")
        reply = self._next(body)
        if reply.hang_seconds is not None:
            await self._sleep(reply.hang_seconds)
            return _error_response(504, "fake llm: hang ended")
        if reply.delay:
            await self._sleep(reply.delay)
        # A threading.Event, polled: the test sets it from its own thread.
        while reply.hold is not None and not (reply.hold.is_set() or self._closed.is_set()):  # noqa: ASYNC110
            await anyio.sleep(0.05)
        if reply.status != 200:
            return _error_response(reply.status, reply.error_message, reply.headers)
        self._counter += 1
        completion_id = f"chatcmpl-fake-{self._counter}"
        usage = _usage(body, reply)
        if self.cache is not None and reply.usage is None:
            prompt, cached = self.cache.automatic(body.get("tools"), body.get("messages"))
            usage["total_tokens"] += prompt - usage["prompt_tokens"]
            usage["prompt_tokens"] = prompt
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(
                self._stream(completion_id, reply, usage if include_usage else None),
                media_type="text/event-stream",
            )
        return JSONResponse(self._completion(completion_id, reply, usage))

    async def _sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        # A threading.Event, polled: `close()` is called from the thread running the test.
        while not self._closed.is_set() and time.monotonic() < deadline:  # noqa: ASYNC110
            await anyio.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    def _completion(
        self, completion_id: str, reply: Reply, usage: dict[str, Any]
    ) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.reasoning is not None:
            message["reasoning_content"] = reply.reasoning
        if reply.calls:
            message["tool_calls"] = [
                {
                    "id": call.id or f"call_{self._counter}_{i}",
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for i, call in enumerate(reply.calls)
            ]
        return {
            "id": completion_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": _finish(reply)}],
            "usage": usage,
        }

    async def _stream(
        self, completion_id: str, reply: Reply, usage: dict[str, Any] | None
    ) -> AsyncIterator[bytes]:
        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            payload = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": self.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            return b"data: " + json.dumps(payload).encode() + b"\n\n"

        yield chunk({"role": "assistant", "content": ""})
        if reply.stall is not None:
            await self._sleep(reply.stall)
        if reply.content:
            for piece in _pieces(reply.content, 3):
                yield chunk({"content": piece})
        for i, call in enumerate(reply.calls):
            head = {
                "index": i,
                "id": call.id or f"call_{self._counter}_{i}",
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            yield chunk({"tool_calls": [head]})
            for piece in _pieces(call.arguments, 3):
                yield chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
        yield chunk({}, _finish(reply))
        if usage is not None:
            payload = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": self.model,
                "choices": [],
                "usage": usage,
            }
            yield b"data: " + json.dumps(payload).encode() + b"\n\n"
        yield b"data: [DONE]\n\n"


def _peer(request: Request) -> str:
    return f"{request.client.host}:{request.client.port}" if request.client else ""


def _finish(reply: Reply) -> str:
    if reply.finish_reason is not None:
        return reply.finish_reason
    return "tool_calls" if reply.calls else "stop"


def _pieces(value: str, count: int) -> list[str]:
    if not value:
        return []
    size = max(1, -(-len(value) // count))
    return [value[i : i + size] for i in range(0, len(value), size)]


def _usage(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    if reply.usage is not None:
        spec = reply.usage
    else:
        prompt = len(json.dumps(body.get("messages"))) // 4 + 1
        produced = len(reply.content or "") + sum(
            len(c.arguments) + len(c.name) for c in reply.calls
        )
        spec = UsageSpec(prompt=prompt, completion=produced // 4 + 1)
    return {
        "prompt_tokens": spec.prompt,
        "completion_tokens": spec.completion,
        "total_tokens": spec.prompt + spec.completion,
        "prompt_tokens_details": {"cached_tokens": spec.cached},
    }


def _error_response(
    status: int, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    body = {"error": {"message": message, "type": "fake_error", "code": status}}
    return JSONResponse(body, status_code=status, headers=headers)


@contextlib.contextmanager
def serve(fake: FakeLLM | Starlette, *, host: str = "127.0.0.1") -> Iterator[str]:
    """Run the fake with uvicorn on a free port of 127.0.0.1 in a thread; yields `.../v1`."""
    app = fake.app if isinstance(fake, FakeLLM) else fake
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, log_level="warning", lifespan="off", timeout_graceful_shutdown=2, loop="asyncio"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the fake LLM server did not start")
        time.sleep(0.01)
    try:
        yield f"http://{host}:{port}/v1"
    finally:
        if isinstance(fake, FakeLLM):
            fake.close()
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
