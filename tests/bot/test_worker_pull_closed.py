"""The worker on `pull_request.closed`: the findings' fates are recorded through the
`pull_closed` hook (merged or not, whoever closed it), never for an inactive installation,
and without the hook the delivery is skipped as an unrouted action, as before."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.runs.worker import Worker, WorkerHooks
from bot.store.queue.sqlite import SqliteJobQueue, insert_job
from bot.store.sqlite import Store, transaction
from policies.finding_fates import PullClosed
from policies.lifecycle import InstallationState
from tests.conftest import PAYLOADS

pytestmark = pytest.mark.anyio


def closed(*, merged: bool, sender: str = "octocat", kind: str = "User") -> bytes:
    data = json.loads((PAYLOADS / "pull_request/opened.payload.json").read_text())
    data["action"] = "closed"
    data["pull_request"] = {**data["pull_request"], "state": "closed", "merged": merged}
    data["sender"] = {**data["sender"], "login": sender, "type": kind}
    data["installation"] = {"id": 77}
    return json.dumps(data).encode()


@pytest.fixture
def store(data_dir: Path) -> Iterator[Store]:
    opened = Store.open(data_dir / "bot.sqlite3")
    yield opened
    opened.close()


def deliver(store: Store, guid: str, body: bytes) -> None:
    conn = store.conn()
    with transaction(conn):
        conn.execute(
            "INSERT INTO deliveries (guid, event, received_at, headers, body)"
            " VALUES (?, 'pull_request', 1.0, '{}', ?)",
            (guid, body),
        )
        insert_job(conn, guid, 1.0)


def decision(store: Store, guid: str) -> tuple[str | None, str | None]:
    row = store.get_delivery(guid)
    assert row is not None
    return row.decision, row.reason


async def run(store: Store, hooks: WorkerHooks) -> None:
    worker = Worker(store, SqliteJobQueue(store), hooks, app_slug="repo-agent")
    await worker.run_until_idle()


async def test_a_merge_and_a_close_record_the_fates(store: Store) -> None:
    seen: list[PullClosed] = []

    async def pull_closed(pull: PullClosed) -> str:
        seen.append(pull)
        return f"pull request {pull.state}: 2 findings"

    deliver(store, "g-merged", closed(merged=True))
    deliver(store, "g-closed", closed(merged=False, sender="merge-bot[bot]", kind="Bot"))
    await run(store, WorkerHooks(pull_closed=pull_closed))
    repo = seen[0].repo
    assert seen == [PullClosed(repo, 2, 77, True), PullClosed(repo, 2, 77, False)]
    assert decision(store, "g-merged") == ("findings", "pull request merged: 2 findings")
    # A bot's close ends the pull request all the same.
    assert decision(store, "g-closed") == ("findings", "pull request closed: 2 findings")
    assert store.runs_for_delivery("g-merged") == []


async def test_an_inactive_installation_records_nothing(store: Store) -> None:
    seen: list[PullClosed] = []

    async def pull_closed(pull: PullClosed) -> str:
        seen.append(pull)
        return "recorded"

    store.set_installation_state(77, InstallationState.SUSPENDED, delivery_id="g-0")
    deliver(store, "g-1", closed(merged=True))
    await run(store, WorkerHooks(pull_closed=pull_closed))
    assert seen == []
    assert decision(store, "g-1")[0] == "skip"
    assert "installation_inactive" in (decision(store, "g-1")[1] or "")


async def test_without_the_hook_a_close_is_an_unrouted_action(store: Store) -> None:
    deliver(store, "g-1", closed(merged=True))
    await run(store, WorkerHooks())
    assert decision(store, "g-1") == ("skip", "unsupported_action: pull_request.closed")
