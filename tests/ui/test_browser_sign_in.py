"""Signing in with GitHub in a real headless Chromium: the button on the sign-in page, the
fake GitHub's authorize page over HTTP, the callback, a stop, and the audit page showing who
stopped the run; someone no rule lets in is shown why."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.ui.test_browser import browser
from tests.ui.test_github_sign_in import World, world

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.slow

__all__ = ["browser"]  # the module's Chromium, from the page's other browser tests


@pytest.fixture
def signed(tmp_path: Path, browser: Browser) -> Iterator[tuple[World, Page, list[str]]]:
    # GitHub's pages on another site than the app's, as github.com is: a cookie the app sets
    # SameSite=Strict on the way back must still sign the person in.
    with world(tmp_path, web_host="localhost") as w:
        context = browser.new_context()
        page = context.new_page()
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        try:
            yield w, page, errors
        finally:
            context.close()


def test_sign_in_with_github_stop_a_run_and_see_it_in_the_audit(
    signed: tuple[World, Page, list[str]],
) -> None:
    w, page, errors = signed
    w.fake.oauth_asks = True  # the person approves on GitHub's own page, another site
    page.goto(f"{w.ui}/ui/sign-in")
    page.click("#sign-in-github")
    page.click("#authorize")
    page.wait_for_url(f"{w.ui}/ui/")
    assert page.locator("#signed-in-as").inner_text() == "mona"
    page.goto(f"{w.ui}/ui/runs/{w.running}")
    page.click("#stop-run")
    page.wait_for_load_state()
    assert w.store.stop_requested(w.running) == "stopped from the operator's page"
    page.goto(f"{w.ui}/ui/audit")
    rows = page.locator("tr.audit-entry")
    assert rows.count() == 2
    newest = rows.nth(0)
    assert newest.locator(".actor").inner_text() == "mona"
    assert newest.locator(".action").inner_text() == "stop"
    assert w.running in newest.inner_text()
    assert rows.nth(1).locator(".action").inner_text() == "sign-in"
    assert errors == []


def test_someone_outside_the_team_is_shown_why_and_stays_out(
    signed: tuple[World, Page, list[str]],
) -> None:
    w, page, _ = signed
    w.fake.web_user = "eve"
    page.goto(f"{w.ui}/ui/sign-in")
    page.click("#sign-in-github")
    page.wait_for_load_state()
    assert "eve may not sign in here" in page.locator("#sign-in-error").inner_text()
    page.goto(f"{w.ui}/ui/runs")
    assert page.url.endswith("/ui/sign-in")
