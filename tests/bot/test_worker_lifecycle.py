"""An installation's lifecycle through the worker: suspended, deleted, repositories removed.

The deliveries are the real octokit payloads of fixtures/github-payloads, pointed at the
installations of a fake GitHub; the worker's GitHub client is a real one on that fake.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.github.client import GitHubApp, RetryPolicy
from bot.github.errors import AccessRevoked
from bot.runs.runner import job_runner
from bot.runs.worker import Worker, WorkerHooks
from bot.store.backend import job_queue
from bot.store.contract import Storage
from bot.store.postgres.store import PostgresStore
from bot.store.queue.base import JobStatus
from bot.store.queue.sqlite import SqliteJobQueue
from bot.store.sqlite import Store
from policies.config import RepoConfig, parse_repo_config
from policies.event import Event
from policies.lifecycle import InstallationState
from tests.backends import BACKENDS, insert_delivery
from tests.conftest import PAYLOADS
from tests.fakes.github import FakeGitHub, init_bare_repo, make_fake_github

pytestmark = pytest.mark.anyio

SLUG = "repo-agent"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def lifecycle(event: str, action: str, installation: int, **changes: Any) -> dict[str, Any]:
    """The real payload of `event.action`, sent by `installation`."""
    data: dict[str, Any] = json.loads((PAYLOADS / event / f"{action}.payload.json").read_text())
    data["installation"] = {**data["installation"], "id": installation}
    data.update(changes)
    return data


def repos(*names: str) -> list[dict[str, Any]]:
    return [
        {"id": n, "name": name.split("/")[1], "full_name": name} for n, name in enumerate(names)
    ]


def opened(installation: int, repo: str, number: int = 1) -> dict[str, Any]:
    """`issues.opened` (the real payload) on `repo` of `installation`."""
    data: dict[str, Any] = json.loads((PAYLOADS / "issues" / "opened.payload.json").read_text())
    data["installation"] = {"id": installation}
    data["repository"] = {**data["repository"], "full_name": repo, "name": repo.split("/")[1]}
    data["issue"] = {**data["issue"], "number": number}
    return data


class Env:
    def __init__(self, store: Storage, clock: Clock, app: GitHubApp, fake: FakeGitHub) -> None:
        self.store, self.clock, self.app, self.fake = store, clock, app, fake
        self.queue = job_queue(store)
        self.configs: list[str] = []

    def deliver(self, guid: str, event: str, body: dict[str, Any]) -> None:
        raw = json.dumps(body).encode()
        insert_delivery(self.store, guid, self.clock(), event=event, action=None, body=raw)
        assert self.queue.enqueue_sync(guid) is not None

    def worker(self) -> Worker:
        async def config_loader(event: Event) -> RepoConfig:
            self.configs.append(event.delivery_id)  # reading it would use the token
            return parse_repo_config(None)

        hooks = WorkerHooks(config_loader=config_loader, access=self.app)
        return Worker(self.store, self.queue, hooks, app_slug=SLUG, runner=job_runner(self.store))

    def decision(self, guid: str) -> tuple[str | None, str | None]:
        row = self.store.get_delivery(guid)
        assert row is not None
        return row.decision, row.reason

    def job(self, guid: str) -> JobStatus:
        (job,) = self.queue.jobs_for_delivery(guid)
        return job.status

    def hold_elsewhere(self) -> int:
        """Another process takes the next job: claims it (SQLite), or its procrastinate
        worker, heartbeating, fetches it (Postgres)."""
        if isinstance(self.queue, SqliteJobQueue):
            job = self.queue.claim_sync("elsewhere", 300)
            assert job is not None
            return job.id
        assert isinstance(self.store, PostgresStore)
        with self.store.pool.connection() as conn:
            row = conn.execute("SELECT procrastinate_register_worker_v1()").fetchone()
            assert row is not None
            fetched = conn.execute(
                "SELECT id FROM procrastinate_fetch_job_v2(ARRAY['bot']::varchar[], %s)",
                (row[0],),
            ).fetchone()
        assert fetched is not None and fetched[0] is not None
        return int(fetched[0])

    def fail_elsewhere(self, job_id: int) -> None:
        """That process's attempt failed; the job waits for its retry."""
        if isinstance(self.queue, SqliteJobQueue):
            self.queue.fail_sync(job_id, "elsewhere", "RetryableError: 502", True, None)
            return
        assert isinstance(self.store, PostgresStore)
        with self.store.pool.connection() as conn:
            conn.execute(
                "SELECT procrastinate_retry_job_v2(%s, now() + interval '1 hour', NULL, NULL, NULL)",
                (job_id,),
            )

    def schedule(self, guid: str, interval: str) -> None:
        """On Postgres, make the job ready `interval` from the server's now: procrastinate
        measures time by the database's clock, which the test's clock does not drive (on
        SQLite the test's clock does, and this does nothing)."""
        if isinstance(self.store, PostgresStore):
            (job,) = self.queue.jobs_for_delivery(guid)
            with self.store.pool.connection() as conn:
                conn.execute(
                    "UPDATE procrastinate_jobs SET scheduled_at = now() + %s::interval"
                    " WHERE id = %s",
                    (interval, job.id),
                )

    def stopped(self, guid: str) -> bool:
        """The job was cancelled: at once (SQLite's lease taken, or waiting on Postgres), or,
        running on Postgres, its abort requested for procrastinate's worker to carry out."""
        (job,) = self.queue.jobs_for_delivery(guid)
        if job.status is JobStatus.CANCELLED:
            return True
        assert isinstance(self.store, PostgresStore)
        with self.store.pool.connection() as conn:
            row = conn.execute(
                "SELECT abort_requested FROM procrastinate_jobs WHERE id = %s", (job.id,)
            ).fetchone()
        return job.status is JobStatus.RUNNING and row == (True,)


@pytest.fixture(params=BACKENDS)
def env(request: pytest.FixtureRequest, data_dir: Path, tmp_path: Path) -> Iterator[Env]:
    fake = make_fake_github(tmp_path)  # octo/hello in installation 42
    fake.add_repo("octo", "other", init_bare_repo(tmp_path / "other.git", {"a": "a\n"}))
    fake.installations[42].repos.append("octo/other")
    fake.add_repo("evil", "hello", init_bare_repo(tmp_path / "evil.git", {"a": "a\n"}))
    fake.add_installation(43, "evil", ["evil/hello"])
    app = GitHubApp(
        fake.app_id,
        fake.private_key_pem,
        api_url="http://github.test",
        transport=httpx.ASGITransport(fake.app),
        policy=RetryPolicy(mutation_interval_s=0.0, backoff_s=0.01),
    )
    clock = Clock()
    store: Storage = (
        PostgresStore.open(request.getfixturevalue("postgres_dsn"), clock=clock)
        if request.param == "postgres"
        else Store.open(data_dir / "bot.sqlite3", clock=clock)
    )
    yield Env(store, clock, app, fake)
    store.close()


async def test_suspend_cancels_the_installations_queued_and_running_work(env: Env) -> None:
    env.deliver("g-running", "issues", opened(42, "octo/hello", 1))
    env.deliver("g-retrying", "issues", opened(42, "octo/other", 2))
    env.deliver("g-other-installation", "issues", opened(43, "evil/hello", 1))
    # Another process holds the first job and started its run; the second failed once and
    # waits for its retry.
    running = env.hold_elsewhere()
    retrying = env.hold_elsewhere()
    env.store.record_decision("g-running", "trigger", workflow="triage")
    run = env.store.create_run(
        delivery_id="g-running",
        repo="octo/hello",
        target_kind="issue",
        number=1,
        workflow="triage",
        mode="webhook",
        status="running",
    )
    env.fail_elsewhere(retrying)
    # The worker holds installation 42's token already.
    await env.app.installation(42, "octo", "hello").token()
    env.clock.now += 1
    env.deliver("g-suspend", "installation", lifecycle("installation", "suspend", 42))
    env.clock.now += 0.5  # the unsuspend comes later, queued behind the suspend
    env.deliver("g-unsuspend", "installation", lifecycle("installation", "unsuspend", 42))
    env.schedule("g-unsuspend", "1 hour")
    env.clock.now -= 0.5

    worker = env.worker()
    assert await worker.run_until_idle() == 2  # installation 43's issue, then the suspend
    decision, reason = env.decision("g-suspend")
    assert decision == "lifecycle"
    assert (
        reason
        == "installation_suspended: installation 42 was suspended; jobs cancelled: 2, runs stopped: 0"
    )
    assert env.store.installation_state(42) is InstallationState.SUSPENDED
    assert env.stopped("g-running")
    assert env.job("g-retrying") is JobStatus.CANCELLED
    assert env.decision("g-retrying") == (
        "cancelled",
        "installation_suspended: installation 42 was suspended",
    )
    failed = env.store.get_run(run.id)
    assert failed is not None and failed.status == "failed" and failed.outcome is not None
    assert (
        failed.outcome["error"]
        == "cancelled: installation_suspended: installation 42 was suspended"
    )
    assert env.decision("g-other-installation")[0] == "trigger"
    # Its token is gone, and no new one is asked for.
    calls = len(env.fake.calls)
    with pytest.raises(AccessRevoked):
        await env.app.installation(42, "octo", "hello").token()
    assert len(env.fake.calls) == calls

    # The unsuspend, queued behind the suspend, was not cancelled with the rest.
    env.clock.now += 3600
    env.schedule("g-unsuspend", "0 s")
    if isinstance(env.queue, SqliteJobQueue):
        with pytest.raises(Exception, match="no longer leased"):
            await env.queue.heartbeat(running, "elsewhere", 300)
    assert await worker.run_until_idle() == 1
    assert env.decision("g-unsuspend")[0] == "lifecycle"
    assert env.store.installation_state(42) is InstallationState.ACTIVE
    assert (await env.app.installation(42, "octo", "hello").token()).startswith("ghs_")


async def test_a_suspended_installations_deliveries_skip_until_it_is_unsuspended(
    env: Env,
) -> None:
    env.deliver("g-suspend", "installation", lifecycle("installation", "suspend", 42))
    worker = env.worker()
    await worker.run_until_idle()
    env.clock.now += 1
    env.deliver("g-while", "issues", opened(42, "octo/hello"))
    env.deliver("g-elsewhere", "issues", opened(43, "evil/hello"))
    await worker.run_until_idle()
    assert env.decision("g-while") == (
        "skip",
        "installation_inactive: installation 42 is suspended; nothing runs until it is unsuspended",
    )
    assert env.job("g-while") is JobStatus.DONE
    assert env.configs == ["g-elsewhere"]  # nothing is read for the suspended one
    assert env.decision("g-elsewhere")[0] == "trigger"

    env.clock.now += 1
    env.deliver("g-unsuspend", "installation", lifecycle("installation", "unsuspend", 42))
    env.clock.now += 1
    env.deliver("g-after", "issues", opened(42, "octo/hello", 2))
    await worker.run_until_idle()
    assert env.decision("g-after")[0] == "trigger"


async def test_a_deleted_installation_stays_deleted(env: Env) -> None:
    env.deliver("g-delete", "installation", lifecycle("installation", "deleted", 42))
    env.clock.now += 1
    env.deliver("g-unsuspend", "installation", lifecycle("installation", "unsuspend", 42))
    worker = env.worker()
    await worker.run_until_idle()
    env.clock.now += 1
    env.deliver("g-late", "issues", opened(42, "octo/hello"))
    await worker.run_until_idle()
    assert env.store.installation_state(42) is InstallationState.DELETED
    decision, reason = env.decision("g-late")
    assert decision == "skip" and reason is not None
    assert reason.startswith("installation_inactive: installation 42 was deleted")


async def test_removed_repositories_cancel_only_their_own_work(env: Env) -> None:
    env.deliver("g-hello", "issues", opened(42, "octo/hello", 1))
    env.deliver("g-other", "issues", opened(42, "octo/other", 2))
    env.deliver("g-evil", "issues", opened(43, "evil/hello", 1))
    for _ in range(3):  # held elsewhere, so the removal finds them pending
        env.hold_elsewhere()
    hello, other = (
        env.app.installation(42, "octo", "hello"),
        env.app.installation(42, "octo", "other"),
    )
    await hello.token()
    await other.token()
    env.clock.now += 1
    removed = repos("octo/hello")
    env.deliver(
        "g-removed",
        "installation_repositories",
        lifecycle("installation_repositories", "removed", 42, repositories_removed=removed),
    )
    await env.worker().run_until_idle()
    assert env.stopped("g-hello")
    assert env.job("g-other") is JobStatus.RUNNING
    assert env.job("g-evil") is JobStatus.RUNNING
    assert env.decision("g-removed")[1] == (
        "repositories_removed: octo/hello of installation 42; jobs cancelled: 1, runs stopped: 0"
    )
    assert env.store.installation_state(42) is None  # the installation itself stays active
    with pytest.raises(AccessRevoked):
        await hello.token()
    calls = len(env.fake.calls)
    await other.token()  # still cached
    assert len(env.fake.calls) == calls

    # Added back: its tokens may be asked for again.
    env.clock.now += 1
    added = repos("octo/hello")
    env.deliver(
        "g-added",
        "installation_repositories",
        lifecycle("installation_repositories", "added", 42, repositories_added=added),
    )
    await env.worker().run_until_idle()
    assert env.decision("g-added") == (
        "lifecycle",
        "repositories_added: octo/hello of installation 42",
    )
    assert (await hello.token()).startswith("ghs_")


async def test_an_installation_cannot_cancel_another_installations_work(env: Env) -> None:
    # Installation 43 says it lost octo/hello, which is installation 42's.
    env.deliver("g-hello", "issues", opened(42, "octo/hello", 1))
    env.hold_elsewhere()
    await env.app.installation(42, "octo", "hello").token()
    env.clock.now += 1
    body = lifecycle(
        "installation_repositories", "removed", 43, repositories_removed=repos("octo/hello")
    )
    env.deliver("g-foreign", "installation_repositories", body)
    env.deliver("g-foreign-suspend", "installation", lifecycle("installation", "suspend", 43))
    await env.worker().run_until_idle()
    assert env.job("g-hello") is JobStatus.RUNNING
    assert env.store.installation_state(42) is None
    calls = len(env.fake.calls)
    await env.app.installation(42, "octo", "hello").token()  # its token is still cached
    assert len(env.fake.calls) == calls
