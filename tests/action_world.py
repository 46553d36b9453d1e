"""The world of the `bot action` end-to-end tests: jobs as GitHub runs them, on the fake GitHub.

Each job gets what GitHub gives one: the event's name and payload file, the job's token (acting
as `github-actions[bot]`), a step summary file and a fresh `RUNNER_TEMP`, and runs `bot action`
as a subprocess. Nothing is shared between jobs but what the app posted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.fakes.github import FakeGitHub
from tests.fakes.llm import FakeLLM
from tests.scripted import REPO

JOB_PERMISSIONS = {
    "contents": "write",
    "pull_requests": "write",
    "issues": "write",
    "checks": "write",
    "metadata": "read",
}
LOGIN = "github-actions[bot]"
PAYLOADS = REPO / "fixtures" / "github-payloads"


@dataclass
class Job:
    """What one job run left: its exit code, its log and its step summary."""

    rc: int
    log: str
    summary: str


@dataclass(kw_only=True)
class Jobs:
    """The repository `octo/hello` on `fake`, the model at `llm_url`, and the jobs run there."""

    root: Path
    fake: FakeGitHub
    github_url: str
    llm_url: str
    llm: FakeLLM
    token: str = ""
    runs: int = 0

    def repository(self) -> dict[str, Any]:
        fr = self.fake.repos["octo/hello"]
        return self.fake._repo_stub(fr.full_name, fr)

    def comment_event(self, body: str, user: str, number: int = 1) -> dict[str, Any]:
        recorded = json.loads((PAYLOADS / "issue_comment" / "created.payload.json").read_text())
        fr = self.fake.repos["octo/hello"]
        comment = self.fake.add_comment("octo", "hello", number, body, user=user)
        return {
            **recorded,
            "issue": fr.issues[number],
            "comment": comment,
            "repository": self.repository(),
            "sender": comment["user"],
        }

    def environ(self, job_dir: Path, event: str, token: str | None = None) -> dict[str, str]:
        """What GitHub gives the step: the job's variables, a fresh RUNNER_TEMP, the model."""
        temp = job_dir / "runner-temp"
        temp.mkdir(parents=True)
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("BOT_", "GITHUB_"))}
        environ.update(
            GITHUB_ACTIONS="true",
            GITHUB_EVENT_NAME=event,
            GITHUB_EVENT_PATH=str(job_dir / "event.json"),
            GITHUB_TOKEN=token or self.token,
            GITHUB_REPOSITORY="octo/hello",
            GITHUB_API_URL=self.github_url,
            GITHUB_SERVER_URL=self.github_url,
            GITHUB_RUN_ID=str(9000 + self.runs),
            GITHUB_STEP_SUMMARY=str(job_dir / "step-summary.md"),
            RUNNER_TEMP=str(temp),
            BOT_MODEL="fake-model",
            BOT_LLM_BASE_URL=self.llm_url,
            BOT_LLM_API_KEY="sk-test-action-key-0123456789",
            BOT_GITHUB_WRITE_INTERVAL="0",
            PYTHONPATH=str(REPO),
        )
        return environ

    def job(
        self,
        event: str,
        payload: dict[str, Any] | str | None,
        *,
        token: str | None = None,
        env: dict[str, str] | None = None,
        args: tuple[str, ...] = (),
    ) -> Job:
        """`bot action` as a job step: a fresh RUNNER_TEMP and step summary each time."""
        self.runs += 1
        job_dir = self.root / f"job-{self.runs}"
        environ = {**self.environ(job_dir, event, token), **(env or {})}
        temp = Path(environ["RUNNER_TEMP"])
        summary = Path(environ["GITHUB_STEP_SUMMARY"])
        if payload is not None:
            text = payload if isinstance(payload, str) else json.dumps(payload)
            Path(environ["GITHUB_EVENT_PATH"]).write_text(text)
        done = subprocess.run(
            [sys.executable, "-m", "bot.cli", "action", *args],
            cwd=job_dir,
            env=environ,
            capture_output=True,
            text=True,
            timeout=240,
        )
        left = list(temp.iterdir())
        assert left == [], f"the job left {left} in RUNNER_TEMP"
        text = summary.read_text() if summary.exists() else ""
        return Job(done.returncode, done.stdout + done.stderr, text)

    def own_comments(self, number: int = 1) -> list[dict[str, Any]]:
        comments = self.fake.comments_on("octo", "hello", number)
        return [c for c in comments if c["user"]["login"] == LOGIN]
