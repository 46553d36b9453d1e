"""The operator's page: how long a run page with 128 agent calls and a deliveries page over a
store of 100,000 deliveries take to render.

A SQLite store (in a temporary folder) gets `--deliveries` deliveries, each a 2 KB issue
payload with its decision, one in ten with a run; and one run of `--calls` agent calls in 16
concurrent lanes with its artifacts as the engine leaves them (workflow.json, transcripts.json
with a 12-entry transcript per call, report.md). Each page is asked for through the real app
(`bot.intake.web.create_app`, signed in) over httpx's ASGI transport, so the figure is the server's
time: routing, the store's queries, the templates, redaction; not the network or the browser.
The median of `--repeats` requests is printed (after two warm-up requests).

    .venv/bin/python bench/ui.py [--deliveries 100000] [--calls 128] [--repeats 30]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.intake.web import create_app  # noqa: E402
from bot.settings import Settings  # noqa: E402
from bot.store.sqlite import Store  # noqa: E402
from tests.ui.seed import Call, details, payload, transcript_entry  # noqa: E402

TOKEN = "bench-operator-token-0123456789"
REPOS = ("octo/app", "octo/lib", "octo/site", "acme/api")


def fill(store: Store, deliveries: int) -> None:
    """`deliveries` rows newest at now, a second apart; one in ten started a run."""
    conn = store.conn()
    now = time.time()
    pad = "x" * 1800
    rows = []
    runs = []
    for i in range(deliveries):
        repo = REPOS[i % len(REPOS)]
        guid = f"bench-{i:07d}"
        body = json.dumps(payload(repo, number=i % 500, body=pad)).encode()
        decision = ("trigger", "skip", "skip", "error")[i % 4] if i % 10 else "trigger"
        headers = json.dumps({"x-github-event": "issues", "x-github-delivery": guid})
        at = now - (deliveries - i)
        rows.append((guid, "issues", "opened", at, headers, body, decision, "bench", "triage"))
        if i % 10 == 0:
            runs.append(
                (
                    f"wf_{i:012x}",
                    guid,
                    repo,
                    "issue",
                    i % 500,
                    "triage",
                    "webhook",
                    "succeeded",
                    at,
                    at,
                    at + 30,
                    1000,
                    100,
                    0.01,
                )
            )
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO deliveries (guid, event, action, received_at, headers, body, decision,"
        " reason, workflow) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    conn.executemany(
        "INSERT INTO runs (id, delivery_id, repo, target_kind, number, workflow, mode, status,"
        " created_at, updated_at, finished_at, input_tokens, output_tokens, cost)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        runs,
    )
    conn.execute("COMMIT")


def big_run(store: Store, calls: int) -> str:
    """A finished run of `calls` agent calls, 16 at a time, with the engine's artifacts."""
    run = store.create_run(
        delivery_id="bench-0000000",
        repo="octo/app",
        target_kind="issue",
        number=1,
        workflow="review",
        mode="webhook",
        status="succeeded",
    )
    start = time.time() - 600
    spans = [
        Call(
            f"review part {i}",
            start + (i // 16) * 20 + (i % 16) * 0.3,
            start + (i // 16) * 20 + 15 + (i % 5),
            phase=("Explore", "Review", "Report")[min(2, i // 48)],
            replayed=i % 11 == 0,
            state="error" if i % 17 == 0 else "done",
            usage={"input": 9000, "output": 900, "total": 9900, "cost": 0.02},
        )
        for i in range(calls)
    ]
    store.put_artifact(
        run.id,
        "workflow.json",
        details(
            run.id,
            spans,
            phases=("Explore", "Review", "Report"),
            started_at=start,
            finished_at=start + 400,
        ),
    )
    entries = {}
    for i in range(calls):
        entry = transcript_entry(
            f"review part {i}", text="Found nothing wrong. " * 20, tool_result="line\n" * 400
        )
        entry["transcript"] = entry["transcript"] * 3
        entries[str(i)] = entry
    store.put_artifact(run.id, "transcripts.json", json.dumps(entries))
    store.put_artifact(run.id, "report.md", "Workflow review completed.\n" * 50)
    store.update_run(
        run.id,
        status="succeeded",
        outcome={
            "run_id": run.id,
            "workflow": "review",
            "status": "succeeded",
            "summary": "All good. " * 100,
        },
    )
    store.record_run_usage(
        run.id,
        input_tokens=calls * 9000,
        output_tokens=calls * 900,
        cost=calls * 0.02,
        finished_at=start + 400,
    )
    return run.id


async def timed(client: httpx.AsyncClient, path: str, repeats: int) -> tuple[float, float, int]:
    """(median ms, max ms, bytes) of `repeats` GETs of `path`, after two warm-ups."""
    for _ in range(2):
        r = await client.get(path)
        r.raise_for_status()
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        r = await client.get(path)
        times.append((time.perf_counter() - began) * 1000)
        r.raise_for_status()
    return statistics.median(times), max(times), len(r.content)


async def measure(
    store: Store, run_id: str, repeats: int, data_dir: Path
) -> list[tuple[str, float, float, int]]:
    settings = Settings.model_validate({"ui_token": TOKEN, "data_dir": str(data_dir)})
    app = create_app(settings, store)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        r = await client.post("/ui/sign-in", data={"token": TOKEN})
        assert r.status_code in (200, 303), r.status_code
        pages = [
            (f"run page, {run_id} (128 calls)", f"/ui/runs/{run_id}"),
            ("run page's live part (polled each second)", f"/ui/runs/{run_id}/live"),
            ("one agent call's transcript", f"/ui/runs/{run_id}/agents/5"),
            ("deliveries page (newest 50)", "/ui/deliveries"),
            ("deliveries, decision=skip", "/ui/deliveries?decision=skip"),
            ("deliveries, repo=acme/api (reads bodies)", "/ui/deliveries?repo=acme/api"),
            ("runs page (newest 50)", "/ui/runs"),
            ("costs page, 30 days", "/ui/costs?days=30"),
        ]
        out = []
        for name, path in pages:
            median, worst, size = await timed(client, path, repeats)
            out.append((name, median, worst, size))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deliveries", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp)
        store = Store.open(data_dir / "bot.db")
        began = time.perf_counter()
        fill(store, args.deliveries)
        run_id = big_run(store, args.calls)
        print(
            f"store: {args.deliveries:,} deliveries, a run of {args.calls} calls, built in {time.perf_counter() - began:.1f} s"
        )
        results = anyio.run(measure, store, run_id, args.repeats, data_dir)
        store.close()
    print(f"python {platform.python_version()}, {platform.machine()}, median of {args.repeats}")
    print(f"{'page':<48} {'median ms':>10} {'max ms':>8} {'KB':>7}")
    for name, median, worst, size in results:
        print(f"{name:<48} {median:>10.1f} {worst:>8.1f} {size / 1024:>7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
