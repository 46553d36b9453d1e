"""The operator's page in a real headless Chromium (Debian's, driven by Playwright).

The real app (`bot.intake.web.create_app`, as `bot serve` builds it) runs on 127.0.0.1 over a seeded
SQLite store. Every test records each request the page makes and each dialog it opens: none
may leave 127.0.0.1, and no dialog may open (the hostile run's `alert()`s would).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bot.intake.web import create_app
from tests.conftest import chromium_path
from tests.ui.conftest import NOW, TOKEN, Seeded, ui_settings
from tests.ui.seed import PLANTED_TOKEN, Call, details, history, put_artifact
from tests.ui.server import serve

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.slow

ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    path = chromium_path()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(path), args=ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@dataclass
class Watched:
    """A page of a fresh browser context, with what it requested and any dialog it opened."""

    page: Page
    url: str
    requests: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)

    def go(self, path: str) -> None:
        self.page.goto(self.url + path)

    def sign_in(self, token: str = TOKEN) -> None:
        self.go("/ui/sign-in")
        self.page.fill("input[name=token]", token)
        self.page.click("button[type=submit]")
        self.page.wait_for_load_state()

    def assert_contained(self) -> None:
        strays = [u for u in self.requests if not u.startswith(self.url + "/")]
        assert strays == [], f"requests left 127.0.0.1: {strays}"
        assert self.dialogs == [], f"dialogs opened: {self.dialogs}"
        # A Content-Security-Policy violation (an inline style or script the page itself
        # needed) is reported on the console.
        assert self.console_errors == [], f"console errors: {self.console_errors}"


@pytest.fixture
def site(seeded: Seeded, tmp_path: Path) -> Iterator[str]:
    app = create_app(ui_settings(tmp_path), seeded.store)
    with serve(app, lifespan="on") as url:
        yield url


@pytest.fixture
def watched(browser: Browser, site: str) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    seen = Watched(page=page, url=site)
    page.on("request", lambda request: seen.requests.append(request.url))

    def on_dialog(dialog: Any) -> None:
        seen.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.on(
        "console",
        lambda message: (
            seen.console_errors.append(message.text)
            if message.type == "error" and "401" not in message.text
            else None
        ),
    )
    try:
        yield seen
        seen.assert_contained()
    finally:
        context.close()


def test_sign_in_see_a_delivery_open_a_run_its_timeline_and_a_transcript(
    watched: Watched, seeded: Seeded
) -> None:
    page = watched.page
    watched.sign_in()
    assert page.url.endswith("/ui/")
    row = page.locator("tr.delivery[data-guid='d-skip']")
    assert "skip" in row.locator("td.decision").inner_text()
    assert "draft pull request" in row.inner_text()
    assert "trigger" in page.locator("tr.delivery[data-guid='d-1'] td.decision").inner_text()

    page.locator("tr.delivery[data-guid='d-1'] a.run-link").click()
    page.wait_for_url(f"**/ui/runs/{seeded.finished}")
    bars = page.locator("svg.timeline a.bar")
    assert bars.count() == 3
    assert page.locator("svg.timeline a.bar.replayed").count() == 1
    # Two calls overlapped, so their bars lie in different lanes.
    ys = {page.locator("svg.timeline a.bar rect").nth(i).get_attribute("y") for i in range(3)}
    assert len(ys) == 2
    assert page.locator("article.published strong").inner_text() == "bug"

    bars.first.click()
    page.wait_for_url(f"**/ui/runs/{seeded.finished}/agents/0")
    transcript = page.locator("ol.transcript").inner_text()
    assert "Prompt for explore code" in transcript
    assert "read_file" in transcript
    assert "accepted" in page.locator("main").inner_text()

    watched.go(f"/ui/runs/{seeded.writer}/agents/0")
    assert f"bot/implement-{seeded.writer}-0" in page.locator("dl.handoff").inner_text()
    assert page.locator("pre.diff .d-add").inner_text() == "+new = 2"
    assert page.locator("pre.diff .d-del").inner_text() == "-old = 1"

    watched.go("/ui/costs?days=7")
    assert page.locator("svg.chart g.day").count() == 7
    assert "$1.9300" in page.locator("p.totals").inner_text()
    assert seeded.writer in page.locator("table.costliest").inner_text()
    past = history(seeded.store, NOW, days=20)
    watched.go("/ui/costs?days=30")
    assert page.locator("svg.chart g.day").count() == 30
    assert f"${past + 1.93:,.4f}" in page.locator("p.totals").inner_text()


def test_wrong_token_no_cookie_and_stop_without_csrf_are_refused(
    watched: Watched, seeded: Seeded
) -> None:
    page = watched.page
    watched.go("/ui/")
    assert page.url.endswith("/ui/sign-in")
    assert page.locator("table.deliveries").count() == 0

    watched.sign_in("not-the-token")
    assert page.locator("#sign-in-error").inner_text() == "That is not the token."
    assert page.locator("table.deliveries").count() == 0
    assert page.context.cookies() == []

    stop = f"{watched.url}/ui/runs/{seeded.running}/stop"
    answer = page.request.post(stop, form={"csrf": ""}, max_redirects=0)
    assert answer.status == 303  # not signed in: to the sign-in page, nothing done
    watched.sign_in()
    answer = page.request.post(stop, form={"csrf": "0" * 64}, max_redirects=0)
    assert answer.status == 403
    answer = page.request.post(stop, form={}, max_redirects=0)
    assert answer.status == 403
    assert seeded.store.stop_requested(seeded.running) is None


def test_a_run_in_progress_advances_without_reload_and_can_be_stopped(
    watched: Watched, seeded: Seeded
) -> None:
    page = watched.page
    watched.sign_in()
    watched.go(f"/ui/runs/{seeded.running}")
    assert page.locator("svg.timeline a.bar").count() == 1
    page.evaluate("window.notReloaded = true")

    now = time.time()
    put_artifact(
        seeded.store,
        seeded.running,
        "workflow.json",
        details(
            seeded.running,
            [
                Call("read diff", NOW - 99, now - 1),
                Call("check the tests", now - 0.5, None, state="running", phase="Report"),
            ],
            status="running",
            started_at=NOW - 100,
            current_phase="Report",
        ),
    )
    page.locator("svg.timeline a.bar").nth(1).wait_for(timeout=5000)
    assert "check the tests" in page.locator("table.agents").inner_text()
    assert "Report" in page.locator("li.phase.current").inner_text()
    assert page.evaluate("window.notReloaded") is True

    polls = [u for u in watched.requests if u.endswith("/live")]
    began = time.monotonic()
    page.wait_for_timeout(3000)
    later = [u for u in watched.requests if u.endswith("/live")]
    assert 1 <= len(later) - len(polls) <= (time.monotonic() - began) + 1  # once a second at most

    page.click("#stop-run")
    page.wait_for_load_state()
    assert seeded.store.stop_requested(seeded.running) == "stopped from the operator's page"
    assert "stop requested" in page.locator("p.run-state").inner_text()


def test_hostile_text_shows_as_text_runs_nothing_and_leaks_no_token(
    watched: Watched, seeded: Seeded
) -> None:
    page = watched.page
    watched.sign_in()
    for path in (
        f"/ui/runs/{seeded.hostile}",
        f"/ui/runs/{seeded.hostile}/agents/0",
        "/ui/deliveries/d-hostile",
        "/ui/deliveries",
    ):
        watched.go(path)
        page.locator("details").evaluate_all("els => els.forEach(e => e.open = true)")
        html = page.content()
        text = page.locator("main").inner_text()
        assert PLANTED_TOKEN not in html, path
        assert page.locator("main img").count() == 0, path
        assert page.locator("main script").count() == 0, path
        assert page.locator("a[href^='javascript' i]").count() == 0, path
        assert re.search(r"<[a-z]+[^>]*\son(error|load)=", html) is None, path
        if path != "/ui/deliveries":
            assert "<script>alert('x')</script>" in text, path
        if path.endswith("/agents/0"):
            assert "[redacted github token]" in text
    time.sleep(0.5)  # a script that slipped through would have opened its dialog by now
