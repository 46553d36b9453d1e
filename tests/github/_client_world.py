"""Shared set-up for the GitHub client tests: a fake GitHub with one issue, and an App on it."""

from __future__ import annotations

from pathlib import Path

import anyio.lowlevel
import httpx

from bot.github.client import GitHubApp, RetryPolicy
from tests.fakes.github import FakeGitHub, make_fake_github

API = "http://github.test"


class Sleeps:
    """Records requested sleeps instead of waiting (the waits themselves are the behaviour)."""

    def __init__(self) -> None:
        self.requested: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.requested.append(seconds)
        await anyio.lowlevel.checkpoint()


def hello_world(tmp_path: Path) -> FakeGitHub:
    """octo/hello (README.md, .github/bot.yml), installation 42, issue #1 by alice."""
    fake = make_fake_github(tmp_path, files={"README.md": "hi\n", ".github/bot.yml": "x: 1\n"})
    fake.add_issue("octo", "hello", title="Crash on start", body="It crashes.", user="alice")
    return fake


def make_app(
    fake: FakeGitHub,
    sleeps: Sleeps | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    **policy: float,
) -> GitHubApp:
    """An App on the fake, in-process, with no write spacing and quick backoff by default."""
    settings = {"mutation_interval_s": 0.0, "backoff_s": 0.01, **policy}
    return GitHubApp(
        fake.app_id,
        fake.private_key_pem,
        api_url=API,
        transport=transport or httpx.ASGITransport(fake.app),
        policy=RetryPolicy(**settings),  # type: ignore[arg-type]
        sleep=sleeps or Sleeps(),
    )
