"""`bot worker --port N` as its own process: /healthz, /readyz and /metrics, with the counters
of the runs it carried out. A receiver (`bot serve --no-worker`) stores a signed delivery in
the same SQLite database, the worker runs it on the fake GitHub and the fake model, and the
worker's page, not the receiver's, counts the run, its agent calls and its GitHub requests."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx
import pytest

from bot.runs.worker_http import PoolState, create_worker_app
from bot.store.queue.sqlite import SqliteJobQueue
from bot.store.sqlite import Store
from policies.outcome import OUTCOME_STATUSES
from tests.fakes.github import make_fake_github
from tests.scripted import (
    REPO_FILES,
    ModelScript,
    bot_env,
    delivery_headers,
    free_port,
    issues_opened,
    metric_sample,
    running_bot,
    serving_fakes,
)


def wait(
    what: str,
    done: Callable[[], bool],
    log: Path,
    proc: subprocess.Popen[bytes],
    timeout: float = 60.0,
) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-6000:]
            raise AssertionError(f"timed out waiting for {what}; log:\n{tail}")
        time.sleep(0.05)


def answers(url: str) -> int | None:
    try:
        return httpx.get(url, timeout=2).status_code
    except httpx.HTTPError:
        return None


@contextmanager
def running_worker(
    root: Path, options: dict[str, Any], args: list[str], env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """`bot worker [args]` in `root` (its data in `root/data`), configured like `running_bot`;
    stopped with SIGTERM afterwards, and its exit status checked."""
    environ = {**bot_env(root, **options), **(env or {})}
    log = root / "worker.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "worker", *args],
            cwd=root,
            env=environ,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield proc, log
    finally:
        proc.terminate()
        try:
            status = proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError(
                f"bot worker did not stop on SIGTERM:\n{log.read_text()}"
            ) from None
    assert status == 0, log.read_text()


@pytest.mark.slow
def test_a_worker_serves_health_readiness_and_the_metrics_of_its_runs(tmp_path: Path) -> None:
    fake = make_fake_github(tmp_path, files=REPO_FILES)
    issue = fake.add_issue(
        "octo", "hello", title="Crash at start-up", body="It crashes.", user="someone"
    )
    env = {"BOT_APP_SLUG": fake.slug, "BOT_GITHUB_WRITE_INTERVAL": "0"}
    port = free_port()
    worker_url = f"http://127.0.0.1:{port}"
    with (
        serving_fakes(fake, ModelScript(), extra_env=env) as (llm, options),
        running_bot(tmp_path, serve_args=["--no-worker", "--receivers", "1"], **options) as intake,
        running_worker(tmp_path, options, ["--port", str(port)]) as (proc, log),
    ):
        wait("the worker's /readyz", lambda: answers(f"{worker_url}/readyz") == 200, log, proc)
        ready = httpx.get(f"{worker_url}/readyz", timeout=5)
        assert ready.json() == {"status": "ready"}
        health = httpx.get(f"{worker_url}/healthz", timeout=5)
        assert (health.status_code, health.text) == (200, "ok")

        body = json.dumps(issues_opened(issue, "octo/hello", 42)).encode()
        headers = delivery_headers("issues", "worker-0001", fake.webhook_secret, body)
        posted = httpx.post(
            f"{intake.url}/webhooks/github", content=body, headers=headers, timeout=10
        )
        assert posted.status_code == 202

        def status() -> str | None:
            with sqlite3.connect(intake.db, timeout=10) as conn:
                rows = conn.execute(
                    "SELECT status FROM runs WHERE delivery_id = 'worker-0001'"
                ).fetchall()
            return str(rows[0][0]) if rows else None

        wait("the triage run", lambda: status() in OUTCOME_STATUSES, log, proc)
        assert status() == "succeeded"

        page = httpx.get(f"{worker_url}/metrics", timeout=10)
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/plain; version=0.0.4")
        text = page.text
        assert metric_sample(text, "bot_runs_started_total", workflow="triage") == 1
        assert metric_sample(text, "bot_runs_total", workflow="triage", status="succeeded") == 1
        assert metric_sample(text, "bot_run_duration_seconds_count", workflow="triage") == 1
        assert (metric_sample(text, "bot_agent_calls_total", status="ok") or 0) >= 2
        assert (metric_sample(text, "bot_agent_tokens_total", kind="input") or 0) > 0
        assert (
            metric_sample(text, "bot_github_requests_total", method="POST", status="201") or 0
        ) >= 1
        # The queue, read from the store when scraped: the job is done.
        assert metric_sample(text, "bot_queue_depth") == 0
        assert metric_sample(text, "bot_jobs", status="running") == 0

        # The receiver only received: the run's counters are in the worker's process alone.
        received = httpx.get(f"{intake.url}/metrics", timeout=10).text
        assert (
            metric_sample(received, "bot_runs_total", workflow="triage", status="succeeded") is None
        )
        assert (
            metric_sample(received, "bot_deliveries_total", event="issues", outcome="accepted") == 1
        )
        assert len(llm.bodies) >= 2


@pytest.mark.slow
def test_bot_worker_port_setting_serves_health_on_bot_host(tmp_path: Path) -> None:
    fake = make_fake_github(tmp_path, files=REPO_FILES)
    port = free_port()
    env = {"BOT_WORKER_PORT": str(port), "BOT_HOST": "127.0.0.1"}
    with (
        serving_fakes(fake, ModelScript()) as (_, options),
        running_worker(tmp_path, options, [], env) as (proc, log),
    ):
        url = f"http://127.0.0.1:{port}"
        wait("the worker's /readyz", lambda: answers(f"{url}/readyz") == 200, log, proc)
        assert answers(f"{url}/healthz") == 200
        assert answers(f"{url}/webhooks/github") == 404  # a worker receives nothing


@pytest.mark.anyio
async def test_readyz_says_ready_only_while_the_pool_runs_and_the_store_answers(
    tmp_path: Path,
) -> None:
    store = Store.open(tmp_path / "bot.sqlite3")
    pool = PoolState()
    app = create_worker_app(store, SqliteJobQueue(store).stats_sync, pool)
    transport = httpx.ASGITransport(app=app)

    async def run_until(
        stop: anyio.Event, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started()
        await stop.wait()

    async def ready(client: httpx.AsyncClient) -> tuple[int, object]:
        answer = await client.get("/readyz")
        return answer.status_code, answer.json()

    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://worker") as client:
            assert await ready(client) == (503, {"status": "unavailable"})  # not started yet
            async with anyio.create_task_group() as tasks:
                stop = anyio.Event()
                await tasks.start(pool.watched, lambda **kw: run_until(stop, **kw))
                assert await ready(client) == (200, {"status": "ready"})
                stop.set()
            assert await ready(client) == (503, {"status": "unavailable"})  # the pool ended
            assert (await client.get("/healthz")).status_code == 200  # the process still answers

            async with anyio.create_task_group() as tasks:
                stop = anyio.Event()
                await tasks.start(pool.watched, lambda **kw: run_until(stop, **kw))
                store.conn().execute("DROP TABLE deliveries")  # the store no longer answers
                assert await ready(client) == (503, {"status": "unavailable"})
                stop.set()
    finally:
        store.close()
