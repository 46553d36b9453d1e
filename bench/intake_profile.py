"""Where the webhook route's CPU goes: signed deliveries through the raw ASGI app under cProfile.

`bot serve`'s app (`bot.intake.web.create_app`, SQLite, its delivery writer and refusal log
running) gets `--count` signed `issue_comment.created` deliveries (`fixtures/github-payloads`), `--concurrency` at a time, straight through the ASGI interface: no socket,
no uvicorn, so what is measured is the route itself (uvicorn's HTTP parsing is on top of it,
measured by `bench/intake.py` and `bench/scale.py` with wrk). Printed: CPU per delivery
(process time, the writer thread's commits included), then the profile's functions grouped
by what they do, as shares of the event loop's time in the route.

    .venv/bin/python bench/intake_profile.py [--count 5000] [--concurrency 16] [--top 25]
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import hmac
import io
import pstats
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.intake.web import create_app  # noqa: E402
from bot.settings import Settings  # noqa: E402
from bot.store.sqlite import Store  # noqa: E402

SECRET = "profile-secret-0123456789"
BODY = ROOT / "fixtures" / "github-payloads" / "issue_comment" / "created.payload.json"

# What each part of the route is, by the file its functions live in.
GROUPS = (
    ("signature (HMAC)", ("hmac.py", "_hashlib", "bot/intake/signature")),
    ("JSON check", ("json/", "orjson", "bot/intake/payload")),
    ("waiting in the event loop (epoll)", ("select.epoll",)),
    ("writer (group commit)", ("bot/intake/delivery_writer", "sqlite3", "bot/store/segments")),
    ("budget", ("bot/intake/budget",)),
    ("metrics", ("bot/metrics", "prometheus_client")),
    ("logging", ("logging/", "bot/log")),
    ("route", ("bot/intake/web", "bot/intake/")),
    ("starlette", ("starlette/",)),
    ("anyio and asyncio", ("anyio/", "asyncio/")),
)


def group_of(filename: str) -> str:
    for name, markers in GROUPS:
        if any(m in filename for m in markers):
            return name
    return "other"


async def drive(app: object, body: bytes, count: int, concurrency: int) -> list[int]:
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    statuses: list[int] = []
    # Made before: a syscall in the loop would wait for the GIL behind the writer thread.
    guids = [str(uuid.uuid4()).encode() for _ in range(count)]

    async def one(guid: bytes) -> None:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/webhooks/github",
            "raw_path": b"/webhooks/github",
            "query_string": b"",
            "root_path": "",
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"x-github-event", b"issue_comment"),
                (b"x-github-delivery", guid),
                (b"x-hub-signature-256", signature.encode()),
                (b"user-agent", b"GitHub-Hookshot/bench"),
            ],
            "client": ("140.82.115.1", 1),
            "server": ("bench", 80),
        }
        sent = False

        async def receive() -> dict[str, object]:
            nonlocal sent
            if sent:
                await anyio.sleep_forever()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, object]) -> None:
            if message["type"] == "http.response.start":
                statuses.append(int(message["status"]))  # type: ignore[call-overload]

        await app(scope, receive, send)  # type: ignore[operator]

    limiter = anyio.CapacityLimiter(concurrency)

    async def limited(guid: bytes) -> None:
        async with limiter:
            await one(guid)

    async with anyio.create_task_group() as tasks:
        for guid in guids:
            tasks.start_soon(limited, guid)
    return statuses


async def main_async(count: int, concurrency: int, top: int, callers: str) -> int:
    body = BODY.read_bytes()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(Path(tmp) / "bot.sqlite3")
        app = create_app(
            Settings(webhook_secret=SECRET, data_dir=Path(tmp), log_level="WARNING"), store
        )
        try:
            async with app.router.lifespan_context(app):
                await drive(app, body, 200, concurrency)  # warm up
                plain_cpu, plain_wall = time.process_time(), time.perf_counter()
                await drive(app, body, count, concurrency)
                plain_cpu = time.process_time() - plain_cpu
                plain_wall = time.perf_counter() - plain_wall
                profile = cProfile.Profile()
                cpu, wall = time.process_time(), time.perf_counter()
                profile.enable()
                statuses = await drive(app, body, count, concurrency)
                profile.disable()
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        finally:
            store.close()
    accepted = sum(1 for s in statuses if s == 202)
    print(
        f"{count} deliveries of {len(body):,} bytes at concurrency {concurrency}: {accepted} "
        f"accepted; without the profiler {plain_cpu / count * 1e6:.0f} us CPU per delivery "
        f"(process, with the writer thread), {count / plain_wall:,.0f} deliveries/s; under it "
        f"{cpu / count * 1e6:.0f} us, {count / wall:,.0f}/s"
    )
    stats = pstats.Stats(profile)
    by_group: dict[str, float] = defaultdict(float)
    total = 0.0
    for (filename, _line, name), (_cc, _nc, tottime, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        by_group[group_of(f"{filename}:{name}")] += tottime
        total += tottime
    print(f"\nevent loop's own time per delivery by part ({total / count * 1e6:.0f} us profiled):")
    for name, seconds in sorted(by_group.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<24} {seconds / count * 1e6:>7.1f} us  {seconds / total:>6.1%}")
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(top)
    if callers:
        pstats.Stats(profile, stream=out).print_callers(callers)
    print("\n" + "\n".join(out.getvalue().splitlines()[6:]))
    return 0 if accepted == count else 1


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument(
        "--callers", default="", help="also print who calls functions matching this"
    )
    args = parser.parse_args()
    return anyio.run(main_async, args.count, args.concurrency, args.top, args.callers)


if __name__ == "__main__":
    raise SystemExit(main())
