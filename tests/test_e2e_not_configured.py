"""End to end: what `bot serve` does while the operator's settings lack a model or the GitHub
App's credentials, through the fake GitHub and the fake model on 127.0.0.1.

A delivery that would start a model run is recorded as skipped `not_configured`, saying what
is missing; nothing is posted on GitHub (no comment, no reaction, no check), nothing is asked
of the model and no run is left `queued`. A reply that needs no model (`help`) is still given
where the app can post. Once a model is configured, `bot replay --delivery GUID` runs the
skipped delivery as if it had just come.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.fakes.github import make_fake_github
from tests.scripted import (
    REPO_FILES,
    ModelScript,
    bot_env,
    comment_created,
    issues_opened,
    running_bot,
    serving,
    serving_fakes,
)
from tests.test_e2e import Bot

pytestmark = pytest.mark.slow

NO_MODEL = {"BOT_MODEL": "", "BOT_LLM_BASE_URL": ""}


def handled(bot: Bot, guid: str) -> tuple[str, str]:
    """Wait until the delivery's job is done: (decision, reason)."""

    def done() -> bool:
        rows = bot.query("SELECT status FROM jobs WHERE delivery_id = ?", guid)
        return bool(rows) and rows[0][0] == "done"

    bot.wait(f"the job of {guid}", done)
    ((decision, reason),) = bot.query(
        "SELECT decision, reason FROM deliveries WHERE guid = ?", guid
    )
    return str(decision), str(reason)


def replay(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", "replay", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_without_a_model_nothing_is_posted_and_bot_replay_runs_it_later(tmp_path: Path) -> None:
    fake = make_fake_github(tmp_path, files=REPO_FILES)
    fake.set_permission("octo", "hello", "maint", "write")
    with serving_fakes(fake, ModelScript()) as (llm, options):
        with running_bot(tmp_path, **{**options, "extra_env": NO_MODEL}) as running:
            bot = Bot(running.url, fake, llm, running.db, running.log)
            issue = fake.add_issue("octo", "hello", title="Crash", body="It crashes.", user="u")
            number = issue["number"]
            bot.post("issues", issues_opened(issue, "octo/hello", 42))
            decision, reason = handled(bot, "e2e-0001")
            assert decision == "skip"
            assert reason.startswith("not_configured: missing a model (set BOT_MODEL and ")
            assert "bot replay --delivery e2e-0001" in reason

            ask = fake.add_comment("octo", "hello", number, "@repo-agent ask where?", user="maint")
            issue_now = fake.repos["octo/hello"].issues[number]
            bot.post("issue_comment", comment_created(issue_now, ask, "octo/hello", 42))
            assert handled(bot, "e2e-0002")[1].startswith("not_configured: missing a model")
            assert fake.writes() == []
            assert llm.bodies == []
            assert bot.query("SELECT count(*) FROM runs") == [(0,)]

            # A reply without a model is still given.
            helped = fake.add_comment("octo", "hello", number, "@repo-agent help", user="maint")
            bot.post("issue_comment", comment_created(issue_now, helped, "octo/hello", 42))
            _, status = bot.finished_run("e2e-0003")
            assert status == "succeeded"
            (reply,) = bot.own(number)
            assert "kind=help" in reply["body"] and "@repo-agent ask" in reply["body"]

        # The operator sets a model and starts the app again, then replays the issue.
        with running_bot(tmp_path, **options) as running:
            bot = dataclasses.replace(bot, url=running.url)
            env = bot_env(tmp_path, **options)
            done = replay(tmp_path, env, "--delivery", "e2e-0001")
            assert done.returncode == 0, done.stderr
            assert "e2e-0001" in done.stdout
            _, status = bot.finished_run("e2e-0001")
            assert status == "succeeded"
            triage = [c for c in bot.own(number) if "### Triage" in c["body"]]
            assert len(triage) == 1
            assert bot.decided("e2e-0001") == "trigger"
            assert bot.query("SELECT status FROM runs WHERE status = 'queued'") == []

            # A delivery that was not skipped for missing settings is not run again.
            again = replay(tmp_path, env, "--delivery", "e2e-0003")
            assert again.returncode == 2
            assert "not_configured" in again.stderr
            unknown = replay(tmp_path, env, "--delivery", "no-such-guid")
            assert unknown.returncode == 2


@contextmanager
def serving_without_credentials(root: Path, env: dict[str, str]) -> Iterator[str]:
    """`bot serve` with `env` (the App's id and key taken out): the app cannot reach GitHub."""
    env = {k: v for k, v in env.items() if k not in ("BOT_APP_ID", "BOT_PRIVATE_KEY_PATH")}
    with serving(root, env) as (url, _proc):
        yield url


def test_without_credentials_no_run_is_left_queued(tmp_path: Path) -> None:
    fake = make_fake_github(tmp_path, files=REPO_FILES)
    with serving_fakes(fake, ModelScript()) as (llm, options):
        env = bot_env(tmp_path, **options)
        with serving_without_credentials(tmp_path, env) as url:
            data = tmp_path / "data" / "bot.sqlite3"
            bot = Bot(url, fake, llm, data, tmp_path / "serve.log")
            issue = fake.add_issue("octo", "hello", title="Crash", body="It crashes.", user="u")
            bot.post("issues", issues_opened(issue, "octo/hello", 42))
            decision, reason = handled(bot, "e2e-0001")
            assert decision == "skip"
            assert reason.startswith("not_configured: missing GitHub App credentials")
            assert bot.query("SELECT count(*) FROM runs") == [(0,)]
            assert fake.calls == [] and llm.bodies == []
