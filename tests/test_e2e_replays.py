"""End to end: captured signed deliveries sent again under headers of the sender's choosing.

The signature covers the body, not `X-GitHub-Delivery` nor `X-GitHub-Event`: whoever holds a
captured delivery can send it again with any GUID and any event name. Through `bot serve` on
the fakes: a command's body under three GUIDs runs once, and one body under 300 made-up event
names is refused each time, stores nothing and adds no metric label.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from policies.github_events import GITHUB_EVENTS
from policies.outcome import OUTCOME_STATUSES
from tests.fakes.github import FakeGitHub
from tests.fakes.llm import FakeLLM
from tests.scripted import (
    RunningBot,
    bot_with_fakes,
    comment_created,
    delivery_headers,
    metric_sample,
    user_prompt,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[FakeGitHub, FakeLLM, RunningBot]]:
    with bot_with_fakes(tmp_path_factory.mktemp("replays")) as (fake, llm, running):
        fake.set_permission("octo", "hello", "maint", "write")
        yield fake, llm, running


def query(running: RunningBot, sql: str, *args: object) -> list[tuple[Any, ...]]:
    with sqlite3.connect(running.db, timeout=10) as conn:
        return conn.execute(sql, args).fetchall()


def wait(running: RunningBot, what: str, done: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            tail = running.log.read_text(errors="replace")[-4000:]
            raise AssertionError(f"timed out waiting for {what}; server log:\n{tail}")
        time.sleep(0.05)


def decided(running: RunningBot, guid: str) -> bool:
    sql = "SELECT 1 FROM deliveries WHERE guid = ? AND decision IS NOT NULL"
    return bool(query(running, sql, guid))


def post(running: RunningBot, fake: FakeGitHub, event: str, guid: str, body: bytes) -> int:
    headers = delivery_headers(event, guid, fake.webhook_secret, body)
    url = f"{running.url}/webhooks/github"
    return httpx.post(url, content=body, headers=headers, timeout=10).status_code


def test_one_command_body_under_three_guids_runs_once(
    served: tuple[FakeGitHub, FakeLLM, RunningBot],
) -> None:
    fake, llm, running = served
    issue = fake.add_issue("octo", "hello", title="Where?", body="Config.", user="someone")
    comment = fake.add_comment(
        "octo", "hello", issue["number"], "@repo-agent ask where is the config read?", user="maint"
    )
    issue_now = fake.repos["octo/hello"].issues[issue["number"]]
    captured = json.dumps(comment_created(issue_now, comment, "octo/hello", 42)).encode()
    before = len(llm.bodies)
    guids = ["replay-a", "replay-b", "replay-c"]
    for guid in guids:  # sent one after another, so the first is the one that runs
        assert post(running, fake, "issue_comment", guid, captured) == 202
        wait(running, f"a decision on {guid}", lambda: decided(running, guid))  # noqa: B023

    def finished() -> bool:
        rows = query(running, "SELECT status FROM runs WHERE delivery_id = 'replay-a'")
        return bool(rows) and rows[0][0] in OUTCOME_STATUSES

    wait(running, "the ask run", finished)
    rows = query(
        running,
        "SELECT guid, decision, reason FROM deliveries WHERE guid IN (?, ?, ?) ORDER BY guid",
        *guids,
    )
    assert rows == [
        ("replay-a", "trigger", "ask"),
        ("replay-b", "skip", "replayed: delivery replay-a asked for the same ask"),
        ("replay-c", "skip", "replayed: delivery replay-a asked for the same ask"),
    ]
    assert query(running, "SELECT count(*) FROM runs WHERE delivery_id IN (?, ?, ?)", *guids) == [
        (1,)
    ]
    conversations = [
        body for body in llm.bodies[before:] if user_prompt(body).startswith("Answer this question")
    ]
    assert len(conversations) == 1
    answers = [
        c
        for c in fake.comments_on("octo", "hello", issue["number"])
        if c["user"]["login"] == fake.bot_login
    ]
    assert len(answers) == 1 and "### Answer" in answers[0]["body"]


def test_one_body_under_300_made_up_event_names_is_refused_each_time(
    served: tuple[FakeGitHub, FakeLLM, RunningBot],
) -> None:
    fake, _, running = served
    stored = query(running, "SELECT count(*) FROM deliveries")
    body = json.dumps({"action": "opened", "zen": "captured"}).encode()
    names = [f"made_up_event_{n}" for n in range(300)]
    statuses = [post(running, fake, name, f"made-up-{n}", body) for n, name in enumerate(names)]
    assert statuses == [400] * 300
    assert query(running, "SELECT count(*) FROM deliveries") == stored
    page = httpx.get(f"{running.url}/metrics", timeout=10).text
    labels = set(re.findall(r'^bot_deliveries_total\{event="([^"]*)"', page, re.MULTILINE))
    assert labels <= GITHUB_EVENTS | {"unverified"}
    assert not any(name in page for name in names)
    refused = metric_sample(
        page, "bot_deliveries_total", event="unverified", outcome="unknown_event"
    )
    assert refused == 300
