"""End to end: `bot serve` killed with SIGKILL mid-run, another started on the same data.

A `fix` runs until its plan (read-only, journaled) and its implementer (a writing agent, with a
worktree in the mirror) are done and the reviewer's model call is in flight; then the server
is killed with `kill -9`. A second server on the same data directory claims the job once its
lease has run out, resumes the run from the journal (the plan replays; the implementer, a
writer, runs again), clears what the dead attempt left in the mirror, and finishes: one
draft pull request, one sticky comment that counts the replayed call, no worktree left.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.fakes.fix_model import Edit, FixModel, user_prompt
from tests.fakes.github import FakeGitHub, serve_fake_github
from tests.fakes.gitrepo import commit_files, init_bare_repo
from tests.fakes.llm import FakeLLM, Reply, serve
from tests.scripted import delivery_headers, running_bot

pytestmark = pytest.mark.slow

GREET_FIXED = 'def greet(name):\n    return "hello, " + name\n'


@dataclasses.dataclass
class SlowReview:
    """The fix model, with the reviewer's answer held back while `slow` is set."""

    model: FixModel
    slow: bool = True

    def __call__(self, body: dict[str, Any]) -> Reply:
        reply = self.model(body)
        if self.slow and user_prompt(body).startswith("Check this change"):
            return dataclasses.replace(reply, delay=120.0)
        return reply


def wait(what: str, done: Any, log: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}:\n{log.read_text()[-5000:]}")
        time.sleep(0.05)


@pytest.fixture(params=["sqlite", "postgres", "postgres-elsewhere"])
def database(request: pytest.FixtureRequest) -> dict[str, str]:
    """Extra settings for the backend: none for SQLite (the data dir's file), a fresh
    schema's DSN for Postgres (skipped without a test server, failed under CI's demand).
    With `postgres-elsewhere` the second server runs in another data dir, as on another
    machine: nothing of the first attempt's run folder is there."""
    if request.param == "sqlite":
        return {}
    dsn: str = request.getfixturevalue("postgres_dsn")
    return {"BOT_DATABASE_URL": dsn, **({"elsewhere": "1"} if "elsewhere" in request.param else {})}


def run_status(database: dict[str, str], db_file: Path) -> str:
    """The status of the only run, on either backend."""
    dsn = database.get("BOT_DATABASE_URL")
    if dsn is None:
        with sqlite3.connect(db_file, timeout=10) as conn:
            row = conn.execute("SELECT status FROM runs").fetchone()
    else:
        with psycopg.connect(dsn) as pg:
            row = pg.execute("SELECT status FROM runs").fetchone()
    return str(row[0]) if row else ""


def test_a_killed_server_leaves_a_run_the_next_one_resumes(
    tmp_path: Path, database: dict[str, str]
) -> None:
    bare = init_bare_repo(
        tmp_path / "remote" / "octo" / "hello.git",
        {"app/greet.py": 'def greet(name):\n    return "helo, " + name\n', "README.md": "# hi\n"},
    )
    commit_files(bare, "main", {}, "Start")
    fake = FakeGitHub()
    fake.add_repo("octo", "hello", bare)
    fake.add_installation(42, "octo", ["octo/hello"])
    fake.set_permission("octo", "hello", "maint", "write")
    issue = fake.add_issue("octo", "hello", title="greet says helo", body="x", user="alice")
    model = SlowReview(FixModel((Edit("", {"app/greet.py": GREET_FIXED}),)))
    llm = FakeLLM()
    llm.respond_with(model)
    elsewhere = database.pop("elsewhere", None) is not None
    env = {
        "BOT_APP_SLUG": fake.slug,
        "BOT_GITHUB_WRITE_INTERVAL": "0",
        "BOT_JOB_LEASE_SECONDS": "3",
        **database,
    }
    settings: dict[str, Any] = {
        "app_id": fake.app_id,
        "private_key_pem": fake.private_key_pem,
        "webhook_secret": fake.webhook_secret,
        "extra_env": env,
    }
    with serve_fake_github(fake) as gh_url, serve(llm) as llm_url:
        with running_bot(tmp_path, github_url=gh_url, llm_url=llm_url, **settings) as first:
            fr = fake.repos["octo/hello"]
            comment = fake.add_comment(
                "octo", "hello", issue["number"], f"@{fake.slug} fix", user="maint"
            )
            payload = {
                "action": "created",
                "issue": fr.issues[issue["number"]],
                "comment": comment,
                "repository": fake._repo_stub(fr.full_name, fr),
                "installation": {"id": 42},
                "sender": comment["user"],
            }
            body = json.dumps(payload).encode()
            headers = delivery_headers("issue_comment", "crash-1", fake.webhook_secret, body)
            answer = httpx.post(f"{first.url}/webhooks/github", content=body, headers=headers)
            assert answer.status_code == 202
            wait("the reviewer's call", lambda: model.model.calls["review"] >= 1, first.log)
            runs = tmp_path / "data" / "runs"
            (run_dir,) = list(runs.glob("wf_*"))
            journal = json.loads((run_dir / "journal.json").read_text())
            assert len(journal["entries"]) == 1  # the plan
            mirror = tmp_path / "data" / "repos" / "octo" / "hello.git"
            assert agent_branches(mirror)  # the implementer's commit, kept for the run
            assert first.process is not None
            os.kill(first.process.pid, signal.SIGKILL)
            first.process.wait(timeout=10)
        assert not fake.repos["octo/hello"].pulls

        model.slow = False
        plans = model.model.calls["plan"]
        root = tmp_path / "elsewhere" if elsewhere else tmp_path
        root.mkdir(exist_ok=True)
        with running_bot(root, github_url=gh_url, llm_url=llm_url, **settings) as second:
            wait(
                "the resumed run",
                lambda: run_status(database, second.db) == "succeeded",
                second.log,
                timeout=90,
            )

    assert model.model.calls["plan"] == plans  # replayed, not asked again
    assert len(fake.repos["octo/hello"].pulls) == 1
    own = [
        c
        for c in fake.comments_on("octo", "hello", issue["number"])
        if c["user"]["login"] == fake.bot_login
    ]
    assert len(own) == 1
    assert "(1 replayed)" in own[0]["body"]
    if elsewhere:
        assert not (root / "data" / "runs" / run_dir.name).samefile(run_dir)
        mirror = root / "data" / "repos" / "octo" / "hello.git"
    assert not any((mirror / "bot-worktrees").glob("*/*"))
    assert agent_branches(mirror) == []


def agent_branches(mirror: Path) -> list[str]:
    """The agents' branches in the mirror (`bot/<label>-<run>-<n>`), not the pushed fix's."""
    out = subprocess.run(
        [
            "git",
            f"--git-dir={mirror}",
            "for-each-ref",
            "--format=%(refname:short)",
            "refs/heads/bot/",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [name for name in out if not name.startswith("bot/fix-")]
