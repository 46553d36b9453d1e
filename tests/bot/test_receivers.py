"""`bot serve --receivers 2` as a real process tree on 127.0.0.1, against the fakes.

Two receiver processes share the port and the SQLite file; the worker pool runs in the
parent. Every delivery is stored once and decided once whichever receiver took it, the pool
is woken by the receivers' commits, `/metrics` adds up every process's counters, and SIGTERM
(or the parent's death) stops every process.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.store.sqlite import Store
from tests.conftest import PAYLOADS
from tests.scripted import (
    RunningBot,
    bot_with_fakes,
    delivery_headers,
    issues_opened,
    metric_sample,
)
from tests.test_e2e import Bot

pytestmark = pytest.mark.slow

PINGS = 240


def serving(running: RunningBot) -> dict[str, Any]:
    (line,) = [line for line in running.log_lines() if line["msg"] == "serving"]
    return line


def logged(running: RunningBot, msg: str) -> list[dict[str, Any]]:
    return [line for line in running.log_lines() if line["msg"] == msg]


def all_started(running: RunningBot) -> list[int]:
    """The receivers' pids, once every one of them accepts connections (`running_bot` waits
    for the first only)."""
    pids = serving(running)["receiver_pids"]
    wait_until(
        "every receiver to start",
        lambda: (
            {line["pid"] for line in logged(running, "Application startup complete.")} >= set(pids)
        ),
    )
    return list(pids)


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie, dead but not yet reaped by its parent, is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def wait_until(what: str, done: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Bot, RunningBot]]:
    root = tmp_path_factory.mktemp("receivers")
    with bot_with_fakes(root, serve_args=["--receivers", "2"]) as (fake, llm, running):
        all_started(running)
        yield Bot(running.url, fake, llm, running.db, running.log), running


@pytest.fixture(scope="module")
def pinged(tree: tuple[Bot, RunningBot]) -> list[str]:
    """PINGS deliveries posted 16 at a time, each on its own connection; their ids."""
    bot, _ = tree
    body = json.dumps({"zen": "Keep it logically awesome.", "hook_id": 7}).encode()
    guids = [f"ping-{n:04d}" for n in range(PINGS)]

    def post(guid: str) -> int:
        headers = delivery_headers("ping", guid, bot.fake.webhook_secret, body)
        return httpx.post(f"{bot.url}/webhooks/github", content=body, headers=headers).status_code

    with ThreadPoolExecutor(16) as pool:
        statuses = list(pool.map(post, guids))
    assert statuses == [202] * PINGS
    return guids


def test_each_delivery_is_stored_and_decided_once_whichever_receiver_took_it(
    tree: tuple[Bot, RunningBot], pinged: list[str]
) -> None:
    bot, running = tree
    bot.wait(
        "every ping decided",
        lambda: (
            bot.query("SELECT count(*) FROM deliveries WHERE decision IS NOT NULL") == [(PINGS,)]
        ),
    )
    rows = bot.query("SELECT guid, decision FROM deliveries")
    assert sorted(guid for guid, _ in rows) == pinged
    assert {decision for _, decision in rows} == {"skip"}
    assert bot.query("SELECT count(*), count(DISTINCT delivery_id) FROM jobs") == [(PINGS, PINGS)]

    # Info lines are written up to 0.2 s late (bot/log.py), later on a busy machine: wait for
    # the receivers' lines and the pool's alike.
    wait_until("every delivery's log line", lambda: len(logged(running, "delivery")) == PINGS)
    wait_until("every decision's log line", lambda: len(logged(running, "skipped")) >= PINGS)
    lines = running.log_lines()
    parent = serving(running)
    receivers = set(parent["receiver_pids"])
    assert len(receivers) == 2 and parent["pid"] not in receivers
    took = Counter(line["pid"] for line in lines if line["msg"] == "delivery")
    assert set(took) == receivers, took  # both receivers answered some
    assert sum(took.values()) == PINGS
    # The pool runs in the parent only, and decided each delivery once.
    decided = Counter(line["delivery_id"] for line in lines if line["msg"] == "skipped")
    assert decided == dict.fromkeys(pinged, 1)
    assert {line["pid"] for line in lines if line["msg"] == "skipped"} == {parent["pid"]}


def test_a_run_from_a_receivers_delivery_completes_in_the_parent(
    tree: tuple[Bot, RunningBot], pinged: list[str]
) -> None:
    bot, running = tree
    fake = bot.fake
    issue = fake.add_issue("octo", "hello", title="Crash", body="It crashes.", user="someone")
    assert bot.post("issues", issues_opened(issue, "octo/hello", 42)).status_code == 202
    _, status = bot.finished_run(f"e2e-{bot.counter:04d}")
    assert status == "succeeded"
    (comment,) = bot.own(issue["number"])
    assert "config.yml" in comment["body"]
    wait_until("the run's log line", lambda: logged(running, "run published"))
    runs = logged(running, "run published")
    assert {line["pid"] for line in runs} == {serving(running)["pid"]}


def test_metrics_add_up_every_process(tree: tuple[Bot, RunningBot], pinged: list[str]) -> None:
    bot, _ = tree
    fake = bot.fake
    issue = fake.add_issue("octo", "hello", title="Slow", body="It is slow.", user="someone")
    bot.post("issues", issues_opened(issue, "octo/hello", 42))
    bot.finished_run(f"e2e-{bot.counter:04d}")
    forged = httpx.post(
        f"{bot.url}/webhooks/github",
        content=b"{}",
        headers={
            "X-GitHub-Event": "issues",
            "X-GitHub-Delivery": "forged-1",
            "X-Hub-Signature-256": "sha256=" + "0" * 64,
        },
    )
    assert forged.status_code == 401
    made_up = httpx.post(
        f"{bot.url}/webhooks/github",
        content=b"{}",
        headers={
            "X-GitHub-Event": "made_up_event",
            "X-GitHub-Delivery": "forged-2",
            "X-Hub-Signature-256": "sha256=" + "0" * 64,
        },
    )
    assert made_up.status_code == 400  # not one of GitHub's events: refused before the body

    posted = bot.query("SELECT count(*) FROM deliveries WHERE event = 'issues'")[0][0]
    runs = bot.query("SELECT count(*) FROM runs WHERE status = 'succeeded'")[0][0]
    # Each scrape is answered by either receiver; every one counts everything.
    for _ in range(6):
        # Fresh connections, so that the scrapes land on both receivers.
        page = httpx.get(f"{bot.url}/metrics", headers={"Connection": "close"}).text
        assert (
            metric_sample(page, "bot_deliveries_total", event="ping", outcome="accepted") == PINGS
        )
        assert (
            metric_sample(page, "bot_deliveries_total", event="issues", outcome="accepted")
            == posted
        )
        assert (
            metric_sample(page, "bot_deliveries_total", event="unverified", outcome="bad_signature")
            == 1
        )
        assert (
            metric_sample(page, "bot_deliveries_total", event="unverified", outcome="unknown_event")
            == 1
        )
        assert "made_up_event" not in page
        assert metric_sample(page, "bot_intake_seconds_count") == PINGS + posted
        # Recorded by the pool in the parent process.
        assert metric_sample(page, "bot_runs_total", workflow="triage", status="succeeded") == runs
        assert metric_sample(page, "bot_run_duration_seconds_count", workflow="triage") == runs
        assert (metric_sample(page, "bot_agent_calls_total", status="ok") or 0) >= runs
        assert (metric_sample(page, "bot_agent_tokens_total", kind="output") or 0) > 0
        assert (
            metric_sample(page, "bot_github_requests_total", method="POST", status="201") or 0
        ) >= 1
        # Read from the store at scrape time.
        assert metric_sample(page, "bot_jobs", status="queued") == 0
        assert metric_sample(page, "bot_queue_depth") == 0
        assert metric_sample(page, "bot_jobs_dead_total") == 0
        # Nothing that names a repository, a person or a delivery.
        for private in ("octo", "hello", "someone", "ping-0", "e2e-", "made_up_event"):
            assert private not in page


def test_sigterm_stops_every_process(tmp_path: Path) -> None:
    with bot_with_fakes(tmp_path, serve_args=["--receivers", "2"]) as (fake, _, running):
        pids = all_started(running)
        body = json.dumps({"zen": "Design for failure.", "hook_id": 7}).encode()
        headers = delivery_headers("ping", "last-one", fake.webhook_secret, body)
        response = httpx.post(f"{running.url}/webhooks/github", content=body, headers=headers)
        assert response.status_code == 202
        running.process.send_signal(signal.SIGTERM)
        assert running.process.wait(timeout=30) == 0
        wait_until("the receivers to exit", lambda: not any(alive(pid) for pid in pids))
        host, port = running.url.removeprefix("http://").split(":")
        with pytest.raises(ConnectionRefusedError), socket.create_connection((host, int(port))):
            pass
    messages = [line["msg"] for line in running.log_lines()]
    assert messages.count("Application shutdown complete.") == 2
    assert "stopped" in messages
    assert not [line for line in running.log_lines() if line["level"] == "error"]


def test_receivers_stop_when_the_parent_is_killed(tmp_path: Path) -> None:
    with bot_with_fakes(tmp_path, serve_args=["--receivers", "2", "--no-worker"]) as (
        _,
        _,
        running,
    ):
        pids = serving(running)["receiver_pids"]
        running.process.send_signal(signal.SIGKILL)
        running.process.wait()
        wait_until("the orphaned receivers to exit", lambda: not any(alive(pid) for pid in pids))


def test_fsync_durability_stores_and_decides(tmp_path: Path) -> None:
    env = {"BOT_DURABILITY": "fsync"}
    with bot_with_fakes(tmp_path, extra_env=env, serve_args=["--receivers", "2"]) as (
        fake,
        llm,
        running,
    ):
        assert serving(running)["durability"] == "fsync"
        # A large body goes to a segment file, which is synced before its row commits.
        body = json.dumps({"zen": "x" * 50_000, "hook_id": 7}).encode()
        headers = delivery_headers("ping", "durable-1", fake.webhook_secret, body)
        response = httpx.post(f"{running.url}/webhooks/github", content=body, headers=headers)
        assert response.status_code == 202
        bot = Bot(running.url, fake, llm, running.db, running.log)
        bot.wait("a decision", lambda: bot.decided("durable-1") == "skip")


def test_an_unknown_durability_is_refused_before_anything_starts(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOT_")}
    env.update({"BOT_DURABILITY": "sometimes", "BOT_DATA_DIR": str(tmp_path / "data")})
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "serve", "--receivers", "2", "--port", "0"],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "BOT_DURABILITY" in done.stderr and "fsync" in done.stderr


def test_kill_9_of_every_process_right_after_202s_loses_nothing(tmp_path: Path) -> None:
    body = (PAYLOADS / "issues" / "opened.payload.json").read_bytes()
    guids = [f"k9-{n:03d}" for n in range(80)]
    with bot_with_fakes(tmp_path, serve_args=["--receivers", "2", "--no-worker"]) as (
        fake,
        _,
        running,
    ):
        pids = serving(running)["receiver_pids"]

        def post(guid: str) -> int:
            headers = delivery_headers("issues", guid, fake.webhook_secret, body)
            url = f"{running.url}/webhooks/github"
            return httpx.post(url, content=body, headers=headers).status_code

        with ThreadPoolExecutor(16) as pool:
            statuses = list(pool.map(post, guids))
        for pid in [*pids, running.process.pid]:
            os.kill(pid, signal.SIGKILL)
        running.process.wait()
        wait_until("the receivers to die", lambda: not any(alive(pid) for pid in pids))
    assert statuses == [202] * len(guids)
    conn = sqlite3.connect(running.db)
    try:
        stored = {row[0] for row in conn.execute("SELECT delivery_id FROM jobs")}
        bodies = conn.execute("SELECT count(*) FROM deliveries").fetchone()[0]
    finally:
        conn.close()
    assert stored == set(guids) and bodies == len(guids)
    store = Store.open(running.db)
    try:
        assert {store.get_delivery(g).body for g in guids} == {body}  # type: ignore[union-attr]
    finally:
        store.close()
