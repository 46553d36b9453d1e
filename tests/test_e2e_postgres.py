"""End to end on Postgres: `bot serve` with BOT_DATABASE_URL=postgresql://..., the fake GitHub
and the fake model on 127.0.0.1, one triage from a signed delivery to its comment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from bot.postgres.store import PostgresStore
from policies.outcome import OUTCOME_STATUSES
from tests.scripted import REPO, bot_with_fakes, delivery_headers, issues_opened, metric_sample

pytestmark = pytest.mark.slow


def wait(what: str, done: Callable[[], bool], log: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-4000:]
            raise AssertionError(f"timed out waiting for {what}; server log:\n{tail}")
        time.sleep(0.05)


def deliveries_json(dsn: str, cwd: Path) -> list[dict[str, object]]:
    """`bot deliveries --json` as its own process, pointed at the same database."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOT_")}
    env.update({"BOT_DATABASE_URL": dsn, "PYTHONPATH": str(REPO)})
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "deliveries", "--json"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_serve_on_postgres_triages_an_issue_once(postgres_dsn: str, tmp_path: Path) -> None:
    env = {"BOT_DATABASE_URL": postgres_dsn}
    with bot_with_fakes(tmp_path, extra_env=env) as (fake, _, running):
        issue = fake.add_issue(
            "octo", "hello", title="Crash at start-up", body="It crashes.", user="someone"
        )
        body = json.dumps(issues_opened(issue, "octo/hello", 42)).encode()
        headers = delivery_headers("issues", "pg-0001", fake.webhook_secret, body)
        url = f"{running.url}/webhooks/github"
        assert httpx.post(url, content=body, headers=headers, timeout=10).status_code == 202

        store = PostgresStore.open(postgres_dsn)
        try:

            def finished() -> bool:
                runs = store.runs_for_delivery("pg-0001")
                return bool(runs) and runs[0].status in OUTCOME_STATUSES

            wait("the triage run", finished, running.log)
            (run,) = store.runs_for_delivery("pg-0001")
            assert (run.workflow, run.status) == ("triage", "succeeded")
            delivery = store.get_delivery("pg-0001")
            assert delivery is not None and delivery.body == body
            assert (delivery.decision, delivery.workflow) == ("trigger", "triage")
        finally:
            store.close()
        own = [
            c
            for c in fake.comments_on("octo", "hello", issue["number"])
            if c["user"]["login"] == fake.bot_login
        ]
        assert len(own) == 1 and "### Triage" in own[0]["body"]

        # GitHub redelivering it: acknowledged as a duplicate, stored and run once.
        again = httpx.post(url, content=body, headers=headers, timeout=10)
        assert (again.status_code, again.json()) == (200, {"status": "duplicate"})

        def job_done() -> bool:
            rows = deliveries_json(postgres_dsn, tmp_path)
            job = rows[0]["job"] if rows else None
            return isinstance(job, dict) and job["status"] == "done"

        wait("the job to complete", job_done, running.log)
        (row,) = deliveries_json(postgres_dsn, tmp_path)
        assert (row["delivery_id"], row["decision"]) == ("pg-0001", "trigger")
        assert row["runs"] == [{"run_id": run.id, "status": "succeeded"}]
        assert row["job"] == {
            "status": "done",
            "attempts": 1,
            "max_attempts": 5,
            "last_error": None,
        }
        # The queue's gauges, read from Postgres when scraped: nothing waits, nothing runs.
        page = httpx.get(f"{running.url}/metrics", timeout=10).text
        assert metric_sample(page, "bot_jobs", status="queued") == 0
        assert metric_sample(page, "bot_jobs", status="running") == 0
        assert metric_sample(page, "bot_queue_depth") == 0
        assert metric_sample(page, "bot_queue_oldest_seconds") == 0
        log = running.log.read_text()
    # Everything lived in Postgres: no SQLite file was made.
    assert not (tmp_path / "data" / "bot.sqlite3").exists()
    assert '"database": "postgresql://bot@/' in log
    # The pool listened for jobs committed anywhere (bot/postgres/listen.py), under uvloop.
    assert '"msg": "listening for new jobs"' in log


def test_serve_on_postgres_stores_a_signed_action_with_a_nul_and_decides_it(
    postgres_dsn: str, tmp_path: Path
) -> None:
    env = {"BOT_DATABASE_URL": postgres_dsn}
    with bot_with_fakes(tmp_path, extra_env=env) as (fake, _, running):
        issue = fake.add_issue("octo", "hello", title="Crash", body="It crashes.", user="someone")
        payload = {**issues_opened(issue, "octo/hello", 42), "action": "open\u0000ed"}
        body = json.dumps(payload).encode()
        assert b"\\u0000" in body
        headers = delivery_headers("issues", "pg-nul", fake.webhook_secret, body)
        url = f"{running.url}/webhooks/github"
        # Once, not a 503 that GitHub would show as failed and redeliver for ever.
        answer = httpx.post(url, content=body, headers=headers, timeout=10)
        assert (answer.status_code, answer.json()) == (202, {"status": "accepted"})
        store = PostgresStore.open(postgres_dsn)
        try:

            def decided() -> bool:
                delivery = store.get_delivery("pg-nul")
                return delivery is not None and delivery.decision is not None

            wait("the decision", decided, running.log)
            delivery = store.get_delivery("pg-nul")
            assert delivery is not None and delivery.body == body
            assert delivery.action == "open\ufffded"
            assert (delivery.decision, delivery.reason) == (
                "skip",
                "unsupported_action: issues.open\ufffded",
            )
            assert store.runs_for_delivery("pg-nul") == []
        finally:
            store.close()
        again = httpx.post(url, content=body, headers=headers, timeout=10)
        assert (again.status_code, again.json()) == (200, {"status": "duplicate"})
