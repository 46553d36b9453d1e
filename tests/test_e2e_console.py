"""The operator's console on a real review through `bot serve`, the fake GitHub and the fake
model, in Chromium: the queue page while the run is held at its model calls (the job running,
the worker holding the run), the runs list updating without a reload, the search box, and the
README's screenshots of the finished run (`docs/ui-run.png`, `docs/ui-costs.png`), whose
figures must agree with each other.
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from tests.conftest import chromium_path
from tests.e2e_world import ADMIN, CALC_PULL, ReviewWorld, head_files
from tests.fakes.github import FakeGitHub
from tests.fakes.llm import Reply
from tests.fakes.review_model import CALC_RULES, ReviewModel
from tests.review._calc import build_calc
from tests.scripted import bot_on_fakes
from tests.ui.test_browser import ARGS

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.slow

TOKEN = "console-token-0123456789abcdef"
DOCS = Path(__file__).resolve().parents[1] / "docs"


@dataclasses.dataclass
class Gate:
    """Every model reply waits until `opened` is set: cleared, the run stays running."""

    opened: threading.Event


@pytest.fixture(scope="module")
def gate() -> Gate:
    opened = threading.Event()
    opened.set()
    return Gate(opened)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, gate: Gate) -> Iterator[ReviewWorld]:
    root = tmp_path_factory.mktemp("console-e2e")
    calc = build_calc(root)
    fake = FakeGitHub()
    fake.add_repo("octo", "hello", calc.git_dir)
    fake.add_installation(42, "octo", ["octo/hello"])
    for login, permission in ADMIN.items():
        fake.set_permission("octo", "hello", login, permission)
    anyio.run(lambda: fake.add_pull("octo", "hello", **CALC_PULL))
    model = ReviewModel(CALC_RULES)
    model.files = head_files(calc.git_dir, fake)

    def held(body: dict[str, Any]) -> Reply:
        return dataclasses.replace(model(body), hold=gate.opened)

    env = {
        "BOT_APP_SLUG": fake.slug,
        "BOT_GITHUB_WRITE_INTERVAL": "0",
        "BOT_UI_TOKEN": TOKEN,
        "BOT_MODEL_PRICES": json.dumps({"fake-model": {"input": 3.0, "output": 15.0}}),
    }
    # One receiver: the test reads pages, it does not measure the intake.
    with bot_on_fakes(root, fake, held, extra_env=env, serve_args=("--receivers", "1")) as (
        llm,
        running,
    ):
        yield ReviewWorld(
            url=running.url,
            fake=fake,
            llm=llm,
            db=running.db,
            log=running.log,
            root=root,
            model=model,
            calc=calc,
        )
    gate.opened.set()


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


@pytest.fixture
def page(browser: Browser, world: ReviewWorld) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.goto(f"{world.url}/ui/sign-in")
    tab.fill("input[name=token]", TOKEN)
    tab.click("button[type=submit]")
    tab.wait_for_load_state()
    try:
        yield tab
        assert errors == [], f"console errors (a CSP violation among them?): {errors}"
    finally:
        context.close()


def test_the_queue_page_during_a_slow_run_and_lists_that_update_without_reload(
    world: ReviewWorld, page: Page, gate: Gate
) -> None:
    page.goto(f"{world.url}/ui/runs")
    page.evaluate("window.notReloaded = true")
    assert page.locator("tr.run").count() == 0

    gate.opened.clear()  # the model answers nothing until the gate opens again
    guid = world.post("pull_request", world.pull_payload("opened"))
    page.locator("tr.run").first.wait_for(timeout=30_000)  # polled in, not reloaded
    run_id = page.locator("tr.run").first.get_attribute("data-run")
    assert run_id is not None and run_id.startswith("wf_")
    row = page.locator(f"tr.run[data-run='{run_id}']")
    assert "Add mean" in row.locator("td.target").inner_text()  # the pull request's title
    assert row.locator("td.actor").inner_text() == "alice"
    assert page.evaluate("window.notReloaded") is True

    page.goto(f"{world.url}/ui/queue")
    page.evaluate("window.notReloaded = true")
    review = page.locator("tr.queue-line[data-workflow='review']")
    review.wait_for(timeout=30_000)
    assert review.locator("td.c-running").inner_text() == "1"
    worker = page.locator("tr.worker", has=page.locator(f"a[href='/ui/runs/{run_id}']"))
    worker.wait_for(timeout=30_000)  # the worker's heartbeat names the run it holds
    assert "silent" not in (worker.get_attribute("class") or "")
    assert worker.locator("td.beat").inner_text().endswith("ago")
    world.wait("a held model call", lambda: len(world.llm.requests) >= 1)

    gate.opened.set()
    _, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-3000:]
    # The queue page follows: the job is done, the worker holds nothing.
    page.locator("tr.worker a.run-link").first.wait_for(state="detached", timeout=30_000)
    page.wait_for_function(
        "() => !document.querySelector(\"tr.queue-line[data-workflow='review'] td.c-running\")"
        " || document.querySelector(\"tr.queue-line[data-workflow='review'] td.c-running\")"
        ".innerText === '0'",
        timeout=30_000,
    )
    assert page.evaluate("window.notReloaded") is True

    page.goto(f"{world.url}/ui/runs")
    outcome = page.locator(f"tr.run[data-run='{run_id}'] td.outcome")
    assert "succeeded" in outcome.inner_text()
    posted = outcome.locator("a.posted").get_attribute("href") or ""
    assert re.fullmatch(r"https://github\.com/octo/hello/(issues|pull)/1#issuecomment-\d+", posted)


def test_search_by_guid_run_id_and_target(world: ReviewWorld, page: Page) -> None:
    run_id, guid = world.query("SELECT id, delivery_id FROM runs ORDER BY created_at LIMIT 1")[0]

    def search(q: str) -> None:
        page.fill("form.search input[name=q]", q)
        page.click("form.search button[type=submit]")
        page.wait_for_load_state()

    page.goto(f"{world.url}/ui/runs")
    search(guid)
    assert page.url.endswith(f"/ui/deliveries/{guid}")
    search(run_id)
    assert page.url.endswith(f"/ui/runs/{run_id}")
    search("octo/hello#1")
    assert page.locator(f"tr.run[data-run='{run_id}']").count() == 1
    search("https://github.com/octo/hello/pull/1")
    assert page.locator(f"tr.run[data-run='{run_id}']").count() == 1
    search("'; DROP TABLE runs; -- <script>alert(1)</script>")
    assert "is not a delivery GUID" in page.locator("main").inner_text()
    assert world.query("SELECT count(*) FROM runs")[0][0] >= 1


def test_the_screenshots_come_from_the_real_run_and_agree(world: ReviewWorld, page: Page) -> None:
    run_id, tokens_in, tokens_out, cost = world.query(
        "SELECT id, input_tokens, output_tokens, cost FROM runs ORDER BY created_at LIMIT 1"
    )[0]
    page.goto(f"{world.url}/ui/runs/{run_id}")
    total = int(tokens_in) + int(tokens_out)
    assert total > 0
    footer = page.locator("article.published").inner_text()
    found = re.search(r"([\d,]+) tokens", footer)
    assert found is not None, footer
    assert int(found.group(1).replace(",", "")) == total, footer
    assert not re.search(r"\b0 tokens\b|\b0\.0 s\b", footer), footer
    assert cost > 0 and f"${cost:.4f}" in footer, footer
    assert "<details>" not in footer and "<summary>" not in footer  # no HTML shown as text
    calls = [
        int(t.replace(",", ""))
        for t in page.locator("table.agents tr.agent td.num:nth-child(7)").all_inner_texts()
        if t.strip()
    ]
    assert sum(calls) == total
    page.locator("svg.timeline a.bar").first.wait_for()
    # Each call's transcript leads with what it was offered, collapsed.
    page.goto(f"{world.url}/ui/runs/{run_id}/agents/1")
    offered = page.locator("li.turn.t-system")
    assert offered.locator("details.system-prompt").get_attribute("open") is None
    assert "System prompt (" in offered.inner_text()
    tools = offered.locator("details.tools summary").inner_text()
    assert "read_file" in tools and "structured_output" in tools, tools
    assert page.locator("li.turn.t-user").count() == 1
    page.goto(f"{world.url}/ui/runs/{run_id}")
    page.locator("svg.timeline a.bar").first.wait_for()
    page.screenshot(path=str(DOCS / "ui-run.png"), full_page=True)
    page.goto(f"{world.url}/ui/costs?days=7")
    totals = page.locator("p.totals").inner_text()
    assert f"{total:,} tokens" in totals and f"${cost:,.4f}" in totals, totals
    page.screenshot(path=str(DOCS / "ui-costs.png"), full_page=True)
    for name in ("ui-run.png", "ui-costs.png"):
        assert (DOCS / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
