"""End to end: an installation suspended while its run works, then unsuspended.

`bot serve` runs as a subprocess on the fake GitHub and a fake model that never answers, so
the triage run is still working when GitHub suspends the installation. The run must stop,
end `failed` with the reason, and post nothing; deliveries while suspended are skipped; after
`unsuspend` they run again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from bot.store.sqlite import Store
from tests.conftest import PAYLOADS
from tests.fakes.llm import hang
from tests.scripted import bot_with_fakes, issues_opened

pytestmark = pytest.mark.slow

T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 60) -> T:
    """Poll until `probe` gives something (the bot reports nothing on its own)."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def lifecycle(action: str, installation: int) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (PAYLOADS / "installation" / f"{action}.payload.json").read_text()
    )
    data["installation"] = {**data["installation"], "id": installation}
    return data


def test_suspending_stops_the_running_run_and_posts_nothing(tmp_path: Path) -> None:
    with bot_with_fakes(tmp_path) as (fake, llm, bot):
        llm.respond_with(lambda body: hang())
        fake.webhook_url = f"{bot.url}/webhooks/github"
        store = Store.open(bot.db)
        issue = fake.add_issue("octo", "hello", title="Crash on start", user="alice")
        sent = fake.hooks.send("issues", issues_opened(issue, "octo/hello", 42))
        assert sent.status_code == 202
        wait_for("the model to be asked", lambda: llm.requests)
        (run,) = store.runs_for_delivery(sent.guid)

        fake.suspend_installation(42)
        mark = len(fake.calls)
        suspend = fake.hooks.send("installation", lifecycle("suspend", 42))
        assert suspend.status_code == 202

        def finished() -> Any:
            current = store.get_run(run.id)
            return current if current and current.status == "failed" else None

        stopped = wait_for("the run to end", finished)
        assert stopped.outcome is not None
        assert stopped.outcome["error"] == (
            "cancelled: installation_suspended: installation 42 was suspended"
        )
        record = wait_for(
            "the suspend to be recorded", lambda: store.get_delivery(suspend.guid).decision
        )
        assert record == "lifecycle"
        reason = store.get_delivery(suspend.guid).reason or ""
        assert reason.endswith("jobs cancelled: 1, runs stopped: 1")
        # Nothing was asked of GitHub for the installation after it was suspended.
        assert [(c.method, c.path) for c in fake.calls[mark:]] == []

        while_suspended = fake.add_issue("octo", "hello", title="Another", user="alice")
        skipped = fake.hooks.send("issues", issues_opened(while_suspended, "octo/hello", 42))
        decided = wait_for("the skip", lambda: store.get_delivery(skipped.guid).reason)
        assert decided.startswith("installation_inactive: installation 42 is suspended")

        fake.suspend_installation(42, False)
        back = fake.hooks.send("installation", lifecycle("unsuspend", 42))
        wait_for("the unsuspend", lambda: store.get_delivery(back.guid).decision)
        again = fake.add_issue("octo", "hello", title="Third", user="alice")
        runs = fake.hooks.send("issues", issues_opened(again, "octo/hello", 42))
        assert wait_for("the trigger", lambda: store.get_delivery(runs.guid).decision) == "trigger"
        store.close()
        log = bot.log.read_text()
        assert "ghs_" not in log  # no token in the logs
