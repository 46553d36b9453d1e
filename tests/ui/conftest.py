"""A SQLite store with deliveries and runs, and the operator page over it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from bot.settings import Settings
from bot.store.contract import Storage
from bot.store.sqlite import Store
from bot.ui.app import operator_page
from tests.ui.seed import (
    HOSTILE,
    Call,
    add_delivery,
    add_run,
    details,
    put_artifact,
    record_usage,
    transcript_entry,
)
from tests.ui.server import serve

TOKEN = "operator-token-0123456789abcdef"
NOW = float(int(time.time()) - 600)
"""The fixtures' runs ended in the ten minutes before the tests started."""


@dataclass
class Seeded:
    store: Storage
    finished: str
    """A finished triage run with three agent calls, two of them overlapping."""
    hostile: str
    """A run whose issue body, model output and tool results carry HOSTILE."""
    running: str
    """A run in progress (no transcripts yet)."""
    writer: str
    """A fix run with a writing agent's handoff."""


def usage(total: int, cost: float) -> dict[str, object]:
    return {"input": total - total // 10, "output": total // 10, "total": total, "cost": cost}


def seed(store: Storage, now: float = NOW) -> Seeded:
    add_delivery(
        store,
        "d-skip",
        received_at=now - 400,
        repo="octo/app",
        decision="skip",
        reason="draft pull request",
    )
    add_delivery(
        store,
        "d-1",
        received_at=now - 300,
        repo="octo/app",
        decision="trigger",
        workflow="triage",
    )
    finished = add_run(store, "d-1", created_at=now - 300)
    put_artifact(
        store,
        finished,
        "workflow.json",
        details(
            finished,
            [
                Call("explore code", now - 299, now - 280, usage=usage(4000, 0.21)),
                Call(
                    "explore issues", now - 295, now - 285, replayed=True, usage=usage(2500, 0.12)
                ),
                Call("report", now - 279, now - 270, phase="Report", usage=usage(900, 0.09)),
            ],
            started_at=now - 300,
            finished_at=now - 269,
        ),
    )
    put_artifact(
        store,
        finished,
        "transcripts.json",
        json.dumps(
            {
                str(i): transcript_entry(label)
                for i, label in enumerate(["explore code", "explore issues", "report"])
            }
        ),
    )
    put_artifact(store, finished, "report.md", "Workflow triage completed - 3/3 agents ok.\n")
    store.update_run(
        finished,
        status="succeeded",
        outcome={
            "run_id": finished,
            "workflow": "triage",
            "status": "succeeded",
            "summary": "Labelled it **bug**.",
            # What its three calls used, as the executor adds them up (the calls' usage above).
            "usage": {
                "input": 6660,
                "output": 740,
                "total": 7400,
                "cost": 0.42,
                "wall_seconds": 31.0,
                "agents_ok": 3,
                "agents_failed": 0,
                "agents_replayed": 1,
            },
        },
    )
    record_usage(
        store, finished, input_tokens=6660, output_tokens=740, cost=0.42, finished_at=now - 269
    )

    add_delivery(
        store,
        "d-hostile",
        received_at=now - 200,
        repo="evil/repo",
        body={
            "action": "opened",
            "issue": {"number": 7, "body": HOSTILE},
            "repository": {"full_name": "evil/repo"},
        },
        decision="trigger",
        workflow="triage",
    )
    hostile = add_run(store, "d-hostile", repo="evil/repo", number=7, created_at=now - 200)
    put_artifact(
        store,
        hostile,
        "workflow.json",
        details(
            hostile,
            [Call(f"look {HOSTILE[:30]}", now - 199, now - 190)],
            started_at=now - 200,
            finished_at=now - 189,
        ),
    )
    put_artifact(
        store,
        hostile,
        "transcripts.json",
        json.dumps({"0": transcript_entry("look", text=HOSTILE, tool_result=HOSTILE)}),
    )
    store.update_run(
        hostile,
        status="succeeded",
        outcome={
            "run_id": hostile,
            "workflow": "triage",
            "status": "succeeded",
            "summary": HOSTILE,
        },
    )
    record_usage(store, hostile, input_tokens=50, output_tokens=5, cost=0.01, finished_at=now - 189)

    add_delivery(
        store,
        "d-run",
        received_at=now - 100,
        repo="octo/app",
        decision="trigger",
        workflow="review",
    )
    running = add_run(
        store,
        "d-run",
        workflow="review",
        status="running",
        created_at=now - 100,
        target_kind="pull_request",
        number=3,
    )
    put_artifact(
        store,
        running,
        "workflow.json",
        details(
            running,
            [Call("read diff", now - 99, None, state="running")],
            status="running",
            started_at=now - 100,
            current_phase="Explore",
        ),
    )

    add_delivery(
        store, "d-fix", received_at=now - 50, repo="octo/lib", decision="trigger", workflow="fix"
    )
    writer = add_run(store, "d-fix", repo="octo/lib", workflow="fix", created_at=now - 50, number=9)
    put_artifact(
        store,
        writer,
        "workflow.json",
        details(
            writer,
            [Call("implement", now - 49, now - 20)],
            started_at=now - 50,
            finished_at=now - 19,
        ),
    )
    entry = transcript_entry("implement")
    entry["commits"] = ["abc1234 Fix the parser"]
    put_artifact(store, writer, "transcripts.json", json.dumps({"0": entry}))
    put_artifact(
        store,
        writer,
        "worktrees/agent-0.json",
        json.dumps(
            {
                "agent": 0,
                "label": "implement",
                "branch": f"bot/implement-{writer}-0",
                "commits": 1,
                "patch": "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-old = 1\n+new = 2\n",
                "patch_truncated": False,
                "numstat": "1\t1\tx.py",
            }
        ),
    )
    store.update_run(writer, status="succeeded")
    record_usage(
        store, writer, input_tokens=9000, output_tokens=1000, cost=1.5, finished_at=now - 19
    )
    return Seeded(store=store, finished=finished, hostile=hostile, running=running, writer=writer)


def ui_settings(data_dir: Path, token: str = TOKEN) -> Settings:
    return Settings.model_validate({"ui_token": token, "data_dir": str(data_dir)})


@pytest.fixture
def seeded(tmp_path: Path) -> Iterator[Seeded]:
    store = Store.open(tmp_path / "bot.db")
    try:
        yield seed(store)
    finally:
        store.close()


@pytest.fixture
def client(seeded: Seeded, tmp_path: Path) -> Iterator[httpx.Client]:
    app = Starlette(routes=[operator_page(ui_settings(tmp_path), seeded.store)])
    with serve(app) as url, httpx.Client(base_url=url, timeout=10) as c:
        yield c


def sign_in(client: httpx.Client, token: str = TOKEN) -> None:
    r = client.post("/ui/sign-in", data={"token": token}, follow_redirects=False)
    assert r.status_code == 303, r.text
