"""How long `/healthz` waits while a review packs a big memory into its summary's marker.

A pull request's review state with `--findings` findings (2,500 by default) is encoded into the
signed marker line (`policies.review_state.encode_marker`): once through the review's own path
(`bot.workflows.review.memory.mirror_line`, in a worker thread), and once called on the event loop, as
the app used to. The real web app (`bot.intake.web.create_app`) is served by uvicorn on that same
loop, on 127.0.0.1, and a thread asks it for `/healthz` every 20 ms; the figures are those
answers' latency (median and maximum) and how long the encode took. The worker pool runs on
the receiver's loop under `bot serve --receivers 1`, so a stall there is a stall of the
webhook route and of `/healthz` alike.

    .venv/bin/python bench/review_marker.py [--findings 2500]
"""

from __future__ import annotations

import argparse
import hashlib
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import anyio.to_thread
import httpx
import uvicorn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.intake.web import create_app  # noqa: E402
from bot.settings import Settings  # noqa: E402
from bot.store.sqlite import Store  # noqa: E402
from bot.workflows.review.memory import mirror_line  # noqa: E402
from policies.review_state import ReviewState, StoredFinding, encode_marker  # noqa: E402

KEY = hashlib.sha256(b"bench").digest()
REPO = "octo/app"


def big_state(count: int) -> ReviewState:
    """`count` findings that read like real ones: paths, titles, code hashes, comment ids."""
    findings = []
    for i in range(count):
        h = hashlib.sha256(str(i).encode()).hexdigest()
        findings.append(
            StoredFinding(
                fingerprint=h[:20],
                path=f"src/module_{i % 97}/file_{i}.py",
                line=10 + i % 400,
                code=h[20:36],
                severity=("critical", "high", "medium", "low")[i % 4],
                category="bug",
                title=f"The handler at line {i % 400} drops the error of {h[:12]} ({h[40:52]})",
                status="open" if i % 3 else "dismissed",
                head=h[:40],
                comment_id=1_000_000 + i,
            )
        )
    return ReviewState(heads=[f"{i:040x}" for i in range(50)], findings=findings)


def poll(url: str, stop: threading.Event, latencies: list[float]) -> None:
    with httpx.Client(base_url=url, timeout=120) as client:
        while not stop.is_set():
            began = time.perf_counter()
            client.get("/healthz").raise_for_status()
            latencies.append((time.perf_counter() - began) * 1000)
            stop.wait(0.02)


async def during(url: str, work: Callable[[], Awaitable[str]]) -> tuple[float, list[float], int]:
    """Seconds `work` took, and the latency (ms) of every `/healthz` asked meanwhile."""
    latencies: list[float] = []
    stop = threading.Event()
    poller = threading.Thread(target=poll, args=(url, stop, latencies))
    poller.start()
    try:
        await anyio.sleep(0.2)  # a few answers before, for the baseline
        began = time.perf_counter()
        line = await work()
        took = time.perf_counter() - began
        await anyio.sleep(0.2)
    finally:
        stop.set()
        await anyio.to_thread.run_sync(poller.join)
    return took, latencies, len(line)


async def main(count: int) -> None:
    state = big_state(count)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(Path(tmp) / "bot.sqlite3")
        app = create_app(Settings.model_validate({"data_dir": tmp}), store)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
        server = uvicorn.Server(config)
        url = f"http://127.0.0.1:{port}"

        async def off_loop() -> str:
            return await mirror_line(state, key=KEY, repo=REPO, number=7)

        async def on_loop() -> str:
            return encode_marker(state, key=KEY, repo=REPO, number=7)

        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve)
            for _ in range(600):  # up to 30 s for the server to listen
                if server.started:
                    break
                await anyio.sleep(0.05)
            print(f"{count:,} findings; /healthz asked every 20 ms during the encode")
            for name, work in (("worker thread (the review's path)", off_loop),
                               ("on the event loop (as before)", on_loop)):  # fmt: skip
                took, latencies, size = await during(url, work)
                print(
                    f"  {name}: encode {took * 1000:.0f} ms, marker {size:,} chars; "
                    f"/healthz median {statistics.median(latencies):.1f} ms, "
                    f"max {max(latencies):.1f} ms over {len(latencies)} answers"
                )
            server.should_exit = True


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--findings", type=int, default=2500)
    anyio.run(main, parser.parse_args().findings)
