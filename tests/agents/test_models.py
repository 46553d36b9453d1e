"""Model clients: the OpenAI-compatible client over a real socket, effort, errors, Anthropic."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from bot.agents.anthropic_model import AnthropicChatModel, to_anthropic
from bot.agents.models import ModelError, ToolSpec, WatchdogTimeout
from bot.agents.openai_model import OpenAIChatModel
from tests.fakes.llm import FakeLLM, Reply, UsageSpec, hang, serve, text, tool_call, tool_calls

SPEC = ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {}})
HELLO = [{"role": "user", "content": "hello"}]


@pytest.mark.anyio
async def test_streaming_over_loopback_assembles_tool_calls_and_usage() -> None:
    fake = FakeLLM(
        [
            tool_calls(
                tool_call("read_file", {"path": "a.py", "note": "x" * 50}, id="c1"),
                tool_call("grep", {"pattern": "def "}, id="c2"),
                usage=UsageSpec(prompt=120, completion=30, cached=100),
            ),
            text("the end of a longer answer"),
        ]
    )
    with serve(fake) as base_url:
        model = OpenAIChatModel(base_url, "sk-x")
        try:
            turn = await model.complete(HELLO, [SPEC], model="m")
            second = await model.complete(HELLO, [], model="m")
        finally:
            await model.aclose()
    assert [(c.id, c.name) for c in turn.tool_calls] == [("c1", "read_file"), ("c2", "grep")]
    assert json.loads(turn.tool_calls[0].arguments) == {"path": "a.py", "note": "x" * 50}
    assert (turn.usage.input, turn.usage.cache_read, turn.usage.output) == (20, 100, 30)
    assert turn.finish_reason == "tool_calls"
    assert second.content == "the end of a longer answer" and second.tool_calls == ()
    assert fake.bodies[0]["stream_options"] == {"include_usage": True}
    assert fake.bodies[1].get("tools") is None
    # The stream is read to its end, so the second turn reuses the first one's connection.
    assert fake.requests[0].peer == fake.requests[1].peer != ""


@pytest.mark.anyio
async def test_models_endpoint_and_auth() -> None:
    fake = FakeLLM(api_key="sk-right")
    async with fake.client() as client:
        assert (await client.get("/models")).status_code == 401
        listed = await client.get("/models", headers={"authorization": "Bearer sk-right"})
    assert listed.json()["data"][0]["id"] == "fake-model"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("flag", "effort", "sent"),
    [
        pytest.param(True, "xhigh", "high", id="folded"),
        pytest.param(True, "low", "low", id="passed"),
        pytest.param(True, "off", None, id="off"),
        pytest.param(False, "high", None, id="endpoint-without-effort"),
    ],
)
async def test_reasoning_effort_only_where_supported(
    flag: bool, effort: str, sent: str | None
) -> None:
    fake = FakeLLM([text("ok")])
    async with fake.client() as client:
        model = OpenAIChatModel(fake.base_url, http_client=client, send_reasoning_effort=flag)
        await model.complete(HELLO, [], model="m", effort=effort)
    assert fake.bodies[0].get("reasoning_effort") == sent


@pytest.mark.anyio
async def test_unreachable_endpoint_is_a_retryable_clear_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = OpenAIChatModel(f"http://127.0.0.1:{port}/v1")
    try:
        with pytest.raises(ModelError, match="cannot reach the model endpoint") as info:
            await model.complete(HELLO, [], model="m")
    finally:
        await model.aclose()
    assert info.value.retryable


@pytest.mark.anyio
async def test_watchdog_over_a_real_socket() -> None:
    fake = FakeLLM([hang()])
    with serve(fake) as base_url:
        model = OpenAIChatModel(base_url)
        try:
            with pytest.raises(WatchdogTimeout, match=r"no response within 0\.2 s"):
                await model.complete(HELLO, [], model="m", first_response_timeout=0.2)
        finally:
            await model.aclose()


@pytest.mark.anyio
async def test_a_stream_that_stalls_after_its_first_chunk_fails_clearly() -> None:
    fake = FakeLLM([Reply(content="partial", stall=30)])
    with serve(fake) as base_url:
        model = OpenAIChatModel(base_url, stall_timeout=0.3)
        try:
            with pytest.raises(ModelError, match=r"stream stalled for 0\.3 s") as info:
                await model.complete(HELLO, [], model="m", first_response_timeout=5)
        finally:
            await model.aclose()
    assert info.value.retryable and not isinstance(info.value, WatchdogTimeout)


@pytest.mark.anyio
async def test_a_server_that_ignores_stream_is_understood() -> None:
    async def plain(request: Request) -> JSONResponse:
        message = {"role": "assistant", "content": "whole answer"}
        return JSONResponse(
            {
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 2},
            }
        )

    app = Starlette(routes=[Route("/v1/chat/completions", plain, methods=["POST"])])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as client:
        model = OpenAIChatModel("http://x/v1", http_client=client, stream=True)
        turn = await model.complete(HELLO, [], model="m")
    assert turn.content == "whole answer" and turn.usage.output == 2


@pytest.mark.anyio
async def test_malformed_replies_are_retryable_errors() -> None:
    async def bad(request: Request) -> JSONResponse:
        return JSONResponse({"object": "chat.completion", "choices": []})

    app = Starlette(routes=[Route("/v1/chat/completions", bad, methods=["POST"])])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as client:
        model = OpenAIChatModel("http://x/v1", http_client=client, stream=False)
        with pytest.raises(ModelError, match="without choices") as info:
            await model.complete(HELLO, [], model="m")
    assert info.value.retryable


def test_anthropic_conversion() -> None:
    system, messages = to_anthropic(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Look."},
            {
                "role": "assistant",
                "content": "Reading.",
                "tool_calls": [
                    {
                        "id": "t1",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "a"}'},
                    },
                    {
                        "id": "t2",
                        "type": "function",
                        "function": {"name": "grep", "arguments": '{"pattern": "x"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "t1", "content": "A"},
            {"role": "tool", "tool_call_id": "t2", "content": "B"},
        ]
    )
    assert system == "Be brief."
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert [b["type"] for b in messages[1]["content"]] == ["text", "tool_use", "tool_use"]
    assert messages[1]["content"][1]["input"] == {"path": "a"}
    assert [b["tool_use_id"] for b in messages[2]["content"]] == ["t1", "t2"]


@pytest.mark.anyio
async def test_anthropic_client_against_a_minimal_fake() -> None:
    seen: list[dict[str, Any]] = []

    async def messages(request: Request) -> JSONResponse:
        seen.append({"body": await request.json(), "key": request.headers.get("x-api-key")})
        return JSONResponse(
            {
                "content": [
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "tu1", "name": "read_file", "input": {"path": "a"}},
                ],
                "stop_reason": "tool_use",
                "usage": {
                    "input_tokens": 10,
                    "output_tokens": 5,
                    "cache_read_input_tokens": 7,
                    "cache_creation_input_tokens": 3,
                },
            }
        )

    app = Starlette(routes=[Route("/v1/messages", messages, methods=["POST"])])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as client:
        model = AnthropicChatModel("http://anthropic.test", "ak-1", http_client=client)
        turn = await model.complete(
            [{"role": "system", "content": "S"}, *HELLO], [SPEC], model="claude-x"
        )
    assert turn.content == "Let me look."
    assert turn.tool_calls[0].name == "read_file"
    assert json.loads(turn.tool_calls[0].arguments) == {"path": "a"}
    assert (turn.usage.input, turn.usage.output, turn.usage.cache_read, turn.usage.cache_write) == (
        10,
        5,
        7,
        3,
    )
    body = seen[0]["body"]
    # The system prompt is one text block, a cache breakpoint after it and the tools.
    assert body["system"] == [{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}]
    assert body["tools"][0]["input_schema"] == SPEC.parameters
    assert seen[0]["key"] == "ak-1"


ANTHROPIC_EVENTS: list[dict[str, Any]] = [
    {"type": "message_start", "message": {"usage": {"input_tokens": 10, "output_tokens": 1}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "ping"},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Let "}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "me."}},
    {"type": "content_block_stop", "index": 0},
    {
        "type": "content_block_start",
        "index": 1,
        "content_block": {"type": "tool_use", "id": "tu1", "name": "read_file", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": '{"path": '},
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": '"a"}'},
    },
    {"type": "content_block_stop", "index": 1},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
    {"type": "message_stop"},
]


@pytest.mark.anyio
async def test_anthropic_watchdog_covers_the_first_event_not_the_whole_answer() -> None:
    # The first event comes at once, the rest after longer than the watchdog: a long answer.
    async def messages(request: Request) -> Response:
        body = await request.json()
        if not body.get("stream"):
            await anyio.sleep(2.5)
            return JSONResponse({"content": [{"type": "text", "text": "late"}]})

        async def events() -> AsyncIterator[bytes]:
            for n, event in enumerate(ANTHROPIC_EVENTS):
                if n == 1:
                    await anyio.sleep(2.5)
                yield f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()

        return StreamingResponse(events(), media_type="text/event-stream")

    app = Starlette(routes=[Route("/v1/messages", messages, methods=["POST"])])
    with serve(app) as base_url:  # a real socket: the in-process transport buffers streams
        model = AnthropicChatModel(base_url, "ak-1")
        try:
            turn = await model.complete(HELLO, [SPEC], model="claude-x", first_response_timeout=2.0)
        finally:
            await model.aclose()
    assert turn.content == "Let me." and turn.finish_reason == "tool_use"
    assert [(c.id, c.name, json.loads(c.arguments)) for c in turn.tool_calls] == [
        ("tu1", "read_file", {"path": "a"})
    ]
    assert (turn.usage.input, turn.usage.output) == (10, 9)


@pytest.mark.anyio
async def test_anthropic_stream_error_event_is_a_retryable_model_error() -> None:
    async def messages(request: Request) -> Response:
        error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        chunks = [ANTHROPIC_EVENTS[0], error]
        payload = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
        return Response(payload, media_type="text/event-stream")

    app = Starlette(routes=[Route("/v1/messages", messages, methods=["POST"])])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as client:
        model = AnthropicChatModel("http://anthropic.test", "ak-1", http_client=client)
        with pytest.raises(ModelError, match="stream reported an error: Overloaded") as info:
            await model.complete(HELLO, [], model="claude-x")
    assert info.value.retryable


def test_one_model_serves_several_event_loops() -> None:
    fake = FakeLLM([text("one"), text("two")])
    with serve(fake) as base_url:
        model = OpenAIChatModel(base_url)

        async def ask() -> str:
            return (await model.complete(HELLO, [], model="m")).content

        assert anyio.run(ask) == "one"
        assert anyio.run(ask) == "two"
        anyio.run(model.aclose)
