"""`GET /metrics` of one process: deliveries by event and outcome, the queue read at scrape time.

Several processes adding up their values is tested on real processes in test_receivers.py.
Values are this process's, shared by every test in it, so the tests compare before and after.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from bot.queue.sqlite import SqliteJobQueue
from bot.settings import Settings
from bot.store import Store
from bot.web import create_app
from tests.scripted import metric_sample

pytestmark = pytest.mark.anyio

SECRET = "metrics-secret"


@asynccontextmanager
async def client(data_dir: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Store]]:
    store = Store.open(data_dir / "bot.sqlite3")
    app = create_app(Settings(webhook_secret=SECRET), store)
    try:
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://testserver"
            ) as http,
        ):
            yield http, store
    finally:
        store.close()


async def post(http: httpx.AsyncClient, body: bytes, guid: str, *, secret: str = SECRET) -> int:
    signature = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "X-GitHub-Event": "issues",
        "X-GitHub-Delivery": guid,
        "X-Hub-Signature-256": signature,
    }
    response = await http.post("/webhooks/github", content=body, headers=headers)
    return response.status_code


async def page(http: httpx.AsyncClient) -> str:
    response = await http.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return response.text


async def test_deliveries_are_counted_by_event_and_outcome(data_dir: Path) -> None:
    def count(text: str, event: str, outcome: str) -> float:
        return metric_sample(text, "bot_deliveries_total", event=event, outcome=outcome) or 0.0

    async with client(data_dir) as (http, _):
        before = await page(http)
        body = b'{"action":"opened","repository":{"full_name":"octo/private-repo"}}'
        assert await post(http, body, "m-1") == 202
        assert await post(http, body, "m-1") == 200
        assert await post(http, b"[1]", "m-2") == 400
        assert await post(http, body, "m-3", secret="wrong") == 401
        after = await page(http)
    assert count(after, "issues", "accepted") - count(before, "issues", "accepted") == 1
    assert count(after, "issues", "duplicate") - count(before, "issues", "duplicate") == 1
    assert count(after, "issues", "not_json") - count(before, "issues", "not_json") == 1
    # A delivery whose signature did not check out names no event: anyone can send one.
    assert (
        count(after, "unverified", "bad_signature") - count(before, "unverified", "bad_signature")
        == 1
    )
    stored = (metric_sample(after, "bot_intake_seconds_count") or 0) - (
        metric_sample(before, "bot_intake_seconds_count") or 0
    )
    assert stored == 2
    assert "private-repo" not in after and "m-1" not in after


async def test_queue_gauges_are_read_from_the_store_when_scraped(data_dir: Path) -> None:
    async with client(data_dir) as (http, store):
        empty = await page(http)
        assert metric_sample(empty, "bot_queue_depth") == 0
        assert metric_sample(empty, "bot_queue_oldest_seconds") == 0
        queue = SqliteJobQueue(store, clock=lambda: 1000.0)
        queue.enqueue_sync("d-1")
        queue.enqueue_sync("d-2")
        SqliteJobQueue(store, clock=lambda: 1001.0).claim_sync("w", 60)
        full = await page(http)
    assert metric_sample(full, "bot_jobs", status="queued") == 1
    assert metric_sample(full, "bot_jobs", status="running") == 1
    assert metric_sample(full, "bot_jobs", status="dead") == 0
    assert metric_sample(full, "bot_queue_depth") == 1
    oldest = metric_sample(full, "bot_queue_oldest_seconds")
    assert oldest is not None and oldest > 1_000_000  # enqueued at t=1000, read at today's time
