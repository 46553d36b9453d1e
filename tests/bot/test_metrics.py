"""`GET /metrics` of one process: deliveries by event and outcome, the queue read at scrape time
(on both backends).

Several processes adding up their values is tested on real processes in test_receivers.py.
Values are this process's, shared by every test in it, so the tests compare before and after.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from bot import metrics
from bot.intake.web import create_app
from bot.settings import Settings
from bot.store.backend import job_queue
from bot.store.contract import Storage
from bot.store.postgres.store import PostgresStore
from bot.store.sqlite import Store
from policies.github_events import GITHUB_EVENTS
from tests.backends import end_job, take_job
from tests.scripted import metric_sample

pytestmark = pytest.mark.anyio

SECRET = "metrics-secret"


@asynccontextmanager
async def client(
    data_dir: Path, postgres_dsn: str | None = None, *, clock: Callable[[], float] = time.time
) -> AsyncIterator[tuple[httpx.AsyncClient, Storage]]:
    store: Storage = (
        Store.open(data_dir / "bot.sqlite3", clock=clock)
        if postgres_dsn is None
        else PostgresStore.open(postgres_dsn, clock=clock)
    )
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


async def post(
    http: httpx.AsyncClient, body: bytes, guid: str, *, secret: str = SECRET, event: str = "issues"
) -> int:
    signature = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "X-GitHub-Event": event,
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


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_queue_gauges_are_read_from_the_store_when_scraped(
    backend: str, data_dir: Path, request: pytest.FixtureRequest
) -> None:
    dsn = request.getfixturevalue("postgres_dsn") if backend == "postgres" else None
    now = [1000.0]  # the store's clock: the scrape reads the queue at this time
    async with client(data_dir, dsn, clock=lambda: now[0]) as (http, store):
        empty = await page(http)
        assert metric_sample(empty, "bot_queue_depth") == 0
        assert metric_sample(empty, "bot_queue_oldest_seconds") == 0
        queue = job_queue(store)
        queue.enqueue_sync("d-1")
        queue.enqueue_sync("d-2")
        now[0] = 1001.0
        take_job(store)  # running
        end_job(store, take_job(store), "dead", "no")
        queue.enqueue_sync("d-3")  # waiting since 1001
        queue.enqueue_sync("d-4")
        now[0] = 1031.0
        late = take_job(store)  # d-3, so the oldest ready is d-4
        assert late.delivery_id == "d-3"
        end_job(store, late, "retry", "again")  # queued, not ready before its backoff
        full = await page(http)
    assert metric_sample(full, "bot_jobs", status="queued") == 2
    assert metric_sample(full, "bot_jobs", status="running") == 1
    assert metric_sample(full, "bot_jobs", status="dead") == 1
    assert metric_sample(full, "bot_queue_depth") == 1
    assert metric_sample(full, "bot_queue_oldest_seconds") == pytest.approx(30.0)


def event_labels(page: str) -> set[str]:
    return set(re.findall(r'^bot_deliveries_total\{event="([^"]*)"', page, re.MULTILINE))


async def test_made_up_event_names_are_refused_and_never_become_labels(data_dir: Path) -> None:
    def refused(text: str) -> float:
        found = metric_sample(
            text, "bot_deliveries_total", event=metrics.UNVERIFIED, outcome="unknown_event"
        )
        return found or 0.0

    async with client(data_dir) as (http, store):
        before = await page(http)
        body = b'{"action":"opened"}'
        names = [f"made_up_{n}" for n in range(300)]
        assert [await post(http, body, f"u-{n}", event=e) for n, e in enumerate(names)] == [
            400
        ] * 300
        after = await page(http)
        assert store.count_deliveries() == 0
    assert refused(after) - refused(before) == 300
    assert event_labels(after) <= GITHUB_EVENTS | {metrics.UNVERIFIED}
    assert not any(name in after for name in names)


def test_a_name_outside_github_s_list_is_counted_as_unverified() -> None:
    metrics.delivery("not_an_event", "accepted")
    page = metrics.render(None).decode()
    assert "not_an_event" not in page
    assert event_labels(page) <= GITHUB_EVENTS | {metrics.UNVERIFIED}
