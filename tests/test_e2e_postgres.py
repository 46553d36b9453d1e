"""End to end on Postgres: `bot serve` with BOT_DATABASE_URL=postgresql://..., the fake GitHub
and the fake model on 127.0.0.1, one triage from a signed delivery to its comment; and two
`bot worker` processes, one paused past its lease while the other takes its job over."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from bot.store.postgres.store import PostgresStore
from policies.outcome import OUTCOME_STATUSES
from tests.fakes.github import make_fake_github
from tests.fakes.llm import Reply
from tests.scripted import (
    REPO,
    REPO_FILES,
    ModelScript,
    bot_env,
    bot_with_fakes,
    delivery_headers,
    issues_opened,
    metric_sample,
    running_bot,
    serving_fakes,
)

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
    # procrastinate's worker ran the job (bot/runs/procrastinate_pool.py), under uvloop.
    assert '"action": "start_worker"' in log


def start_worker(
    root: Path, options: dict[str, Any], name: str
) -> tuple[subprocess.Popen[bytes], Path]:
    """`bot worker` (the pool alone) as its own process, configured like `running_bot`; the
    process and its log once the pool has started."""
    root.mkdir(parents=True, exist_ok=True)
    env = bot_env(root, **options)
    log = root / f"{name}.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "worker"],
            cwd=root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    wait(f"{name}'s pool", lambda: '"msg": "worker pool started"' in log.read_text(), log)
    return proc, log


def log_records(log: Path) -> list[dict[str, Any]]:
    records = []
    for line in log.read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            records.append(json.loads(line))
    return records


def test_a_worker_paused_past_its_lease_writes_nothing_once_it_resumes(
    postgres_dsn: str, tmp_path: Path
) -> None:
    """Worker A is SIGSTOPped while the model answers its first call; its heartbeat goes
    stale, worker B recovers the job (procrastinate's stalled-job rule) and finishes the run. When A resumes it gets the answer it was
    waiting for, and then makes no model call and no GitHub write: the job is B's."""
    fake = make_fake_github(tmp_path, files=REPO_FILES)
    issue = fake.add_issue(
        "octo", "hello", title="Crash at start-up", body="It crashes.", user="someone"
    )
    gate = threading.Event()
    script = ModelScript()
    first: list[bool] = []

    def responder(body: dict[str, Any]) -> Reply:
        reply = script(body)
        if not first:  # A's first call: answered only once the test says so
            first.append(True)
            return dataclasses.replace(reply, hold=gate)
        return reply

    env = {
        "BOT_DATABASE_URL": postgres_dsn,
        "BOT_JOB_LEASE_SECONDS": "3",
        "BOT_GITHUB_WRITE_INTERVAL": "0",
        "BOT_WORKERS": "1",
    }
    (tmp_path / "intake").mkdir()
    with (
        serving_fakes(fake, responder, extra_env=env) as (llm, options),
        running_bot(tmp_path / "intake", serve_args=["--no-worker"], **options) as intake,
    ):
        a, a_log = start_worker(tmp_path / "a", options, "a")
        b: subprocess.Popen[bytes] | None = None
        try:
            body = json.dumps(issues_opened(issue, "octo/hello", 42)).encode()
            headers = delivery_headers("issues", "pg-fence", fake.webhook_secret, body)
            url = f"{intake.url}/webhooks/github"
            assert httpx.post(url, content=body, headers=headers, timeout=10).status_code == 202
            wait("A's first model call", lambda: len(llm.bodies) == 1, a_log)
            os.kill(a.pid, signal.SIGSTOP)

            def lease_ran_out() -> bool:
                # A's heartbeat in procrastinate's workers table is older than the lease.
                with psycopg.connect(postgres_dsn) as pg:
                    row = pg.execute(
                        "SELECT bool_and(last_heartbeat < now() - interval '3 s')"
                        " FROM procrastinate_workers"
                    ).fetchone()
                return row is not None and row[0] is True

            wait("A's lease to run out", lease_ran_out, a_log)
            b, b_log = start_worker(tmp_path / "b", options, "b")
            store = PostgresStore.open(postgres_dsn)
            try:

                def finished() -> bool:
                    runs = store.runs_for_delivery("pg-fence")
                    return bool(runs) and runs[0].status in OUTCOME_STATUSES

                wait("B's run", finished, b_log, timeout=60)
                (run,) = store.runs_for_delivery("pg-fence")
                assert run.status == "succeeded"
            finally:
                store.close()
            wait("B to complete the job", lambda: job_status(postgres_dsn) == "succeeded", b_log)
            calls, writes = len(llm.bodies), len(fake.writes())
            assert calls == 3  # A's first; B's explorer and verdict

            gate.set()  # A's answer is sent while A is stopped; it reads it when it resumes
            os.kill(a.pid, signal.SIGCONT)
            wait("A to let the job go", lambda: bool(let_go(a_log)), a_log)
            a.terminate()
            a.wait(timeout=10)
        finally:
            for proc in (a, b):
                if proc is not None and proc.poll() is None:
                    os.kill(proc.pid, signal.SIGCONT)
                    proc.kill()
                    proc.wait()

    assert len(llm.bodies) == calls  # A asked the model nothing more
    assert len(fake.writes()) == writes  # and wrote nothing to GitHub
    own = [
        c
        for c in fake.comments_on("octo", "hello", issue["number"])
        if c["user"]["login"] == fake.bot_login
    ]
    assert len(own) == 1 and f"bot:run={run.id} " in own[0]["body"]
    assert "### Triage" in own[0]["body"]
    assert job_status(postgres_dsn) == "succeeded"  # A left B's finished job as it was
    with psycopg.connect(postgres_dsn) as pg:
        (details,) = pg.execute(
            "SELECT body FROM run_artifacts WHERE run_id = %s AND name = 'workflow.json'",
            (run.id,),
        ).fetchone() or ("{}",)
    assert json.loads(details)["status"] == "completed"  # B's account, not A's "aborted"
    (lost,) = let_go(a_log)
    assert (lost["delivery_id"], lost["run_id"]) == ("pg-fence", run.id)


def let_go(log: Path) -> list[dict[str, Any]]:
    """The worker's word that it left a job to whoever holds its lease now."""
    said = "lease lost; another worker may be handling the job"
    return [r for r in log_records(log) if r.get("msg") == said]


def job_status(dsn: str) -> str:
    with psycopg.connect(dsn) as pg:
        row = pg.execute("SELECT status::text FROM procrastinate_jobs").fetchone()
    return "" if row is None else str(row[0])


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
