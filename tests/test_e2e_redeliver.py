"""End to end: deliveries GitHub could not hand over are asked for again, and decided once.

The fake GitHub keeps the attempts it made to deliver to a running `bot serve`; an attempt
recorded with a 502 is one the bot never received. `bot redeliver` runs in this process on
the same settings and database as the server; the periodic pass runs inside the server.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

from bot.cli import main
from bot.store.sqlite import Store
from tests.fakes.github import FakeGitHub, make_fake_github, new_private_key_pem, serve_fake_github
from tests.fakes.llm import FakeLLM, serve
from tests.scripted import REPO_FILES, ModelScript, RunningBot, issues_opened, running_bot

pytestmark = pytest.mark.slow

T = TypeVar("T")
DAY = 86400.0


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 60) -> T:
    """Poll until `probe` gives something (neither the bot nor the fake reports on its own)."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@contextmanager
def world(root: Path, **env: str) -> Iterator[tuple[FakeGitHub, RunningBot, str]]:
    """The fake GitHub and model on 127.0.0.1 and `bot serve` on them; yields the fake, the
    bot and the fake's URL. The fake delivers to the bot."""
    fake = make_fake_github(root, files=REPO_FILES)
    llm = FakeLLM()
    llm.respond_with(ModelScript())
    with (
        serve_fake_github(fake) as gh_url,
        serve(llm) as llm_url,
        running_bot(
            root,
            github_url=gh_url,
            llm_url=llm_url,
            app_id=fake.app_id,
            private_key_pem=fake.private_key_pem,
            webhook_secret=fake.webhook_secret,
            extra_env=env,
        ) as bot,
    ):
        fake.webhook_url = f"{bot.url}/webhooks/github"
        yield fake, bot, gh_url


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[[str, Path], None]:
    """Point `bot` in this process at the fake GitHub and the server's data dir."""
    for key in list(os.environ):
        if key.startswith("BOT_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)

    def point(gh_url: str, key: Path) -> None:
        monkeypatch.setenv("BOT_GITHUB_API_URL", gh_url)
        monkeypatch.setenv("BOT_APP_ID", "1001")
        monkeypatch.setenv("BOT_PRIVATE_KEY_PATH", str(key))
        monkeypatch.setenv("BOT_DATA_DIR", str(tmp_path / "data"))

    return point


def lines(out: str) -> dict[str, str]:
    """`bot redeliver`'s lines by GUID: the rest of the line."""
    found = {}
    for line in out.splitlines():
        guid, _, rest = line.partition("  ")
        found[guid] = " ".join(rest.split())
    return found


def test_bot_redeliver_asks_again_for_what_was_missed_and_only_that(
    tmp_path: Path, cli_env: Callable[[str, Path], None], capsys: pytest.CaptureFixture[str]
) -> None:
    with world(tmp_path) as (fake, bot, gh_url):
        cli_env(gh_url, tmp_path / "app.pem")
        store = Store.open(bot.db)
        issue = fake.add_issue("octo", "hello", title="Crash", user="alice")
        missed = fake.hooks.record(
            "issues", issues_opened(issue, "octo/hello", 42), status_code=502
        )
        other = fake.add_issue("octo", "hello", title="Other", user="alice")
        received = fake.hooks.send("issues", issues_opened(other, "octo/hello", 42))
        assert received.status_code == 202
        # GitHub timed out on an attempt the bot did store: seen, never asked for again.
        timed_out = fake.hooks.record(
            "issues", {"action": "opened"}, status_code=504, guid=received.guid
        )
        ok_elsewhere = fake.hooks.record("ping", {"zen": "hi"}, status_code=200)
        too_old = fake.hooks.record(
            "issues", {"action": "opened"}, status_code=502, delivered_at=time.time() - 4 * DAY
        )
        for n in range(120):  # more than one page of 100
            fake.hooks.record(
                "ping", {"zen": str(n)}, status_code=200, delivered_at=time.time() - DAY - n
            )
        wait_for(
            "the received one to be decided",
            lambda: (
                store.get_delivery(received.guid) and store.get_delivery(received.guid).decision
            ),
        )

        assert main(["redeliver", "--dry-run"]) == 0
        out = lines(capsys.readouterr().out)
        assert out[missed.guid] == "issues.opened 502 failed to connect would redeliver"
        assert out[received.guid].endswith("skipped: received before")
        assert timed_out.guid == received.guid
        assert out[ok_elsewhere.guid] == "ping 200 OK skipped: delivered"
        assert too_old.guid not in out
        assert fake.calls_to("POST", "/app/hook/deliveries/*/attempts") == []
        assert len(fake.calls_to("GET", "/app/hook/deliveries")) == 2  # the cursor was followed

        assert main(["redeliver"]) == 0
        out = lines(capsys.readouterr().out)
        assert out[missed.guid].endswith("redelivered")
        (asked,) = fake.calls_to("POST", "/app/hook/deliveries/*/attempts")
        assert asked.path == f"/app/hook/deliveries/{missed.id}/attempts" and asked.status == 202
        again = fake.hooks.by_guid(missed.guid)
        assert [(a.redelivery, a.status_code) for a in again] == [(False, 502), (True, 202)]
        decision = wait_for(
            "the bot to decide it",
            lambda: store.get_delivery(missed.guid) and store.get_delivery(missed.guid).decision,
        )
        assert decision == "trigger"
        assert len(store.runs_for_delivery(missed.guid)) == 1

        # Received now: a second pass leaves it alone.
        assert main(["redeliver"]) == 0
        out = lines(capsys.readouterr().out)
        assert out[missed.guid].endswith("skipped: received before")
        assert len(fake.calls_to("POST", "/app/hook/deliveries/*/attempts")) == 1
        store.close()


def test_bot_redeliver_says_when_github_refuses_the_credentials(
    tmp_path: Path, cli_env: Callable[[str, Path], None], capsys: pytest.CaptureFixture[str]
) -> None:
    fake = make_fake_github(tmp_path)
    wrong = tmp_path / "wrong.pem"
    wrong.write_text(new_private_key_pem())
    with serve_fake_github(fake) as gh_url:
        cli_env(gh_url, wrong)
        assert main(["redeliver"]) == 1
    err = capsys.readouterr().err
    assert "GitHub refused the App's credentials (401" in err
    assert "BOT_PRIVATE_KEY_PATH" in err
    assert fake.calls_to("GET", "/app/hook/deliveries")[0].status == 401


def test_bot_redeliver_needs_credentials_and_a_valid_since(
    tmp_path: Path, cli_env: Callable[[str, Path], None], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["redeliver", "--since", "soon"]) == 1
    assert "--since: not a duration: 'soon'" in capsys.readouterr().err
    assert main(["redeliver"]) == 1
    assert "BOT_APP_ID" in capsys.readouterr().err


def test_the_worker_redelivers_missed_deliveries_every_interval(tmp_path: Path) -> None:
    with world(tmp_path, BOT_REDELIVER_INTERVAL="0.2") as (fake, bot, _):
        store = Store.open(bot.db)
        issue = fake.add_issue("octo", "hello", title="Crash", user="alice")
        missed = fake.hooks.record(
            "issues", issues_opened(issue, "octo/hello", 42), status_code=502
        )

        def decided() -> Any:
            record = store.get_delivery(missed.guid)
            return record.decision if record else None

        assert wait_for("the redelivered delivery to be decided", decided) == "trigger"
        # Later passes see it received and leave it alone.
        passes = len(fake.calls_to("GET", "/app/hook/deliveries"))
        wait_for(
            "two more passes",
            lambda: len(fake.calls_to("GET", "/app/hook/deliveries")) >= passes + 2,
        )
        assert len(fake.calls_to("POST", "/app/hook/deliveries/*/attempts")) == 1
        assert [a.redelivery for a in fake.hooks.by_guid(missed.guid)] == [False, True]
        assert len(store.runs_for_delivery(missed.guid)) == 1
        store.close()
