"""End to end through `bot serve`, the fake GitHub and the fake model: a delivery run again.

GitHub's Redeliver keeps the GUID: a GUID whose run failed is run again and answered 202,
one whose work went well is a duplicate (200). On the operator's page in Chromium, a dead
job's Retry button runs the delivery once more, and a refused unsigned delivery is listed
under the deliveries' Refused filter.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import httpx
import pytest

from bot.store.queue.sqlite import SqliteJobQueue
from bot.store.sqlite import Store
from policies.outcome import OUTCOME_STATUSES
from tests.fakes.github import FakeGitHub, make_fake_github
from tests.fakes.llm import FakeLLM, error
from tests.scripted import REPO_FILES, ModelScript, issues_opened, running_bot, serving_fakes
from tests.test_worker_http import running_worker
from tests.ui import test_browser
from tests.ui.conftest import TOKEN

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.slow

ONE_RECEIVER = ["--receivers", "1"]  # quicker to start on a busy machine; enough here
browser = test_browser.browser  # the headless Chromium fixture of the page's browser tests

T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], log: Path, timeout: float = 60) -> T:
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}:\n{log.read_text()[-4000:]}")
        time.sleep(0.1)


def _run(db: Path, guid: str) -> tuple[str, str] | None:
    """(run id, status) of the delivery's run once it has ended."""
    with sqlite3.connect(db, timeout=10) as conn:
        row = conn.execute("SELECT id, status FROM runs WHERE delivery_id = ?", (guid,)).fetchone()
    return (str(row[0]), str(row[1])) if row and row[1] in OUTCOME_STATUSES else None


def _jobs(db: Path, guid: str) -> list[tuple[str, str]]:
    with sqlite3.connect(db, timeout=10) as conn:
        rows = conn.execute(
            "SELECT kind, status FROM jobs WHERE delivery_id = ? ORDER BY id", (guid,)
        ).fetchall()
    return [(str(k), str(s)) for k, s in rows]


def _triage_asks(llm: FakeLLM) -> int:
    return sum(
        1
        for body in llm.bodies
        if any("Triage " in str(m.get("content", "")) for m in body.get("messages", []))
    )


@pytest.fixture
def fake(tmp_path: Path) -> FakeGitHub:
    fake = make_fake_github(tmp_path, files=REPO_FILES)
    fake.set_permission("octo", "hello", "maint", "write")
    return fake


def test_github_redelivering_a_failed_guid_runs_it_again_and_a_done_one_is_a_duplicate(
    fake: FakeGitHub, tmp_path: Path
) -> None:
    issue = fake.add_issue("octo", "hello", title="Crash", body="It crashes.", user="someone")
    with (
        serving_fakes(fake, lambda body: error(400, "the model refuses")) as (llm, options),
        running_bot(tmp_path, serve_args=ONE_RECEIVER, **options) as bot,
    ):
        fake.webhook_url = f"{bot.url}/webhooks/github"
        first = fake.hooks.send("issues", issues_opened(issue, "octo/hello", 42))
        assert first.status_code == 202
        run_id, status = wait_for("the failed run", lambda: _run(bot.db, first.guid), bot.log)
        assert status == "failed"
        wait_for("its job to end", lambda: _jobs(bot.db, first.guid)[-1][1] != "running", bot.log)

        llm.respond_with(ModelScript())
        again = anyio.run(fake.hooks.resend, first)  # GitHub's Redeliver: the same GUID
        assert (again.guid, again.status_code) == (first.guid, 202)
        assert json.loads(again.answer) == {"status": "accepted"}

        def succeeded() -> str | None:
            found = _run(bot.db, first.guid)
            return found[1] if found and found[1] != "failed" else None

        assert wait_for("the run again", succeeded, bot.log) == "succeeded"
        assert _run(bot.db, first.guid) == (run_id, "succeeded")  # the same run, again
        comments = fake.comments_on("octo", "hello", issue["number"])
        (comment,) = comments
        assert "### Triage" in comment["body"]

        # Its work went well: GitHub sending it once more is a duplicate, and runs nothing.
        asks = _triage_asks(llm)
        third = anyio.run(fake.hooks.resend, first)
        assert (third.status_code, json.loads(third.answer)) == (200, {"status": "duplicate"})
        assert [kind for kind, _ in _jobs(bot.db, first.guid)] == ["delivery", "retry-1"]
        time.sleep(1)
        assert _triage_asks(llm) == asks


def _page(browser: Browser) -> Any:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    return context, context.new_page()


def _sign_in(page: Any, url: str) -> None:
    page.goto(f"{url}/ui/sign-in")
    page.fill("input[name=token]", TOKEN)
    page.click("button[type=submit]")
    page.wait_for_load_state()


def test_a_dead_job_retried_from_the_page_runs_once(
    browser: Browser,
    fake: FakeGitHub,
    tmp_path: Path,
) -> None:
    issue = fake.add_issue("octo", "hello", title="Crash", body="It crashes.", user="someone")
    env = {"BOT_UI_TOKEN": TOKEN, "BOT_APP_SLUG": fake.slug, "BOT_GITHUB_WRITE_INTERVAL": "0"}
    with (
        serving_fakes(fake, ModelScript(), extra_env=env) as (llm, options),
        running_bot(tmp_path, serve_args=["--no-worker", "--receivers", "1"], **options) as bot,
    ):
        fake.webhook_url = f"{bot.url}/webhooks/github"
        sent = fake.hooks.send("issues", issues_opened(issue, "octo/hello", 42))
        assert sent.status_code == 202
        # Its worker gives it up (as after its last failed attempt): the job is dead.
        store = Store.open(bot.db)
        try:
            queue = SqliteJobQueue(store)
            job = queue.claim_sync("gave-up", 60)
            assert job is not None and job.delivery_id == sent.guid
            queue.fail_sync(job.id, "gave-up", "RuntimeError: the model was down", False, None)
        finally:
            store.close()
        assert _jobs(bot.db, sent.guid) == [("delivery", "dead")]

        context, page = _page(browser)
        try:
            _sign_in(page, bot.url)
            page.goto(f"{bot.url}/ui/deliveries/{sent.guid}")
            assert "its delivery job is dead" in page.inner_text("form.retry")
            page.click("#retry")
            page.wait_for_load_state()
            assert page.url == f"{bot.url}/ui/deliveries/{sent.guid}"
            assert page.locator("#retry").count() == 0  # queued: no second button
            assert "retry-1" in page.inner_text("table.retries")
            assert "ui" in page.inner_text("table.retries")

            with running_worker(tmp_path, options, []) as (_, log):
                run_id, status = wait_for("the retried run", lambda: _run(bot.db, sent.guid), log)
                assert status == "succeeded"
                wait_for(
                    "the retry job to end",
                    lambda: _jobs(bot.db, sent.guid)[-1] == ("retry-1", "done"),
                    log,
                )
            page.goto(f"{bot.url}/ui/runs/{run_id}")
            assert "succeeded" in page.inner_text("#live")
        finally:
            context.close()
        assert _jobs(bot.db, sent.guid) == [("delivery", "dead"), ("retry-1", "done")]
        (comment,) = fake.comments_on("octo", "hello", issue["number"])
        assert "### Triage" in comment["body"]
        assert _triage_asks(llm) == 1  # run once


def test_a_refused_unsigned_delivery_is_listed_on_the_page(
    browser: Browser,
    fake: FakeGitHub,
    tmp_path: Path,
) -> None:
    guid = "9f1c7d36-0b1e-11ef-8c3a-2b6a1f0e4d5c"
    with (
        serving_fakes(fake, ModelScript(), extra_env={"BOT_UI_TOKEN": TOKEN}) as (_, options),
        running_bot(tmp_path, serve_args=ONE_RECEIVER, **options) as bot,
    ):
        refused = httpx.post(
            f"{bot.url}/webhooks/github",
            content=b'{"action":"opened"}',
            headers={"X-GitHub-Event": "issues", "X-GitHub-Delivery": guid},
            timeout=10,
        )
        assert refused.status_code == 401
        context, page = _page(browser)
        try:
            _sign_in(page, bot.url)
            page.goto(f"{bot.url}/ui/deliveries")
            page.click("#refused-filter")
            page.wait_for_load_state()

            def listed() -> bool:
                rows = page.locator("tr.refusal")
                if rows.count():
                    return True
                page.reload()  # written about once a second
                return False

            wait_for("the refusal on the page", listed, bot.log, timeout=20)
            row = page.inner_text("tr.refusal")
            assert "401" in row and "unsigned" in row and guid in row and "issues" in row
        finally:
            context.close()
