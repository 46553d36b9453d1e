"""A real run through `bot serve` (the fakes for GitHub and the model) as the operator's page
shows it: what the engine and the executor store is what the page reads."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from tests.scripted import bot_with_fakes, issues_opened
from tests.test_e2e import Bot
from tests.ui.conftest import TOKEN
from tests.ui.seed import HOSTILE, PLANTED_TOKEN

pytestmark = pytest.mark.slow


def test_a_triage_run_on_the_page(tmp_path: Path) -> None:
    with bot_with_fakes(tmp_path, extra_env={"BOT_UI_TOKEN": TOKEN}) as (fake, llm, running):
        bot = Bot(running.url, fake, llm, running.db, running.log)
        issue = fake.add_issue(
            "octo",
            "hello",
            title="Crash at start-up",
            body=f"It crashes. {HOSTILE}",
            user="someone",
        )
        assert bot.post("issues", issues_opened(issue, "octo/hello", 42)).status_code == 202
        run_id, status = bot.finished_run("e2e-0001")
        assert status == "succeeded"

        with httpx.Client(base_url=running.url, timeout=10) as client:
            assert client.get("/ui/", follow_redirects=False).status_code == 303
            client.post("/ui/sign-in", data={"token": TOKEN})
            deliveries = client.get("/ui/deliveries").text
            assert "e2e-0001" in deliveries and run_id in deliveries
            assert re.search(r'<span class="decision d-trigger">trigger</span> triage', deliveries)
            assert re.search(r"<td>done · 1/\d+ attempts", deliveries)  # the delivery's job

            runs = client.get("/ui/runs").text
            assert run_id in runs and f'/octo/hello/issues/{issue["number"]}"' in runs

            page = client.get(f"/ui/runs/{run_id}").text
            assert page.count('class="bar ') >= 1
            assert "### Triage" not in page and "<h3>Triage</h3>" in page  # rendered
            assert "crashes at start-up when <code>config.yml</code> is missing" in page

            first = re.search(rf"/ui/runs/{run_id}/agents/(\d+)", page)
            assert first is not None
            agent = client.get(first.group(0)).text
            assert "Crash at start-up" in agent  # the prompt
            assert "structured_output" in agent or "Structured output" in agent
            for html in (deliveries, page, agent, client.get("/ui/deliveries/e2e-0001").text):
                assert PLANTED_TOKEN not in html
                assert "<script>alert" not in html
