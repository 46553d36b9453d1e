"""One run per target, and `stop` across workers: two worker pools on one store, on either
backend.

Each pool has its own engine and data directory, as two machines would; they share the
store (the database) and the fake GitHub. A `stop` handled by one pool stops a run the other
carries out, and a second command on the same issue waits for the first to end.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from bot.agents.runtime import build_runner
from bot.agents.sandbox import SandboxStatus
from bot.engine.engine import Engine
from bot.git.checkout import Mirrors
from bot.github.client import GitHubApp, RetryPolicy
from bot.runs.execute import RunExecutor
from bot.runs.runner import job_runner
from bot.runs.worker import Worker, WorkerHooks
from bot.settings import Settings
from bot.store.backend import InspectableQueue, job_queue
from bot.store.contract import RunRecord, Storage
from bot.store.postgres.store import PostgresStore
from bot.store.sqlite import Store
from bot.workflows.flows import FLOWS
from policies.event import Event
from tests.backends import BACKENDS, insert_delivery
from tests.fakes.github import FakeGitHub, make_fake_github, serve_fake_github
from tests.fakes.llm import FakeLLM, Reply
from tests.scripted import ModelScript, comment_created, user_prompt

pytestmark = pytest.mark.anyio

FILES = {"src/app.py": "config = load('config.yml')\n", "README.md": "app\n"}


@dataclass
class Pools:
    fake: FakeGitHub
    llm: FakeLLM
    store: Storage
    queue: InspectableQueue
    workers: list[Worker]
    counter: int = 0

    def command(self, number: int, text: str) -> str:
        comment = self.fake.add_comment("octo", "hello", number, text, user="maint")
        issue = self.fake.repos["octo/hello"].issues[number]
        payload = comment_created(issue, comment, "octo/hello", 42)
        self.counter += 1
        guid = f"guid-{self.counter}"
        body = json.dumps(payload).encode()
        insert_delivery(self.store, guid, 0.0, event="issue_comment", action=None, body=body)
        assert self.queue.enqueue_sync(guid) is not None
        return guid

    def run_of(self, guid: str) -> RunRecord | None:
        runs = self.store.runs_for_delivery(guid)
        return runs[0] if runs else None


@pytest.fixture(params=BACKENDS)
async def pools(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Pools]:
    fake = make_fake_github(tmp_path, files=FILES)
    fake.set_permission("octo", "hello", "maint", "write")
    fake.add_issue("octo", "hello", title="Where is the config read?", body="?", user="maint")
    llm = FakeLLM()
    llm.respond_with(ModelScript())
    with serve_fake_github(fake) as gh_url:
        store: Storage = (
            PostgresStore.open(request.getfixturevalue("postgres_dsn"))
            if request.param == "postgres"
            else Store.open(tmp_path / "bot.sqlite3")
        )
        queue = job_queue(store)
        githubs: list[GitHubApp] = []
        workers: list[Worker] = []
        for n in range(2):
            data = tmp_path / f"machine-{n}"
            settings = Settings(model="fake-model", llm_base_url=llm.base_url, llm_stream=False)
            runner = build_runner(
                settings, http_client=llm.client(), sandbox=SandboxStatus(False, "test")
            )
            github = GitHubApp(
                fake.app_id,
                fake.private_key_pem,
                api_url=gh_url,
                app_slug=fake.slug,
                policy=RetryPolicy(backoff_s=0.01, mutation_interval_s=0.0),
            )
            githubs.append(github)
            executor = RunExecutor(
                github=github,
                engine=Engine(runner, data_dir=data),
                mirrors=Mirrors(data, web_url=gh_url, allow_http=True),
                store=store,
                app_slug=fake.slug,
                flows=FLOWS,
                progress_interval=60.0,
            )

            async def permission(event: Event, github: GitHubApp = github) -> str | None:
                assert event.installation_id is not None and event.sender_login is not None
                client = github.installation(event.installation_id, "octo", "hello")
                return await client.get_collaborator_permission(event.sender_login)

            hooks = WorkerHooks(permission_lookup=permission, executor=executor, app_slug=fake.slug)
            runner = job_runner(store)
            workers.append(Worker(store, queue, hooks, app_slug=fake.slug, runner=runner))
        try:
            yield Pools(fake, llm, store, queue, workers)
        finally:
            for github in githubs:
                await github.aclose()
            store.close()


def slow_answers(seconds: float, asked: list[tuple[float, str]]) -> Any:
    script = ModelScript()

    def respond(body: dict[str, Any]) -> Reply:
        prompt = user_prompt(body)
        asked.append((time.monotonic(), prompt.split("\n", 1)[0][:40]))
        reply = script(body)
        if prompt.startswith("Answer this question"):
            return dataclasses.replace(reply, delay=seconds)
        return reply

    return respond


async def until(what: str, done: Any, seconds: float = 20.0) -> None:
    with anyio.fail_after(seconds):
        while not done():  # noqa: ASYNC110 (the database, polled)
            await anyio.sleep(0.02)


async def test_stop_on_one_worker_stops_a_run_on_the_other(pools: Pools) -> None:
    asked: list[tuple[float, str]] = []
    pools.llm.respond_with(slow_answers(60.0, asked))
    first, second = pools.workers
    ask = pools.command(1, f"@{pools.fake.slug} ask where is the config read?")
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(first.run_until_idle, "machine-0")
        await until("the answer's call", lambda: any(t.startswith("Answer") for _, t in asked))
        stop = pools.command(1, f"@{pools.fake.slug} stop")
        stopped_at = time.monotonic()
        assert await second.run_until_idle("machine-1") == 1
        await until(
            "the stopped run", lambda: (r := pools.run_of(ask)) is not None and r.status == "failed"
        )
        took = time.monotonic() - stopped_at
    assert took < 15  # a generous bound: the watcher looks every second
    run = pools.run_of(ask)
    assert run is not None and run.outcome is not None
    assert "stopped" in str(run.outcome["summary"]).lower()
    bodies = [
        c["body"]
        for c in pools.fake.comments_on("octo", "hello", 1)
        if c["user"]["login"] == pools.fake.bot_login
    ]
    assert any("Stopped `" in b for b in bodies)  # the stop reply names the run
    assert pools.run_of(stop) is not None


async def test_a_second_command_on_the_same_target_waits_for_the_first(pools: Pools) -> None:
    asked: list[tuple[float, str]] = []
    pools.llm.respond_with(slow_answers(1.5, asked))
    first, second = pools.workers
    one = pools.command(1, f"@{pools.fake.slug} ask where is the config read?")
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(first.run_until_idle, "machine-0")
        await until(
            "the first run", lambda: (r := pools.run_of(one)) is not None and r.status == "running"
        )
        two = pools.command(1, f"@{pools.fake.slug} ask and where is it written?")
        tasks.start_soon(second.run_until_idle, "machine-1")
    runs = [pools.run_of(one), pools.run_of(two)]
    assert all(r is not None and r.status == "succeeded" for r in runs)
    answered = min(t for t, p in asked if p.startswith("Answer")) + 1.5  # its reply's delay
    explores = [t for t, p in asked if p.startswith("Someone with write access")]
    # The second run's agents started only after the first run's answer came back.
    assert len(explores) == 2 and explores[1] >= answered


async def test_a_command_behind_a_long_run_gives_its_slot_back_until_its_turn(
    pools: Pools, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("bot.runs.execute.TARGET_WAIT_IN_SLOT_S", 0.3)
    monkeypatch.setattr("bot.runs.execute.TARGET_RETRY_S", 0.5)
    asked: list[tuple[float, str]] = []
    pools.llm.respond_with(slow_answers(3.0, asked))
    first, second = pools.workers
    one = pools.command(1, f"@{pools.fake.slug} ask where is the config read?")
    seen_waiting: list[int] = []
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(first.run_until_idle, "machine-0")
        await until(
            "the first run", lambda: (r := pools.run_of(one)) is not None and r.status == "running"
        )
        two = pools.command(1, f"@{pools.fake.slug} ask and where is it written?")

        def done() -> bool:
            run = pools.run_of(two)
            return run is not None and run.status == "succeeded"

        # The second machine takes the command, finds the target held and puts the job back:
        # between its tries the job is queued, its attempt not counted, and the slot free.
        while not done():
            handled = await second.run_until_idle("machine-1")
            (job,) = pools.queue.jobs_for_delivery(two)
            if job.status.value == "queued":
                seen_waiting.append(job.attempts)
                assert (job.last_error or "").startswith("waiting for run wf_")
            if not handled:
                await anyio.sleep(0.1)
    assert seen_waiting and set(seen_waiting) == {0}
    (job,) = pools.queue.jobs_for_delivery(two)
    assert job.status.value == "done" and job.attempts == 1
    runs = [pools.run_of(one), pools.run_of(two)]
    assert all(r is not None and r.status == "succeeded" for r in runs)
    answered = min(t for t, p in asked if p.startswith("Answer")) + 3.0
    explores = [t for t, p in asked if p.startswith("Someone with write access")]
    assert len(explores) == 2 and explores[1] >= answered
