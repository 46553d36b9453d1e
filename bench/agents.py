"""Agent runtime benchmark: the loop's own cost per model turn, and the sandbox's start-up cost.

Per turn: the fake chat-completions server runs in a separate process on 127.0.0.1 (so it does
not share the GIL with the client). One agent run of N turns is timed; each turn the fake
answers with a tool call that needs no I/O (the clarification tool, which a webhook run
answers from memory), the last with text. The exact request bodies of that run are recorded,
then replayed with a bare httpx streaming POST (the HTTP round trip alone) and, for
comparison, through the `openai` SDK (the optional `bench` extra; without it that comparison
is skipped with a note). Overhead per turn = (runtime - raw) / N.

Tools: a read-only agent's tools on a generated commit of --files files, read straight from
the object database (one `git cat-file --batch` kept open per agent).

Sandbox: `true` through bubblewrap (the same command line `run_command` uses) against `true`
started directly, both via anyio subprocesses.

    .venv/bin/python bench/agents.py [--turns 50] [--repeats 7] [--commands 30] [--files 20000]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.agents.openai_model import OpenAIChatModel  # noqa: E402
from bot.agents.runtime import AgentRuntime, Limits  # noqa: E402
from bot.agents.sandbox import SandboxStatus, run_sandboxed  # noqa: E402
from bot.agents.types import EXPLORER  # noqa: E402
from bot.engine.types import AgentInvocation, Workspace  # noqa: E402
from policies.interaction import RunInteractionMode, RunInteractionPolicy  # noqa: E402

# The SDK comparison needs the optional `bench` extra; everything else runs without it.
HAS_SDK = importlib.util.find_spec("openai") is not None
SDK_SKIPPED = "openai SDK comparison skipped: pip install -e '.[bench]'"

SERVER = """
import sys, uvicorn
sys.path.insert(0, {root!r})
from tests.fakes.llm import FakeLLM, text, tool_call
turns = {turns}
def respond(body):
    done = sum(1 for m in body["messages"] if m["role"] == "assistant")
    if done + 1 < turns:
        return tool_call("ask_clarification", {{"question": "which one?"}})
    return text("finished")
fake = FakeLLM(respond)
uvicorn.run(fake.app, host="127.0.0.1", port={port}, log_level="warning",
            access_log=False, lifespan="off")
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(turns: int) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    code = SERVER.format(root=str(ROOT), turns=turns, port=port)
    proc = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, f"http://127.0.0.1:{port}/v1"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the fake server did not start")


def invocation() -> AgentInvocation:
    return AgentInvocation(
        run_id="wf_000000000000",
        index=1,
        label="bench",
        phase=None,
        prompt="Benchmark the loop.",
        agent_type=EXPLORER,
        interaction=RunInteractionPolicy(RunInteractionMode.WEBHOOK),
        workspace=Workspace(),
    )


Timing = tuple[float, float]  # (wall seconds, CPU seconds of this process)


async def time_runtime(base_url: str, turns: int, bodies: list[bytes] | None) -> Timing:
    async def record(request: httpx.Request) -> None:
        if bodies is not None:
            bodies.append(request.content)

    async with httpx.AsyncClient(event_hooks={"request": [record]}) as client:
        model = OpenAIChatModel(base_url, "sk-bench", http_client=client)
        runtime = AgentRuntime(
            model,
            default_model="fake-model",
            sandbox=SandboxStatus(False, "not needed"),
            limits=Limits(max_turns=turns + 1),
        )
        await runtime.run(invocation())  # warm the connection
        if bodies is not None:
            bodies.clear()
        start, cpu = time.perf_counter(), time.process_time()
        result = await runtime.run(invocation())
        elapsed = (time.perf_counter() - start, time.process_time() - cpu)
    if result.error or result.output != "finished":
        raise RuntimeError(f"benchmark run failed: {result.error or result.output}")
    return elapsed


async def time_raw(base_url: str, bodies: list[bytes]) -> Timing:
    url = base_url + "/chat/completions"
    headers = {"content-type": "application/json", "authorization": "Bearer sk-bench"}
    async with httpx.AsyncClient() as client:
        async with client.stream("POST", url, content=bodies[0], headers=headers) as r:
            await r.aread()
        start, cpu = time.perf_counter(), time.process_time()
        for body in bodies:
            async with client.stream("POST", url, content=body, headers=headers) as response:
                async for _ in response.aiter_lines():
                    pass
        return time.perf_counter() - start, time.process_time() - cpu


async def time_sdk(base_url: str, bodies: list[bytes]) -> Timing:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=base_url, api_key="sk-bench", max_retries=0)
    decoded: list[dict[str, Any]] = [json.loads(b) for b in bodies]
    try:
        start, cpu = time.perf_counter(), time.process_time()
        for body in decoded:
            stream = await client.chat.completions.create(**body)
            async for _ in stream:
                pass
        return time.perf_counter() - start, time.process_time() - cpu
    finally:
        await client.close()


async def bench_turns(turns: int, repeats: int) -> dict[str, float]:
    """Per-turn figures in ms: medians over repeats, each repeat timing the three clients
    back to back on the same bodies (so load from elsewhere hits them alike)."""
    proc, base_url = start_server(turns)
    rows: list[tuple[Timing, Timing, Timing | None]] = []
    try:
        for _ in range(repeats):
            bodies: list[bytes] = []
            runtime = await time_runtime(base_url, turns, bodies)
            assert len(bodies) == turns, len(bodies)
            raw = await time_raw(base_url, bodies)
            sdk = await time_sdk(base_url, bodies) if HAS_SDK else None
            rows.append((runtime, raw, sdk))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    per = 1000.0 / turns

    def med(values: list[float]) -> float:
        return statistics.median(values) * per

    figures = {
        "runtime_ms": med([r[0][0] for r in rows]),
        "raw_ms": med([r[1][0] for r in rows]),
        "overhead_ms": med([r[0][0] - r[1][0] for r in rows]),
        "overhead_cpu_ms": med([r[0][1] - r[1][1] for r in rows]),
    }
    sdk_rows = [(r[1], r[2]) for r in rows if r[2] is not None]
    if sdk_rows:
        figures["sdk_ms"] = med([sdk[0] for _, sdk in sdk_rows])
        figures["sdk_overhead_cpu_ms"] = med([sdk[1] - raw[1] for raw, sdk in sdk_rows])
    return figures


async def bench_sandbox(count: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as tmp:
        tree = Path(tmp)
        await run_sandboxed(tree, "true")
        boxed: list[float] = []
        for _ in range(count):
            start = time.perf_counter()
            result = await run_sandboxed(tree, "true")
            boxed.append(time.perf_counter() - start)
            if result.exit_code != 0:
                raise RuntimeError(f"sandboxed `true` failed: {result.output}")
        direct: list[float] = []
        for _ in range(count):
            start = time.perf_counter()
            await anyio.run_process(["/bin/sh", "-c", "true"], check=True)
            direct.append(time.perf_counter() - start)
    return {
        "bwrap_ms": statistics.median(boxed) * 1000,
        "direct_ms": statistics.median(direct) * 1000,
    }


def make_repo(root: Path, files: int) -> str:
    """A repository with `files` small Python files in one commit (via fast-import)."""
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(root)}
    subprocess.run(["git", "init", "-q", "--bare", str(root)], check=True, env=env)
    stream = ["commit refs/heads/main", "committer b <b@example.com> 0 +0000", "data 4", "init"]
    for i in range(files):
        body = f"def f{i}(x):\n    return x + {i}\n"
        stream += [f"M 100644 inline pkg/m{i // 100}/f{i}.py", f"data {len(body)}", body]
    subprocess.run(
        ["git", "--git-dir", str(root), "fast-import", "--quiet"],
        input="\n".join(stream).encode() + b"\n",
        check=True,
        env=env,
    )
    out = subprocess.run(["git", "--git-dir", str(root), "rev-parse", "main"], capture_output=True)
    return out.stdout.decode().strip()


async def bench_tools(files: int) -> dict[str, float]:
    """Read-only tools on a commit read straight from the object database."""
    from bot.agents.tools import Toolbox

    with tempfile.TemporaryDirectory(prefix="bench-tools-") as tmp:
        git_dir = Path(tmp) / "repo.git"
        sha = make_repo(git_dir, files)
        box = Toolbox(Workspace(git_dir=git_dir, commit=sha), EXPLORER.tools)
        try:
            start = time.perf_counter()
            listing = (await box.call("list_files", {})).splitlines()
            first_list = time.perf_counter() - start
            start = time.perf_counter()
            await box.call("read_file", {"path": listing[0]})
            first_read = time.perf_counter() - start
            paths = listing[1:1001]
            start = time.perf_counter()
            for path in paths:
                await box.call("read_file", {"path": path})
            per_read = (time.perf_counter() - start) / len(paths)
            start = time.perf_counter()
            await box.call("grep", {"pattern": "return x \\+ 4242$"})
            grep = time.perf_counter() - start
        finally:
            await box.aclose()
    return {
        "list_ms": first_list * 1000,
        "first_read_ms": first_read * 1000,
        "read_ms": per_read * 1000,
        "grep_ms": grep * 1000,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--commands", type=int, default=30)
    parser.add_argument("--files", type=int, default=20000)
    args = parser.parse_args()
    print(f"# {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpus")
    turns = anyio.run(bench_turns, args.turns, args.repeats)
    print(
        f"model turn ({args.turns} turns, median of {args.repeats} runs, streaming, loopback):\n"
        f"  runtime loop            {turns['runtime_ms']:7.2f} ms/turn\n"
        f"  raw httpx round trip    {turns['raw_ms']:7.2f} ms/turn\n"
        f"  runtime overhead        {turns['overhead_ms']:7.2f} ms/turn wall (target < 2 ms)\n"
        f"  runtime overhead        {turns['overhead_cpu_ms']:7.2f} ms/turn CPU"
    )
    if "sdk_ms" in turns:
        print(
            f"  openai SDK round trip   {turns['sdk_ms']:7.2f} ms/turn\n"
            f"  openai SDK overhead     {turns['sdk_overhead_cpu_ms']:7.2f} ms/turn CPU"
        )
    else:
        print(f"  ({SDK_SKIPPED})")
    tools = anyio.run(bench_tools, args.files)
    print(
        f"read-only tools on a {args.files}-file commit (object database, no checkout):\n"
        f"  list_files (first call, ls-tree)  {tools['list_ms']:7.2f} ms\n"
        f"  read_file, first (starts cat-file) {tools['first_read_ms']:7.2f} ms\n"
        f"  read_file, next ones              {tools['read_ms']:7.3f} ms/file\n"
        f"  grep over the commit              {tools['grep_ms']:7.2f} ms"
    )
    box = anyio.run(bench_sandbox, args.commands)
    print(
        f"sandbox start-up (median of {args.commands}):\n"
        f"  `true` in bwrap         {box['bwrap_ms']:7.2f} ms\n"
        f"  `true` directly         {box['direct_ms']:7.2f} ms\n"
        f"  sandbox cost            {box['bwrap_ms'] - box['direct_ms']:7.2f} ms/command"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
