"""Fencing: a run calls the model and writes to GitHub only while its claim holds the job.

On SQLite's LeasedQueue: the fencing token of each claim (`LeasedQueue.still_holds`), the
`Fence` a worker gives each job, and the worker leaving a job it lost to its new holder
(Postgres's claims are procrastinate's: tests/bot/test_queue.py and test_procrastinate_pool.py). Then the three
places a run acts outside the store, each checked before it acts: the agent runtime's model
calls, the installation client's writes, and the mirror's push.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import anyio.lowlevel
import pytest

from bot.agents.openai_model import OpenAIChatModel
from bot.agents.runtime import AgentRuntime
from bot.agents.sandbox import SandboxStatus
from bot.engine.artifacts import RunStore
from bot.git.checkout import Mirrors
from bot.runs.worker import Worker, WorkerHooks
from bot.store.contract import RunRecord, Storage
from bot.store.queue.base import JobStatus, LeaseLost
from bot.store.queue.fence import Fence, check_fence, current_fence, fence_lost, fenced
from bot.store.queue.sqlite import SqliteJobQueue
from bot.store.sqlite import Store
from policies.event import Trigger
from tests.agents.conftest import FAST, invocation
from tests.backends import insert_delivery
from tests.bot.test_queue import FakeClock
from tests.bot.test_worker import payload
from tests.fakes.github import commit_files, make_fake_github, serve_fake_github
from tests.fakes.llm import FakeLLM, text
from tests.github._client_world import hello_world, make_app
from tests.github.test_checkout import client_for, mirror_with_main

pytestmark = pytest.mark.anyio

LEASE = 30.0


@dataclass
class Backend:
    store: Storage
    queue: SqliteJobQueue
    clock: FakeClock


@pytest.fixture
def backend(data_dir: Path) -> Iterator[Backend]:
    clock = FakeClock()
    store = Store.open(data_dir / "bot.sqlite3", clock=clock)
    yield Backend(store, SqliteJobQueue(store), clock)
    store.close()


class Reads:
    """A fence's `holds`: what the store answers (or a fixed answer), counted."""

    def __init__(self, backend: Backend | None = None, job_id: int = 0, worker: str = "") -> None:
        self.backend, self.job_id, self.worker = backend, job_id, worker
        self.token = 0
        self.answer = True
        self.count = 0

    async def __call__(self) -> bool:
        self.count += 1
        if self.backend is None:
            return self.answer
        return await self.backend.queue.still_holds(self.job_id, self.worker, self.token)


def fence_of(reads: Reads, stopped: list[str] | None = None) -> Fence:
    def stop() -> None:
        if stopped is not None:
            stopped.append("stopped")

    return Fence(reads, job_id=reads.job_id, delivery_id="d-1", on_lost=stop)


# -- the token on both backends -------------------------------------------------------------


async def test_only_the_claim_that_got_the_token_still_holds_the_job(backend: Backend) -> None:
    q = backend.queue
    await q.enqueue("d-1")
    job = await q.claim("w1", LEASE)
    assert job is not None
    assert await q.still_holds(job.id, "w1", job.lease_token)
    assert not await q.still_holds(job.id, "w2", job.lease_token)
    assert not await q.still_holds(job.id, "w1", job.lease_token + 1)

    # A lease that ran out is not held, although nobody has claimed the job yet.
    backend.clock.advance(LEASE + 1)
    assert not await q.still_holds(job.id, "w1", job.lease_token)

    # The same worker id claiming it again is another claim: the old token holds nothing.
    again = await q.claim("w1", LEASE)
    assert again is not None and again.id == job.id
    assert again.lease_token > job.lease_token
    assert not await q.still_holds(job.id, "w1", job.lease_token)
    assert await q.still_holds(job.id, "w1", again.lease_token)
    assert (await q.get(job.id)) == again

    await q.complete(job.id, "w1")
    assert not await q.still_holds(job.id, "w1", again.lease_token)


async def test_a_heartbeat_keeps_the_token_and_a_deferred_job_gets_a_new_one(
    backend: Backend,
) -> None:
    q = backend.queue
    await q.enqueue("d-1")
    job = await q.claim("w1", LEASE)
    assert job is not None
    backend.clock.advance(LEASE - 1)
    await q.heartbeat(job.id, "w1", LEASE)
    backend.clock.advance(LEASE - 1)
    assert await q.still_holds(job.id, "w1", job.lease_token)
    await q.defer(job.id, "w1", "waiting", backend.clock.now)
    assert not await q.still_holds(job.id, "w1", job.lease_token)
    later = await q.claim("w1", LEASE)
    assert later is not None and later.lease_token > job.lease_token


async def test_a_cancelled_job_is_held_by_nobody(backend: Backend) -> None:
    q = backend.queue
    await q.enqueue("d-1")
    job = await q.claim("w1", LEASE)
    assert job is not None
    await q.cancel(["d-1"], "installation deleted")
    assert not await q.still_holds(job.id, "w1", job.lease_token)


# -- the fence ------------------------------------------------------------------------------


async def test_a_fence_reads_the_store_at_every_check_and_stays_lost(backend: Backend) -> None:
    q = backend.queue
    await q.enqueue("d-1")
    job = await q.claim("w1", LEASE)
    assert job is not None
    reads = Reads(backend, job.id, "w1")
    reads.token = job.lease_token
    stopped: list[str] = []
    fence = fence_of(reads, stopped)
    await fence.check()
    await fence.check()
    assert reads.count == 2 and not fence.lost  # no answer is remembered while it holds

    backend.clock.advance(LEASE + 1)  # paused past the lease; another worker takes it
    assert await q.claim("w2", LEASE) is not None
    with pytest.raises(LeaseLost):
        await fence.check()
    assert fence.lost and stopped == ["stopped"]
    with pytest.raises(LeaseLost):
        await fence.check()
    assert reads.count == 3 and stopped == ["stopped"]  # lost for good, stopped once


async def test_outside_a_job_nothing_is_checked() -> None:
    assert current_fence() is None and not fence_lost()
    await check_fence()
    reads = Reads()
    with fenced(fence_of(reads)) as fence:
        assert current_fence() is fence
        await check_fence()
    assert current_fence() is None and reads.count == 1


def issue_opened() -> bytes:
    return json.dumps(payload("issues/opened.payload.json")).encode()


async def test_a_worker_that_lost_its_lease_stops_the_run_and_leaves_the_job(
    backend: Backend,
) -> None:
    """Paused past its lease mid-run, the worker finds the job taken over at its next check:
    the run stops there, even where the error is caught, and the job is left to the worker
    that holds it now: neither completed nor failed, its run not marked."""
    insert_delivery(backend.store, "g-1", event="issues", body=issue_opened())
    await backend.queue.enqueue("g-1")
    steps: list[str] = []

    async def executor(trigger: Trigger, run: RunRecord) -> None:
        backend.clock.advance(LEASE + 1)
        taken = await backend.queue.claim("other", 600)
        assert taken is not None and taken.delivery_id == "g-1"
        try:
            await check_fence()
        except LeaseLost:  # as a broad `except Exception` somewhere in a run would
            steps.append("caught")
        await anyio.lowlevel.checkpoint()  # the fence stopped the work: cancelled here
        steps.append("went on")

    worker = Worker(
        backend.store,
        backend.queue,
        WorkerHooks(executor=executor),
        app_slug="repo-agent",
        lease_seconds=LEASE,
    )
    assert await worker.run_until_idle() == 1
    assert steps == ["caught"]
    (job,) = backend.queue.jobs_for_delivery("g-1")
    assert (job.status, job.lease_owner, job.attempts) == (JobStatus.RUNNING, "other", 2)
    (run,) = backend.store.runs_for_delivery("g-1")
    assert run.status == "queued"


async def test_a_run_whose_lease_is_lost_writes_no_artifact(
    backend: Backend, data_dir: Path
) -> None:
    """The journal and workflow.json are written without awaiting: they ask the store too,
    so a paused attempt cannot replace what the job's new holder wrote."""
    q = backend.queue
    await q.enqueue("d-1")
    job = await q.claim("w1", LEASE)
    assert job is not None
    fence = Fence(
        Reads(),
        job_id=job.id,
        delivery_id="d-1",
        holds_now=partial(q.still_holds_sync, job.id, "w1", job.lease_token),
    )
    artifacts = RunStore(data_dir, mirror=backend.store)
    run_id = "wf_0123456789ab"
    with fenced(fence):
        artifacts.write_text(run_id, "journal.json", "mine")
        backend.clock.advance(LEASE + 1)
        assert await q.claim("w2", LEASE) is not None
        artifacts.write_text(run_id, "journal.json", "stale")
    assert fence.lost
    assert backend.store.get_artifact(run_id, "journal.json") == "mine"
    assert (artifacts.run_dir(run_id) / "journal.json").read_text() == "mine"
    artifacts.write_text(run_id, "journal.json", "the new holder's")  # outside that job
    assert backend.store.get_artifact(run_id, "journal.json") == "the new holder's"


# -- where a run acts: the model, GitHub, git push -------------------------------------------


def runtime_on(fake: FakeLLM) -> AgentRuntime:
    model = OpenAIChatModel(fake.base_url, "sk-test", http_client=fake.client(), stream=False)
    return AgentRuntime(
        model, default_model="fake-model", sandbox=SandboxStatus(False, "off"), limits=FAST
    )


async def test_no_model_call_leaves_a_run_whose_lease_is_lost() -> None:
    fake = FakeLLM([text("one"), text("two")])
    runtime = runtime_on(fake)
    reads = Reads()
    try:
        with fenced(fence_of(reads)):
            result = await runtime.run(invocation())
            assert result.output == "one" and reads.count == 1  # asked before the call
            reads.answer = False
            with pytest.raises(LeaseLost):
                await runtime.run(invocation())
    finally:
        await runtime.aclose()
    assert len(fake.bodies) == 1 and fake.remaining == 1


async def test_no_github_write_leaves_a_run_whose_lease_is_lost(tmp_path: Path) -> None:
    fake = hello_world(tmp_path)
    app = make_app(fake)
    client = app.installation(42, "octo", "hello")
    reads = Reads()
    try:
        with fenced(fence_of(reads)):
            fake.fail_next("POST", "/repos/octo/hello/issues/1/comments", 502)
            await client.create_issue_comment(1, "first")
            assert reads.count == 2  # asked again before the retried try
            await client.get_issue(1)  # reads are not writes: not asked
            assert reads.count == 2
            reads.answer = False
            with pytest.raises(LeaseLost):
                await client.create_issue_comment(1, "second")
            with pytest.raises(LeaseLost):
                await client.add_issue_reaction(1)
            assert (await client.get_issue(1)).number == 1
    finally:
        await app.aclose()
    bodies = [c.json["body"] for c in fake.writes()]
    assert bodies == ["first", "first"]  # the 502'd try and its retry; nothing after


async def test_no_push_leaves_a_run_whose_lease_is_lost(tmp_path: Path, data_dir: Path) -> None:
    fake = make_fake_github(tmp_path, files={"README.md": "hello\n"})
    reads = Reads()
    reads.answer = False
    with serve_fake_github(fake) as base_url:
        mirrors, git_dir = await mirror_with_main(fake, base_url, data_dir)
        assert isinstance(mirrors, Mirrors)
        sha = commit_files(git_dir, "work", {"fix.txt": "fixed\n"}, "Fix", base="main")
        with fenced(fence_of(reads)), pytest.raises(LeaseLost):
            await mirrors.push_branch(client_for(fake), sha, "bot/fix-1-crash")
    assert fake.pushes == [] and fake.calls_to("POST", "/octo/hello.git/git-receive-pack") == []
