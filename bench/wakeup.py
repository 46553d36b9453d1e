"""Latency from a job's enqueue to its claim by an idle worker pool on Postgres.

A pool (`bot.runs.worker.Worker`, two tasks) waits on one Postgres database (`--database-url`,
else BOT_TEST_DATABASE_URL, else a throwaway server from `scripts/postgres`), in a fresh
schema. Jobs are enqueued one at a time through another connection pool, as a receiver on
another machine would, spaced at random (0.3-1.3 s) so they do not fall in step with the
poll. They name no stored delivery, so the pool drops each at once (its claim is what
counts here). Each is measured from the start of its enqueue to the moment a claim returned it. Two
modes: `poll`, the pool polling every second with nothing else to wake it (before LISTEN);
`notify`, the pool woken by Postgres's notifications with its 5 s poll as the fallback.

    .venv/bin/python bench/wakeup.py [--jobs 30] [--database-url postgresql://...]
"""

from __future__ import annotations

import argparse
import logging
import random
import secrets
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio
import anyio.to_thread
import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.exactly_once import database_url  # noqa: E402
from bot.runs.worker import Worker, WorkerHooks  # noqa: E402
from bot.store.postgres.store import PostgresStore  # noqa: E402
from bot.store.queue.base import Job  # noqa: E402
from bot.store.queue.postgres import PostgresJobQueue  # noqa: E402
from tests.conftest import with_search_path  # noqa: E402


class Timed(PostgresJobQueue):
    """The queue, noting when each job was claimed."""

    claimed: dict[int, float]

    async def claim(self, worker_id: str, lease_seconds: float) -> Job | None:
        job = await super().claim(worker_id, lease_seconds)
        if job is not None:
            self.claimed[job.id] = time.monotonic()
        return job


async def measure(dsn: str, mode: str, jobs: int) -> list[float]:
    """Seconds from enqueue to claim of each of `jobs` jobs."""
    store = PostgresStore.open(dsn)
    other = PostgresStore.open(dsn)
    queue = Timed(store)
    queue.claimed = {}
    watch = queue.watch if mode == "notify" else None
    worker = Worker(store, queue, WorkerHooks(), app_slug="repo-agent", watch=watch)
    elsewhere = PostgresJobQueue(other)
    latencies: list[float] = []
    try:
        async with anyio.create_task_group() as tasks:
            await tasks.start(worker.run)
            await anyio.sleep(1.0)  # the pool has claimed, found nothing, and waits
            for n in range(jobs):
                await anyio.sleep(random.uniform(0.3, 1.3))
                start = time.monotonic()
                job_id = await anyio.to_thread.run_sync(
                    elsewhere.enqueue_sync, f"{mode}-{n}-{secrets.token_hex(3)}"
                )
                assert job_id is not None
                with anyio.fail_after(30):
                    while job_id not in queue.claimed:  # noqa: ASYNC110 (claim time is its own)
                        await anyio.sleep(0.001)
                latencies.append(queue.claimed[job_id] - start)
            tasks.cancel_scope.cancel()
    finally:
        store.close()
        other.close()
    return latencies


def summary(latencies: list[float]) -> str:
    ms = sorted(x * 1000 for x in latencies)
    p90 = ms[min(len(ms) - 1, int(len(ms) * 0.9))]
    return (
        f"median {statistics.median(ms):.1f} ms, mean {statistics.fmean(ms):.1f} ms,"
        f" p90 {p90:.1f} ms, max {ms[-1]:.1f} ms"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--database-url")
    args = parser.parse_args()
    # The jobs name no stored delivery: the pool logs an error for each and drops it.
    logging.getLogger("bot").setLevel(logging.CRITICAL)
    base, server = database_url(args.database_url)
    try:
        for mode in ("poll", "notify"):
            schema = f"bench_{secrets.token_hex(4)}"  # a fresh schema, dropped afterwards
            with psycopg.connect(base, autocommit=True) as conn:
                conn.execute(f"CREATE SCHEMA {schema}")
            try:
                dsn = with_search_path(base, schema)
                latencies = anyio.run(measure, dsn, mode, args.jobs)
            finally:
                with psycopg.connect(base, autocommit=True) as conn:
                    conn.execute(f"DROP SCHEMA {schema} CASCADE")
            print(f"{mode:>6}: {args.jobs} jobs, enqueue to claim: {summary(latencies)}")
    finally:
        if server is not None:
            subprocess.run(["bash", str(ROOT / "scripts" / "postgres"), "stop", server])
    return 0


if __name__ == "__main__":
    sys.exit(main())
