"""The worker: stored delivery -> decision on the row -> Run in webhook mode -> executor."""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from bot import log as bot_log
from bot.github.errors import RateLimited
from bot.runs.worker import Worker, WorkerHooks
from bot.settings import Settings
from bot.store.queue.base import JobStatus
from bot.store.queue.sqlite import SqliteJobQueue, insert_job
from bot.store.sqlite import RunRecord, Store, transaction
from bot.wiring import build_worker_hooks
from policies.config import RepoConfig, parse_repo_config
from policies.event import Event, Trigger
from policies.readiness import Setup
from tests.conftest import PAYLOADS

pytestmark = pytest.mark.anyio

SLUG = "repo-agent"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def payload(path: str, **changes: object) -> dict[str, object]:
    source = PAYLOADS / path
    assert source.is_file(), f"{source} is missing from the fixtures"
    data: dict[str, object] = json.loads(source.read_text())
    data.update(changes)
    return data


def comment_payload(body: str) -> dict[str, object]:
    data = payload("issue_comment/created.payload.json")
    comment = dict(data["comment"])  # type: ignore[call-overload]
    comment["body"] = body
    data["comment"] = comment
    return data


class Env:
    def __init__(self, store: Store, clock: FakeClock) -> None:
        self.store = store
        self.clock = clock
        self.queue = SqliteJobQueue(store)

    def deliver(self, guid: str, event: str, body: dict[str, object] | bytes) -> None:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        conn = self.store.conn()
        with transaction(conn):
            conn.execute(
                "INSERT INTO deliveries (guid, event, received_at, headers, body)"
                " VALUES (?, ?, ?, '{}', ?)",
                (guid, event, self.clock(), raw),
            )
            insert_job(conn, guid, self.clock())

    def worker(self, hooks: WorkerHooks | None = None, **kw: object) -> Worker:
        return Worker(self.store, self.queue, hooks or WorkerHooks(), app_slug=SLUG, **kw)  # type: ignore[arg-type]

    def decision(self, guid: str) -> tuple[str | None, str | None, str | None]:
        row = self.store.get_delivery(guid)
        assert row is not None
        return row.decision, row.workflow, row.reason


@pytest.fixture
def env(data_dir: Path) -> Iterator[Env]:
    clock = FakeClock()
    store = Store.open(data_dir / "bot.sqlite3", clock=clock)
    yield Env(store, clock)
    store.close()


async def test_issue_opened_creates_a_webhook_mode_run(env: Env) -> None:
    """Without an executor nothing carries the run out: it is recorded, never left queued."""
    env.deliver("g-1", "issues", payload("issues/opened.payload.json"))
    assert await env.worker().run_until_idle() == 1
    assert env.decision("g-1")[:2] == ("trigger", "triage")
    (run,) = env.store.runs_for_delivery("g-1")
    assert (run.workflow, run.mode, run.status, run.repo, run.number) == (
        "triage",
        "webhook",
        "skipped",
        "Codertocat/Hello-World",
        1,
    )
    assert env.queue.counts_sync()[JobStatus.DONE] == 1


async def test_a_trigger_the_settings_cannot_carry_out_records_no_run(env: Env) -> None:
    """No model: the issue and the command skip `not_configured`; `help` still runs. Once a
    model is configured, the same delivery queued again runs (its key was never claimed)."""
    started: list[str] = []

    async def executor(trigger: Trigger, run: RunRecord) -> None:
        started.append(trigger.workflow)
        env.store.update_run(run.id, status="succeeded")

    async def writer(event: Event) -> str | None:
        return "write"

    no_model = Setup(credentials=True, model=False, model_free=frozenset({"help"}))
    hooks = WorkerHooks(executor=executor, permission_lookup=writer, setup=no_model)
    env.deliver("g-issue", "issues", payload("issues/opened.payload.json"))
    env.deliver("g-ask", "issue_comment", comment_payload("@repo-agent ask why?"))
    env.clock.now += 1
    env.deliver("g-help", "issue_comment", comment_payload("@repo-agent help"))
    assert await env.worker(hooks).run_until_idle() == 3
    for guid in ("g-issue", "g-ask"):
        decision, workflow, reason = env.decision(guid)
        assert (decision, workflow) == ("skip", None)
        assert reason is not None and reason.startswith("not_configured: missing a model")
        assert f"bot replay --delivery {guid}" in reason
        assert env.store.runs_for_delivery(guid) == []
    assert started == ["help"]

    ready = WorkerHooks(executor=executor, setup=Setup(credentials=True, model=True))
    env.queue.enqueue_sync("g-issue", kind="replay-1")
    assert await env.worker(ready).run_until_idle() == 1
    assert env.decision("g-issue")[:2] == ("trigger", "triage")
    assert started == ["help", "triage"]


async def test_without_credentials_nothing_is_recorded_as_a_run(env: Env) -> None:
    hooks = WorkerHooks(setup=Setup(credentials=False, model=True))
    env.deliver("g-1", "issues", payload("issues/opened.payload.json"))
    assert await env.worker(hooks).run_until_idle() == 1
    decision, _, reason = env.decision("g-1")
    assert decision == "skip"
    assert reason is not None and reason.startswith("not_configured: missing GitHub App")
    assert env.store.runs_for_delivery("g-1") == []


async def test_ping_is_skipped_with_a_reason(env: Env) -> None:
    env.deliver("g-ping", "ping", payload("ping/payload.json"))
    await env.worker().run_until_idle()
    decision, workflow, reason = env.decision("g-ping")
    assert (decision, workflow) == ("skip", None)
    assert reason is not None and reason.startswith("unsupported_event")


async def test_unknown_event_is_skipped(env: Env) -> None:
    env.deliver("g-star", "star", {"action": "created"})
    await env.worker().run_until_idle()
    assert env.decision("g-star")[0] == "skip"


async def test_payload_mode_keys_cannot_change_the_mode(env: Env) -> None:
    body = payload(
        "pull_request/opened.payload.json",
        interaction_mode="interactive",
        context={"interaction_mode": "interactive", "channel_name": "cli"},
        configurable={"interaction_mode": "interactive"},
    )
    env.deliver("g-pr", "pull_request", body)
    await env.worker().run_until_idle()
    (run,) = env.store.runs_for_delivery("g-pr")
    assert (run.workflow, run.mode) == ("review", "webhook")


async def test_permission_is_looked_up_only_when_the_decision_needs_it(env: Env) -> None:
    asked: list[str | None] = []

    async def lookup(event: Event) -> str | None:
        asked.append(event.sender_login)
        return "write"

    hooks = WorkerHooks(permission_lookup=lookup)
    env.deliver("g-issue", "issues", payload("issues/opened.payload.json"))
    await env.worker(hooks).run_until_idle()
    assert asked == []
    env.deliver("g-cmd", "issue_comment", comment_payload(f"@{SLUG} fix please"))
    await env.worker(hooks).run_until_idle()
    assert asked == ["Codertocat"]
    assert env.decision("g-cmd")[:2] == ("trigger", "fix")


_comment_ids = itertools.count(900_000_001)


def reporter_reply(
    body: str = "It fails on `app start` with version 2.1.", **sender: str
) -> dict[str, object]:
    """A new comment each time (its own id), as GitHub sends one reply after another."""
    data = comment_payload(body)
    data["comment"] = {**data["comment"], "id": next(_comment_ids)}  # type: ignore[dict-item]
    if sender:
        data["sender"] = {**data["sender"], **sender}  # type: ignore[dict-item]
    return data


async def test_the_reporters_replies_triage_again_three_times_without_permission(
    env: Env,
) -> None:
    asked: list[str | None] = []
    handed: list[Trigger] = []

    async def lookup(event: Event) -> str | None:
        asked.append(event.sender_login)
        return "read"

    async def executor(trigger: Trigger, run: RunRecord) -> None:
        handed.append(trigger)
        env.store.update_run(run.id, status="needs_info")  # what triage concluded

    worker = env.worker(WorkerHooks(permission_lookup=lookup, executor=executor))
    env.deliver("g-open", "issues", payload("issues/opened.payload.json"))
    await worker.run_until_idle()
    for n in range(1, 5):
        env.clock.now += 1
        env.deliver(f"g-reply-{n}", "issue_comment", reporter_reply())
        await worker.run_until_idle()
    assert [env.decision(f"g-reply-{n}")[:2] for n in range(1, 4)] == [("trigger", "triage")] * 3
    assert env.decision("g-reply-1")[2] == "reporter_reply"
    assert [(t.workflow, t.reporter_reply, t.command) for t in handed] == [
        ("triage", False, None),
        *[("triage", True, None)] * 3,
    ]
    assert all(t.comment_id is not None for t in handed[1:])
    decision, _, reason = env.decision("g-reply-4")
    assert decision == "skip"
    assert reason is not None and reason.startswith("reply_limit")
    assert env.store.runs_for_delivery("g-reply-4") == []
    assert asked == []  # the reporter's permission is never read


async def test_a_reply_counts_only_while_triage_waits_on_the_reporter(env: Env) -> None:
    statuses = iter(["succeeded"])

    async def executor(trigger: Trigger, run: RunRecord) -> None:
        env.store.update_run(run.id, status=next(statuses))

    worker = env.worker(WorkerHooks(executor=executor))
    env.deliver("g-reply-0", "issue_comment", reporter_reply())
    await worker.run_until_idle()  # never triaged
    env.deliver("g-open", "issues", payload("issues/opened.payload.json"))
    await worker.run_until_idle()
    env.clock.now += 1
    env.deliver("g-reply-1", "issue_comment", reporter_reply())  # triage answered already
    await worker.run_until_idle()
    for guid in ("g-reply-0", "g-reply-1"):
        decision, _, reason = env.decision(guid)
        assert (decision, reason) == ("skip", "not_addressed")


async def test_only_the_reporter_and_no_bot_gets_a_reply_triaged(env: Env) -> None:
    async def executor(trigger: Trigger, run: RunRecord) -> None:
        env.store.update_run(run.id, status="needs_info")

    worker = env.worker(WorkerHooks(executor=executor))
    env.deliver("g-open", "issues", payload("issues/opened.payload.json"))
    await worker.run_until_idle()
    env.clock.now += 1
    env.deliver("g-other", "issue_comment", reporter_reply(login="someone-else"))
    env.deliver("g-bot", "issue_comment", reporter_reply(login="ci[bot]", type="Bot"))
    env.deliver("g-self", "issue_comment", reporter_reply(login=f"{SLUG}[bot]", type="Bot"))
    await worker.run_until_idle()
    reasons = [env.decision(g)[2] for g in ("g-other", "g-bot", "g-self")]
    assert reasons == [
        "not_addressed",
        "bot_sender: sent by ci[bot]",
        f"self_event: sent by {SLUG}[bot]",
    ]


async def test_a_retried_reply_decides_as_its_first_attempt_did(env: Env) -> None:
    attempts: list[str] = []

    async def executor(trigger: Trigger, run: RunRecord) -> None:
        attempts.append(run.id)
        if trigger.reporter_reply and len(attempts) == 2:
            env.store.update_run(run.id, status="running")
            raise RuntimeError("crash mid-run")
        env.store.update_run(run.id, status="needs_info")

    worker = env.worker(WorkerHooks(executor=executor))
    env.deliver("g-open", "issues", payload("issues/opened.payload.json"))
    await worker.run_until_idle()
    env.clock.now += 1
    env.deliver("g-reply", "issue_comment", reporter_reply())
    await worker.run_until_idle()
    env.clock.now += 3600
    await worker.run_until_idle()
    assert len(attempts) == 3 and attempts[1] == attempts[2]
    assert env.decision("g-reply")[:3] == ("trigger", "triage", "reporter_reply")


async def test_unknown_permission_fails_closed(env: Env) -> None:
    env.deliver("g-cmd", "issue_comment", comment_payload(f"@{SLUG} fix"))
    await env.worker().run_until_idle()
    decision, _, reason = env.decision("g-cmd")
    assert decision == "skip"
    assert reason is not None and reason.startswith("no_permission")
    assert env.store.runs_for_delivery("g-cmd") == []


async def test_invalid_repo_config_becomes_a_visible_skip(env: Env) -> None:
    async def broken(event: Event) -> RepoConfig:
        return parse_repo_config("review: [not, a, mapping]\n")

    env.deliver("g-pr", "pull_request", payload("pull_request/opened.payload.json"))
    await env.worker(WorkerHooks(config_loader=broken)).run_until_idle()
    decision, _, reason = env.decision("g-pr")
    assert decision == "skip"
    assert reason is not None and reason.startswith("invalid_config") and "line 1" in reason


async def test_config_comes_from_the_loader(env: Env) -> None:
    async def disabled(event: Event) -> RepoConfig:
        return parse_repo_config("enabled: false\n")

    env.deliver("g-pr", "pull_request", payload("pull_request/opened.payload.json"))
    await env.worker(WorkerHooks(config_loader=disabled)).run_until_idle()
    assert env.decision("g-pr")[0] == "skip"


@pytest.mark.parametrize("body", [b"not json at all", b"[1, 2, 3]", b"\xff\xfe"])
async def test_unusable_stored_payload_is_recorded_not_retried(env: Env, body: bytes) -> None:
    env.deliver("g-bad", "issues", body)
    assert await env.worker().run_until_idle() == 1
    decision, _, reason = env.decision("g-bad")
    assert decision == "error"
    assert reason is not None and reason.startswith("invalid_payload")
    assert env.queue.counts_sync()[JobStatus.DONE] == 1


async def test_transient_failures_retry_then_end_as_a_recorded_error(env: Env) -> None:
    calls = 0

    async def flaky(event: Event) -> RepoConfig:
        nonlocal calls
        calls += 1
        raise ConnectionError("GitHub is down")

    worker = env.worker(WorkerHooks(config_loader=flaky))
    env.deliver("g-1", "issues", payload("issues/opened.payload.json"))
    for _ in range(10):
        await worker.run_until_idle()
        env.clock.now += 3600
    assert calls == 5  # the default max attempts
    decision, _, reason = env.decision("g-1")
    assert decision == "error"
    assert reason is not None and "ConnectionError: GitHub is down" in reason
    assert env.queue.counts_sync()[JobStatus.DEAD] == 1


async def test_the_run_of_a_dead_job_ends_failed(env: Env) -> None:
    async def executor(trigger: Trigger, run: RunRecord) -> None:
        env.store.update_run(run.id, status="running")
        raise ConnectionError("GitHub is down")

    worker = env.worker(WorkerHooks(executor=executor))
    env.deliver("g-1", "issues", payload("issues/opened.payload.json"))
    for _ in range(10):
        await worker.run_until_idle()
        env.clock.now += 3600
    assert env.queue.counts_sync()[JobStatus.DEAD] == 1
    (run,) = env.store.runs_for_delivery("g-1")
    assert run.status == "failed"


async def test_a_rate_limited_job_comes_back_after_the_reset(env: Env) -> None:
    reset = env.clock.now + 3600
    calls = 0

    async def executor(trigger: Trigger, run: RunRecord) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RateLimited(reset, "GET /repos/x/y: quota spent")

    worker = env.worker(WorkerHooks(executor=executor))
    env.deliver("g-1", "issues", payload("issues/opened.payload.json"))
    await worker.run_until_idle()
    (job,) = env.queue.jobs_for_delivery("g-1")
    assert job.status is JobStatus.QUEUED and job.run_after == reset
    env.clock.now = reset - 1
    assert await worker.run_until_idle() == 0
    env.clock.now = reset
    assert await worker.run_until_idle() == 1
    assert calls == 2 and env.queue.counts_sync()[JobStatus.DONE] == 1


async def test_job_of_a_crashed_worker_is_handled_after_its_lease(env: Env) -> None:
    env.deliver("g-1", "issues", payload("issues/opened.payload.json"))
    crashed = await env.queue.claim("crashed-worker", 60)
    assert crashed is not None
    worker = env.worker(lease_seconds=60)
    assert await worker.run_until_idle() == 0  # still leased
    env.clock.now += 61
    assert await worker.run_until_idle() == 1
    assert env.decision("g-1")[:2] == ("trigger", "triage")


async def test_a_rerun_job_reuses_its_run(env: Env) -> None:
    seen: list[str] = []

    async def executor(trigger: Trigger, run: RunRecord) -> None:
        seen.append(run.id)
        if len(seen) == 1:
            raise RuntimeError("crash mid-run")

    env.deliver("g-1", "issues", payload("issues/opened.payload.json"))
    worker = env.worker(WorkerHooks(executor=executor))
    await worker.run_until_idle()
    env.clock.now += 3600
    await worker.run_until_idle()
    assert len(seen) == 2 and seen[0] == seen[1]
    assert len(env.store.runs_for_delivery("g-1")) == 1


async def test_executor_gets_the_trigger_and_the_lease_is_kept(env: Env) -> None:
    lease = 0.3
    handed: list[tuple[Trigger, RunRecord]] = []

    async def executor(trigger: Trigger, run: RunRecord) -> None:
        handed.append((trigger, run))
        (job,) = env.queue.jobs_for_delivery(trigger.delivery_id)
        for _ in range(3):
            # Move the clock to just before the lease ends, then wait for a heartbeat.
            env.clock.now = (job.lease_until or 0) - 0.01
            with anyio.fail_after(10):
                while True:  # polling the database: nothing signals a heartbeat
                    current = env.queue.get_sync(job.id)
                    assert current is not None
                    if current.lease_until != job.lease_until:
                        break
                    await anyio.sleep(lease / 6)
            assert await env.queue.claim("other", lease) is None
            job = current

    env.deliver("g-pr", "pull_request", payload("pull_request/opened.payload.json"))
    await env.worker(WorkerHooks(executor=executor), lease_seconds=lease).run_until_idle()
    ((trigger, run),) = handed
    assert (trigger.workflow, trigger.number, trigger.delivery_id) == ("review", 2, "g-pr")
    assert run.id == env.store.runs_for_delivery("g-pr")[0].id
    assert env.queue.counts_sync()[JobStatus.DONE] == 1


async def test_pool_handles_jobs_as_they_arrive(env: Env) -> None:
    worker = env.worker(concurrency=3, poll_interval=0.05)
    async with anyio.create_task_group() as tasks:
        await tasks.start(worker.run)
        for n in range(6):
            data = payload("issues/opened.payload.json")
            data["issue"] = {**data["issue"], "id": 7000 + n, "number": 100 + n}  # type: ignore[dict-item]
            env.deliver(f"g-{n}", "issues", data)
        worker.wake()
        with anyio.fail_after(20):
            while True:  # polling the database: the pool reports nothing
                if all(env.decision(f"g-{n}")[0] is not None for n in range(6)):
                    break
                await anyio.sleep(0.05)
        tasks.cancel_scope.cancel()
    assert {env.decision(f"g-{n}")[0] for n in range(6)} == {"trigger"}


async def test_pool_runs_background_housekeeping_until_it_stops(env: Env) -> None:
    started, stopped = anyio.Event(), anyio.Event()

    async def housekeeping() -> None:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            stopped.set()

    worker = env.worker(WorkerHooks(background=(housekeeping,)), poll_interval=0.05)
    async with anyio.create_task_group() as tasks:
        await tasks.start(worker.run)
        with anyio.fail_after(5):
            await started.wait()
        tasks.cancel_scope.cancel()
    assert stopped.is_set()


async def test_default_wiring_needs_no_github(env: Env) -> None:
    hooks = build_worker_hooks(Settings(app_slug="my-app"), env.store)
    assert hooks.executor is None and hooks.app_slug == "my-app"
    event = Event(name="issues", delivery_id="x")
    assert await hooks.permission_lookup(event) is None
    assert (await hooks.config_loader(event)) == parse_repo_config(None)


async def test_every_log_line_of_a_delivery_carries_its_id(env: Env) -> None:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    stream = _Lines()
    bot_log.configure("DEBUG", json_lines=True)
    root.handlers[0].setStream(stream)  # type: ignore[attr-defined]
    try:

        async def executor(trigger: Trigger, run: RunRecord) -> None:
            logging.getLogger("bot.workflows.test").info("executing")

        async def failing(event: Event) -> RepoConfig:
            raise ConnectionError("down")

        env.deliver("g-run", "pull_request", payload("pull_request/opened.payload.json"))
        env.deliver("g-skip", "ping", payload("ping/payload.json"))
        env.deliver("g-bad", "issues", b"garbage")
        await env.worker(WorkerHooks(executor=executor)).run_until_idle()
        env.deliver("g-fail", "issues", payload("issues/opened.payload.json"))
        await env.worker(WorkerHooks(config_loader=failing)).run_until_idle()
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    logs = [json.loads(line) for line in stream.lines]
    handling = [
        line
        for line in logs
        if line["logger"] == "bot.runs.worker" or "workflows" in str(line["logger"])
    ]
    assert len(handling) >= 5
    for line in handling:
        assert line.get("delivery_id") in {"g-run", "g-skip", "g-bad", "g-fail"}, line
    run_id = env.store.runs_for_delivery("g-run")[0].id
    executing = [line for line in logs if line["msg"] == "executing"]
    assert [(line["delivery_id"], line["run_id"]) for line in executing] == [("g-run", run_id)]
    assert any(line["msg"] == "run created" and line["run_id"] == run_id for line in logs)


class _Lines:
    """A text stream that keeps what is written, one entry per line."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def write(self, text: str) -> int:
        self.lines.extend(part for part in text.splitlines() if part.strip())
        return len(text)

    def flush(self) -> None:
        return None


async def test_comments_are_parsed_off_the_event_loop(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parsing a hostile 64 KiB comment takes seconds; it must not stall every other job."""
    import threading

    from bot.runs import worker as worker_module

    threads: list[bool] = []
    real = worker_module.decide

    def watched(*args: object, **kwargs: object) -> object:
        threads.append(threading.current_thread() is threading.main_thread())
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(worker_module, "decide", watched)
    worker = env.worker(WorkerHooks())
    env.deliver("g-1", "issues", payload("issues/opened.payload.json"))
    await worker.run_until_idle()
    assert threads == [False]


async def test_a_command_body_sent_again_under_new_guids_runs_once(env: Env) -> None:
    handed: list[Trigger] = []
    failures = iter([RuntimeError("the model is down")])

    async def lookup(event: Event) -> str | None:
        return "write"

    async def executor(trigger: Trigger, run: RunRecord) -> None:
        handed.append(trigger)
        failure = next(failures, None)
        if failure is not None:
            raise failure

    worker = env.worker(WorkerHooks(permission_lookup=lookup, executor=executor))
    captured = json.dumps(comment_payload(f"@{SLUG} fix please")).encode()
    for n in range(3):  # the signature covers the body only: any GUID passes with it
        env.deliver(f"g-{n}", "issue_comment", captured)
    await worker.run_until_idle()
    env.clock.now += 3600  # past the failed job's backoff: the holder's retry runs again
    await worker.run_until_idle()
    assert [env.decision(f"g-{n}")[0] for n in range(3)] == ["trigger", "skip", "skip"]
    for n in (1, 2):
        assert env.decision(f"g-{n}")[2] == "replayed: delivery g-0 asked for the same fix"
        assert env.store.runs_for_delivery(f"g-{n}") == []
    assert [t.delivery_id for t in handed] == ["g-0", "g-0"]
    assert len(env.store.runs_for_delivery("g-0")) == 1

    # Another comment with the same words is another request.
    again = comment_payload(f"@{SLUG} fix please")
    again["comment"] = {**again["comment"], "id": 492700401}  # type: ignore[dict-item]
    env.deliver("g-new", "issue_comment", again)
    await worker.run_until_idle()
    assert env.decision("g-new")[:2] == ("trigger", "fix")


async def test_an_automatic_trigger_runs_once_per_head_whatever_the_guid(env: Env) -> None:
    worker = env.worker()
    opened = payload("pull_request/opened.payload.json")
    env.deliver("g-pr-1", "pull_request", opened)
    env.deliver("g-pr-2", "pull_request", opened)
    env.deliver("g-issue-1", "issues", payload("issues/opened.payload.json"))
    env.deliver("g-issue-2", "issues", payload("issues/opened.payload.json"))
    pushed = payload("pull_request/opened.payload.json", action="synchronize")
    pull = dict(pushed["pull_request"])  # type: ignore[call-overload]
    pull["head"] = {**pull["head"], "sha": "1" * 40}
    pushed["pull_request"] = pull
    env.deliver("g-push", "pull_request", pushed)
    await worker.run_until_idle()
    decisions = {g: env.decision(g)[0] for g in ("g-pr-1", "g-pr-2", "g-issue-1", "g-issue-2")}
    assert decisions == {
        "g-pr-1": "trigger",
        "g-pr-2": "skip",
        "g-issue-1": "trigger",
        "g-issue-2": "skip",
    }
    assert env.decision("g-pr-2")[2] == "replayed: delivery g-pr-1 asked for the same review"
    assert env.decision("g-push")[:2] == ("trigger", "review")
