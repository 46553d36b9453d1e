"""Each documented BOT_* setting changes what the app does: one test per setting.

Every test reads its settings with `load_settings(environ={...}, dotenv=None)` and then drives
the component the setting is meant for, built the way the app builds it: `bot.wiring`'s worker
hooks (the engine, the runner, the mirrors and the GitHub client of the run executor),
`bot.commands.serve`'s worker pool, `create_app` for the webhook route and the operator page,
or `bot serve` itself. GitHub and the model are the fakes in tests/fakes/ (real HTTP servers);
a test asserts on what they received or on what the component did, never only on a parsed value,
and most compare two values of the setting. BOT_GIT_NAME and BOT_GIT_EMAIL are read from the
process environment only (not from `.env`), so their test sets them there.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.agents.runtime import AgentRuntime, build_runner
from bot.agents.tools import Toolbox
from bot.agents.types import IMPLEMENTER
from bot.commands.serve import build_worker
from bot.engine import Engine, RunDetails, WorkflowMeta
from bot.engine.types import AgentInvocation, Workspace
from bot.engine.workflow import Workflow
from bot.engine.worktree import create_worktree
from bot.github.client import GitHubApp
from bot.github.errors import GitHubError
from bot.intake.web import create_app
from bot.ops.redeliver import redeliver_forever
from bot.publish.render import render_footer
from bot.runs.execute import RunExecutor
from bot.runs.progress import usage_of
from bot.runs.worker import Worker, default_config
from bot.settings import Settings, load_settings
from bot.store.backend import job_queue, open_store
from bot.store.contract import Storage
from bot.store.postgres.store import PostgresStore
from bot.store.queue.sqlite import insert_job
from bot.store.sqlite import Store, transaction
from bot.wiring import build_worker_hooks
from policies.config import RepoConfig
from policies.event import Event
from policies.interaction import RunInteractionMode, RunInteractionPolicy
from policies.outcome import Outcome
from tests.agents.conftest import git, invocation, make_repo
from tests.conftest import PAYLOADS
from tests.fakes._github_state import new_private_key_pem
from tests.fakes.github import FakeGitHub, make_fake_github, serve_fake_github
from tests.fakes.llm import FakeLLM, UsageSpec, hang, serve, text, tool_call
from tests.github._client_world import Sleeps
from tests.scripted import free_port, issues_opened
from tests.ui.server import serve as serve_ui

REPO = Path(__file__).resolve().parents[1]
AUTONOMOUS = RunInteractionPolicy(RunInteractionMode.AUTONOMOUS)
ONE_AGENT = WorkflowMeta("settings-effects", "one agent call", ("Ask",))


def settings_of(env: Mapping[str, str]) -> Settings:
    return load_settings(environ=dict(env), dotenv=None)


# -- the wiring, with GitHub App credentials ---------------------------------------------------


@pytest.fixture
def github(tmp_path: Path) -> Iterator[tuple[FakeGitHub, str]]:
    """The fake GitHub (octo/hello, installation 42) on 127.0.0.1, and its base URL."""
    fake = make_fake_github(tmp_path / "gh", files={"README.md": "hello\n"})
    fake.add_issue("octo", "hello", title="Crash", body="It crashes.", user="alice")
    with serve_fake_github(fake) as url:
        yield fake, url


def app_env(fake: FakeGitHub, url: str, data_dir: Path, **more: str) -> dict[str, str]:
    """BOT_* values of an App on the fake GitHub, with its key inline and its name given."""
    return {
        "BOT_APP_ID": str(fake.app_id),
        "BOT_PRIVATE_KEY": fake.private_key_pem,
        "BOT_APP_SLUG": fake.slug,
        "BOT_GITHUB_API_URL": url,
        "BOT_GITHUB_WEB_URL": url,
        "BOT_DATA_DIR": str(data_dir),
        **more,
    }


@asynccontextmanager
async def wired(env: Mapping[str, str]) -> AsyncIterator[RunExecutor]:
    """The run executor exactly as `bot.wiring.build_worker_hooks` builds it from `env`."""
    settings = settings_of(env)
    store = Store.open(settings.sqlite_path)
    try:
        hooks = build_worker_hooks(settings, store)
        assert isinstance(hooks.executor, RunExecutor)
        try:
            yield hooks.executor
        finally:
            await hooks.executor.github.aclose()
    finally:
        store.close()


async def run_one_agent(
    engine: Engine,
    *,
    agent_type: str = "explorer",
    effort: str | None = None,
    repo: Path | None = None,
) -> RunDetails:
    """One agent call in a workflow run by `engine`; `repo` (a work tree) gives it files."""

    async def workflow(wf: Workflow, args: Any) -> Any:
        wf.phase("Ask")
        result = await wf.agent("Say hello.", agent_type=agent_type, label="ask", effort=effort)
        return {"ok": result.ok, "output": result.output, "error": result.error}

    return await engine.run(ONE_AGENT, workflow, None, interaction=AUTONOMOUS, repo=repo)


@pytest.fixture
def model() -> Iterator[tuple[FakeLLM, str]]:
    """The fake OpenAI-compatible model on 127.0.0.1, and its base URL (`.../v1`)."""
    fake = FakeLLM()
    with serve(fake) as url:
        yield fake, url


def model_env(url: str, **more: str) -> dict[str, str]:
    return {"BOT_MODEL": "fake-model", "BOT_LLM_BASE_URL": url, **more}


# -- GitHub App identity -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_BOT_APP_ID_is_the_issuer_github_checks(
    github: tuple[FakeGitHub, str], data_dir: Path
) -> None:
    fake, url = github
    async with wired(app_env(fake, url, data_dir)) as executor:
        assert (await executor.github.get_app()).id == fake.app_id
    async with wired(app_env(fake, url, data_dir, BOT_APP_ID="999")) as executor:
        with pytest.raises(GitHubError, match="'iss'") as refused:
            await executor.github.get_app()
    assert refused.value.status == 401


@pytest.mark.anyio
async def test_BOT_PRIVATE_KEY_signs_the_app_token(
    github: tuple[FakeGitHub, str], data_dir: Path
) -> None:
    fake, url = github
    async with wired(app_env(fake, url, data_dir)) as executor:
        assert (await executor.github.get_app()).slug == fake.slug
    other = app_env(fake, url, data_dir, BOT_PRIVATE_KEY=new_private_key_pem())
    async with wired(other) as executor:
        with pytest.raises(GitHubError, match="could not be decoded") as refused:
            await executor.github.get_app()
    assert refused.value.status == 401


@pytest.mark.anyio
async def test_BOT_PRIVATE_KEY_PATH_signs_the_app_token(
    github: tuple[FakeGitHub, str], data_dir: Path, tmp_path: Path
) -> None:
    fake, url = github
    env = app_env(fake, url, data_dir)
    del env["BOT_PRIVATE_KEY"]
    (tmp_path / "app.pem").write_text(fake.private_key_pem)
    (tmp_path / "other.pem").write_text(new_private_key_pem())
    async with wired({**env, "BOT_PRIVATE_KEY_PATH": str(tmp_path / "app.pem")}) as executor:
        assert (await executor.github.get_app()).id == fake.app_id
    async with wired({**env, "BOT_PRIVATE_KEY_PATH": str(tmp_path / "other.pem")}) as executor:
        with pytest.raises(GitHubError) as refused:
            await executor.github.get_app()
    assert refused.value.status == 401


def comment_delivery(store: Store, guid: str, body: str) -> None:
    data = json.loads((PAYLOADS / "issue_comment" / "created.payload.json").read_text())
    data["comment"] = {**data["comment"], "body": body}
    stored_delivery(store, guid, "issue_comment", data)


def test_BOT_APP_SLUG_is_the_name_the_worker_answers_to(
    github: tuple[FakeGitHub, str], data_dir: Path
) -> None:
    settings = settings_of({"BOT_DATA_DIR": str(data_dir), "BOT_APP_SLUG": "other-bot"})
    store = Store.open(settings.sqlite_path)
    try:
        comment_delivery(store, "g-mine", "@other-bot fix the typo")
        comment_delivery(store, "g-default", "@repo-agent fix the typo")
        worker = build_worker(settings, store)  # as `bot serve` builds it
        assert worker is not None
        assert anyio.run(worker.run_until_idle) == 2
        mine, default = store.get_delivery("g-mine"), store.get_delivery("g-default")
    finally:
        store.close()
    # Addressed, the command goes on to the permission check (unknown here: refused) ...
    assert mine is not None and str(mine.reason).startswith("no_permission")
    # ... while the default name is somebody else's.
    assert default is not None and default.reason == "not_addressed"
    # With App credentials too, the name given is used and GitHub's is not asked for.
    fake, url = github
    with_app = settings_of(app_env(fake, url, data_dir, BOT_APP_SLUG="other-bot"))
    store = Store.open(with_app.sqlite_path)
    try:
        assert build_worker_hooks(with_app, store).app_slug == "other-bot"
    finally:
        store.close()
    assert fake.calls_to("GET", "/app") == []


# -- GitHub endpoints and pacing --------------------------------------------------------------


@pytest.mark.anyio
async def test_BOT_GITHUB_API_URL_is_where_the_client_sends_requests(
    github: tuple[FakeGitHub, str], data_dir: Path
) -> None:
    fake, url = github
    async with wired(app_env(fake, url, data_dir)) as executor:
        issue = await executor.github.installation(42, "octo", "hello").get_issue(1)
    assert issue.title == "Crash"
    assert [c.status for c in fake.calls_to("POST", "/app/installations/42/access_tokens")] == [201]
    assert [c.status for c in fake.calls_to("GET", "/repos/octo/hello/issues/1")] == [200]


@pytest.mark.anyio
async def test_BOT_GITHUB_WEB_URL_is_where_repositories_are_cloned_from(
    github: tuple[FakeGitHub, str], data_dir: Path
) -> None:
    fake, url = github
    head = git(fake.repos["octo/hello"].git_dir, "rev-parse", "main")
    # The REST API stays at one address; git goes to the web URL (here the same server).
    async with wired(app_env(fake, url, data_dir)) as executor:
        assert executor.mirrors.remote_url("octo", "hello") == f"{url}/octo/hello.git"
        client = executor.github.installation(42, "octo", "hello")
        mirror = await executor.mirrors.ensure_commit(client, head)
    assert mirror == data_dir / "repos" / "octo" / "hello.git"
    assert fake.calls_to("*", "/octo/hello.git/*"), "nothing was fetched from the web URL"
    elsewhere = app_env(fake, url, data_dir, BOT_GITHUB_WEB_URL="https://ghe.example.test")
    async with wired(elsewhere) as executor:
        assert executor.mirrors.remote_url("octo", "hello") == (
            "https://ghe.example.test/octo/hello.git"
        )


@pytest.mark.anyio
async def test_BOT_GITHUB_WRITE_INTERVAL_spaces_the_writes_of_an_installation(
    github: tuple[FakeGitHub, str], data_dir: Path
) -> None:
    fake, url = github

    async def waits_between_two_comments(interval: str) -> list[float]:
        settings = settings_of(app_env(fake, url, data_dir, BOT_GITHUB_WRITE_INTERVAL=interval))
        sleeps = Sleeps()  # the waits asked for are the behaviour; nothing really sleeps
        async with GitHubApp.from_settings(settings, sleep=sleeps) as app:
            client = app.installation(42, "octo", "hello")
            await client.create_issue_comment(1, f"first ({interval})")
            await client.create_issue_comment(1, f"second ({interval})")
        return sleeps.requested

    (wait,) = await waits_between_two_comments("30")
    assert 0 < wait <= 30  # the second write waits out what is left of the interval
    assert await waits_between_two_comments("0") == []
    assert len(fake.comments_on("octo", "hello", 1)) == 4


@pytest.mark.anyio
async def test_BOT_REDELIVER_INTERVAL_asks_github_again_for_missed_deliveries(
    github: tuple[FakeGitHub, str], data_dir: Path
) -> None:
    fake, url = github
    env = app_env(fake, url, data_dir, BOT_WEBHOOK_SECRET=fake.webhook_secret)
    issue = fake.add_issue("octo", "hello", title="Missed", user="alice")
    missed = fake.hooks.record("issues", issues_opened(issue, "octo/hello", 42), status_code=502)
    settings = settings_of({**env, "BOT_REDELIVER_INTERVAL": "0.2"})
    store = Store.open(settings.sqlite_path)
    try:
        with serve_ui(create_app(settings, store), lifespan="on") as bot_url:
            fake.webhook_url = f"{bot_url}/webhooks/github"
            hooks = build_worker_hooks(settings, store)
            (job,) = [j for j in hooks.background if getattr(j, "func", None) is redeliver_forever]
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(job)
                with anyio.fail_after(30):
                    while True:  # polling the fake and the store: a pass reports nothing
                        passes = len(fake.calls_to("GET", "/app/hook/deliveries"))
                        if store.get_delivery(missed.guid) is not None and passes >= 3:
                            break
                        await anyio.sleep(0.05)
                tasks.cancel_scope.cancel()
            assert isinstance(hooks.executor, RunExecutor)
            await hooks.executor.github.aclose()
        # Asked for once: later passes see it received.
        assert len(fake.calls_to("POST", "/app/hook/deliveries/*/attempts")) == 1
        # On by default, every 15 minutes; 0 turns it off.
        unset = build_worker_hooks(settings_of(env), store)
        (default,) = [j for j in unset.background if getattr(j, "func", None) is redeliver_forever]
        assert isinstance(default, partial) and default.args[2] == 900.0
        off = build_worker_hooks(settings_of({**env, "BOT_REDELIVER_INTERVAL": "0"}), store)
        assert not [j for j in off.background if getattr(j, "func", None) is redeliver_forever]
        for hooks_ in (unset, off):
            assert isinstance(hooks_.executor, RunExecutor)
            await hooks_.executor.github.aclose()
    finally:
        store.close()


# -- storage ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_BOT_DATA_DIR_holds_the_database_and_the_runs(
    github: tuple[FakeGitHub, str], model: tuple[FakeLLM, str], tmp_path: Path
) -> None:
    fake, url = github
    llm, llm_url = model
    llm.push(text("hello"))
    data = tmp_path / "elsewhere"
    store = open_store(settings_of({"BOT_DATA_DIR": str(data)}))
    store.close()
    assert (data / "bot.sqlite3").is_file()
    async with wired({**app_env(fake, url, data), **model_env(llm_url)}) as executor:
        details = await run_one_agent(executor.engine)
    assert details.status == "completed"
    assert (data / "runs" / details.run_id / "report.md").is_file()


def test_BOT_DATABASE_URL_sqlite_puts_the_database_elsewhere(tmp_path: Path) -> None:
    data, db = tmp_path / "data", tmp_path / "db" / "deliveries.sqlite3"
    db.parent.mkdir()
    store = open_store(
        settings_of({"BOT_DATA_DIR": str(data), "BOT_DATABASE_URL": f"sqlite:///{db}"})
    )
    try:
        assert isinstance(store, Store) and store.path == db
    finally:
        store.close()
    assert db.is_file() and not (data / "bot.sqlite3").exists()


def test_BOT_DATABASE_URL_postgres_selects_the_postgres_store(postgres_dsn: str) -> None:
    store = open_store(settings_of({"BOT_DATABASE_URL": postgres_dsn}))
    try:
        assert isinstance(store, PostgresStore)
        assert store.ping()
    finally:
        store.close()


# -- the server ------------------------------------------------------------------------------


@contextmanager
def bot_serve(env: Mapping[str, str], root: Path, *, host: str, port: int) -> Iterator[Path]:
    """`bot serve` (one receiver, no worker) configured by `env` alone, once it answers at
    `host:port`; yields its log file, complete once the context exits (the process stopped)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("BOT_")}
    full.update({"BOT_DATA_DIR": str(root / "data"), "BOT_APP_SLUG": "repo-agent", **env})
    full["PYTHONPATH"] = str(REPO)
    command = [sys.executable, "-m", "bot.cli", "serve", "--receivers", "1", "--no-worker"]
    log_path = root / "serve.log"
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(command, cwd=root, env=full, stdout=log_file, stderr=log_file)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"http://{host}:{port}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"bot serve did not start:\n{log_path.read_text()}")
            time.sleep(0.1)
        yield log_path
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.slow  # starts `bot serve`
def test_BOT_HOST_and_BOT_PORT_are_where_bot_serve_listens(tmp_path: Path) -> None:
    port = free_port()
    # 127.0.0.2: a loopback address other than the default one.
    env = {"BOT_HOST": "127.0.0.2", "BOT_PORT": str(port)}
    with (
        bot_serve(env, tmp_path, host="127.0.0.2", port=port),
        pytest.raises(httpx.ConnectError),  # and not on the default address
    ):
        httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1)


@pytest.mark.slow  # starts `bot serve`
def test_BOT_LOG_LEVEL_filters_the_log_lines_of_bot_serve(tmp_path: Path) -> None:
    port = free_port()
    env = {"BOT_PORT": str(port), "BOT_LOG_LEVEL": "WARNING"}
    with bot_serve(env, tmp_path, host="127.0.0.1", port=port) as log_path:
        pass
    lines = [json.loads(line) for line in log_path.read_text().splitlines() if line]
    # The warning about the missing secret is written; the info line "serving" is not.
    assert any("no webhook secret" in line["msg"] for line in lines), lines
    assert {line["level"] for line in lines} == {"warning"}, lines


def stored_delivery(store: Store, guid: str, event: str, data: dict[str, Any]) -> None:
    """A delivery as the webhook route stores it, with its job."""
    conn = store.conn()
    with transaction(conn):
        conn.execute(
            "INSERT INTO deliveries (guid, event, received_at, headers, body)"
            " VALUES (?, ?, ?, '{}', ?)",
            (guid, event, store.clock(), json.dumps(data).encode()),
        )
        insert_job(conn, guid, store.clock())


def issue_delivery(store: Store, guid: str, number: int) -> None:
    data = json.loads((PAYLOADS / "issues" / "opened.payload.json").read_text())
    data["issue"] = {**data["issue"], "id": 9000 + number, "number": number}
    stored_delivery(store, guid, "issues", data)


def test_BOT_WORKERS_handles_that_many_jobs_at_once(data_dir: Path) -> None:
    settings = settings_of({"BOT_DATA_DIR": str(data_dir), "BOT_WORKERS": "3"})
    store = Store.open(settings.sqlite_path)
    in_flight: list[int] = [0]
    peak: list[int] = [0]

    async def main() -> None:
        all_in = anyio.Event()

        async def held(event: Event) -> RepoConfig:
            # Each job stays here until three are in at once: with fewer tasks, never.
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
            if in_flight[0] == 3:
                all_in.set()
            await all_in.wait()
            in_flight[0] -= 1
            return await default_config(event)

        worker = build_worker(settings, store)  # as `bot serve` and `bot worker` build it
        assert isinstance(worker, Worker)
        worker.hooks = replace(worker.hooks, config_loader=held)
        guids = [f"g-{n}" for n in range(4)]
        for n, guid in enumerate(guids):
            issue_delivery(store, guid, 100 + n)
        async with anyio.create_task_group() as tasks:
            await tasks.start(worker.run)
            with anyio.fail_after(20):
                while True:  # polling the database: the pool reports nothing
                    rows = [store.get_delivery(guid) for guid in guids]
                    if all(row is not None and row.decision for row in rows):
                        break
                    await anyio.sleep(0.05)
            tasks.cancel_scope.cancel()

    try:
        anyio.run(main)
    finally:
        store.close()
    assert peak[0] == 3


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_BOT_JOB_LEASE_SECONDS_is_how_long_a_claimed_job_is_held(data_dir: Path) -> None:
    settings = settings_of({"BOT_DATA_DIR": str(data_dir), "BOT_JOB_LEASE_SECONDS": "90"})
    clock = Clock()
    store = Store.open(settings.sqlite_path, clock=clock)
    leases: list[float] = []

    async def main() -> None:
        queue = job_queue(store)

        async def look(event: Event) -> RepoConfig:
            (job,) = queue.jobs_for_delivery(event.delivery_id)
            leases.append((job.lease_until or 0) - clock.now)
            return await default_config(event)

        worker = build_worker(settings, store)
        assert isinstance(worker, Worker)
        worker.hooks = replace(worker.hooks, config_loader=look)
        issue_delivery(store, "g-lease", 7)
        assert await worker.run_until_idle() == 1
        # A job taken by a worker that then died is claimed again after that lease, not before.
        issue_delivery(store, "g-orphan", 8)
        assert await queue.claim("died", settings.job_lease_seconds) is not None
        assert await worker.run_until_idle() == 0
        clock.now += 89
        assert await worker.run_until_idle() == 0
        clock.now += 2
        assert await worker.run_until_idle() == 1

    try:
        anyio.run(main)
    finally:
        store.close()
    assert leases[0] == pytest.approx(90.0)


# -- the webhook route -------------------------------------------------------------------------


def signed(secret: str, body: bytes, guid: str) -> dict[str, str]:
    signature = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {
        "X-GitHub-Event": "ping",
        "X-GitHub-Delivery": guid,
        "X-Hub-Signature-256": signature,
        "Content-Type": "application/json",
    }


@asynccontextmanager
async def webhook_route(
    env: Mapping[str, str], data_dir: Path
) -> AsyncIterator[tuple[Starlette, httpx.AsyncClient]]:
    """`create_app` from `env` with its lifespan running, and a client for it."""
    store = Store.open(data_dir / "bot.sqlite3")
    app = create_app(settings_of(env), store)
    transport = httpx.ASGITransport(app=app)
    try:
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://bot") as client,
        ):
            yield app, client
    finally:
        store.close()


PING = b'{"zen": "Keep it logically awesome.", "hook_id": 1}'


@pytest.mark.anyio
async def test_BOT_WEBHOOK_SECRET_is_what_deliveries_are_signed_with(data_dir: Path) -> None:
    env = {"BOT_WEBHOOK_SECRET": "old-secret-1,new-secret-2"}
    async with webhook_route(env, data_dir) as (_, client):
        codes = [
            (
                await client.post("/webhooks/github", content=PING, headers=signed(s, PING, g))
            ).status_code
            for s, g in (("old-secret-1", "g-1"), ("new-secret-2", "g-2"), ("guessed", "g-3"))
        ]
    assert codes == [202, 202, 401]
    async with webhook_route({}, data_dir / "none") as (_, client):
        unset = await client.post("/webhooks/github", content=PING, headers=signed("x", PING, "g"))
    assert unset.status_code == 503 and "BOT_WEBHOOK_SECRET" in unset.json()["error"]


@pytest.mark.anyio
async def test_BOT_INSECURE_NO_SIGNATURE_accepts_unsigned_deliveries(data_dir: Path) -> None:
    unsigned = {"X-GitHub-Event": "ping", "X-GitHub-Delivery": "g-1"}
    async with webhook_route({"BOT_INSECURE_NO_SIGNATURE": "true"}, data_dir) as (_, client):
        accepted = await client.post("/webhooks/github", content=PING, headers=unsigned)
    assert accepted.status_code == 202
    async with webhook_route({"BOT_INSECURE_NO_SIGNATURE": "false"}, data_dir / "b") as (_, client):
        refused = await client.post("/webhooks/github", content=PING, headers=unsigned)
    assert refused.status_code == 503


async def held_request(
    app: Starlette, length: int, guid: str, gate: anyio.Event, statuses: list[int]
) -> None:
    """POST a delivery declaring `length` bytes whose body never comes before `gate` is set;
    the status of the route's answer goes to `statuses` once it is sent."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/webhooks/github",
        "raw_path": b"/webhooks/github",
        "query_string": b"",
        "root_path": "",
        "server": ("bot", 80),
        "client": ("127.0.0.1", 5000),
        "headers": [
            (b"x-github-event", b"ping"),
            (b"x-github-delivery", guid.encode()),
            (b"x-hub-signature-256", b"sha256=" + b"0" * 64),
            (b"content-type", b"application/json"),
            (b"content-length", str(length).encode()),
        ],
    }

    async def receive() -> dict[str, Any]:
        await gate.wait()
        return {"type": "http.disconnect"}

    async def send(message: Mapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(int(message["status"]))

    await app(scope, receive, send)


@pytest.mark.anyio
async def test_BOT_INTAKE_BUFFER_MB_is_the_body_memory_of_the_webhook_route(
    data_dir: Path,
) -> None:
    MiB = 1024 * 1024

    async def second_of_two_bodies(buffer_mb: str) -> list[int]:
        """The answers sent to a second 20 MiB delivery while a first one is still arriving."""
        env = {"BOT_WEBHOOK_SECRET": "whsec-1", "BOT_INTAKE_BUFFER_MB": buffer_mb}
        async with webhook_route(env, data_dir / buffer_mb) as (app, _):
            gate = anyio.Event()
            first: list[int] = []
            second: list[int] = []
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(held_request, app, 20 * MiB, "g-first", gate, first)
                await anyio.wait_all_tasks_blocked()
                tasks.start_soon(held_request, app, 20 * MiB, "g-second", gate, second)
                await anyio.wait_all_tasks_blocked()  # answered, or waiting for its body
                assert first == []  # still waiting for its body
                answered = list(second)
                gate.set()  # both clients go away
            return answered

    # 40 MiB: three quarters (30 MiB) for large bodies, so the second is refused at once.
    assert await second_of_two_bodies("40") == [503]
    # 64 MiB (the default): 48 MiB for large bodies, so the second is admitted and read.
    assert await second_of_two_bodies("64") == []


@pytest.mark.anyio
async def test_BOT_DURABILITY_fsync_syncs_bodies_before_the_202(data_dir: Path) -> None:
    body = json.dumps({"zen": "x" * 50_000, "hook_id": 7}).encode()  # kept in a segment file

    async def writer_threads_syncing(durability: str) -> list[str]:
        env = {"BOT_WEBHOOK_SECRET": "whsec-1", "BOT_DURABILITY": durability}
        async with webhook_route(env, data_dir / durability) as (app, client):
            writer = app.state.writer
            segments = writer.segments
            synced_by: list[str] = []
            real_sync = segments.sync

            def sync() -> None:
                synced_by.append(threading.current_thread().name)
                real_sync()

            segments.sync = sync
            answer = await client.post(
                "/webhooks/github", content=body, headers=signed("whsec-1", body, "g-big")
            )
            assert answer.status_code == 202
            return [name for name in synced_by if name == "delivery-writer"]

    # fsync: the writer syncs the body's segment itself, before the commit the 202 waits for.
    assert await writer_threads_syncing("fsync") == ["delivery-writer"]
    # normal: only the checkpoint thread syncs segments, later.
    assert await writer_threads_syncing("normal") == []


# -- the model ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_BOT_MODEL_is_the_model_every_agent_asks_for(
    github: tuple[FakeGitHub, str], model: tuple[FakeLLM, str], data_dir: Path
) -> None:
    fake, url = github
    llm, llm_url = model
    llm.push(text("hello"))
    env = {**app_env(fake, url, data_dir), **model_env(llm_url, BOT_MODEL="the-model")}
    async with wired(env) as executor:
        details = await run_one_agent(executor.engine)
    assert details.result == {"ok": True, "output": "hello", "error": None}
    assert [body["model"] for body in llm.bodies] == ["the-model"]


@pytest.mark.anyio
async def test_BOT_LLM_BASE_URL_is_the_endpoint_asked(
    github: tuple[FakeGitHub, str], model: tuple[FakeLLM, str], data_dir: Path
) -> None:
    fake, url = github
    llm, llm_url = model
    llm.push(text("from the endpoint"))
    async with wired({**app_env(fake, url, data_dir), **model_env(llm_url)}) as executor:
        details = await run_one_agent(executor.engine)
    assert details.result["output"] == "from the endpoint"
    assert [r.path for r in llm.requests] == ["/v1/chat/completions"]


@pytest.mark.anyio
async def test_BOT_LLM_API_KEY_is_the_bearer_token_sent(
    github: tuple[FakeGitHub, str], model: tuple[FakeLLM, str], data_dir: Path
) -> None:
    fake, url = github
    llm, llm_url = model
    llm.api_key = "sk-the-right-key"
    llm.push(text("authorised"))
    env = {**app_env(fake, url, data_dir), **model_env(llm_url)}
    async with wired({**env, "BOT_LLM_API_KEY": "sk-the-right-key"}) as executor:
        details = await run_one_agent(executor.engine)
    assert details.result["output"] == "authorised"
    assert llm.requests[0].headers["authorization"] == "Bearer sk-the-right-key"
    async with wired({**env, "BOT_LLM_API_KEY": "sk-a-wrong-key"}) as executor:
        refused = await run_one_agent(executor.engine)
    assert refused.result["ok"] is False and "401" in refused.result["error"]


def anthropic_fake() -> tuple[Starlette, list[dict[str, Any]]]:
    """A minimal Anthropic Messages API that records each request's body and headers."""
    seen: list[dict[str, Any]] = []

    async def messages(request: Request) -> JSONResponse:
        seen.append({"body": await request.json(), "headers": dict(request.headers)})
        if request.headers.get("x-api-key") != "ak-the-key":
            error = {"type": "authentication_error", "message": "invalid x-api-key"}
            return JSONResponse({"type": "error", "error": error}, status_code=401)
        body = await request.json()
        if body.get("stream") is True:  # as the API does: server-sent events, not one JSON
            events = [
                {"type": "message_start", "message": {"usage": {"input_tokens": 10}}},
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": "from anthropic"},
                },
                {"type": "content_block_stop", "index": 0},
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn"},
                    "usage": {"output_tokens": 3},
                },
                {"type": "message_stop"},
            ]
            text = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
            return Response(text, media_type="text/event-stream")
        return JSONResponse(
            {
                "content": [{"type": "text", "text": "from anthropic"}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 10, "output_tokens": 3},
            }
        )

    return Starlette(routes=[Route("/v1/messages", messages, methods=["POST"])]), seen


@pytest.mark.anyio
async def test_BOT_LLM_PROVIDER_anthropic_speaks_the_messages_api(
    github: tuple[FakeGitHub, str], data_dir: Path
) -> None:
    fake, url = github
    app, seen = anthropic_fake()
    with serve(app) as anthropic_url:
        env = {
            **app_env(fake, url, data_dir),
            "BOT_MODEL": "claude-x",
            "BOT_LLM_PROVIDER": "anthropic",
            "BOT_LLM_BASE_URL": anthropic_url,
            "BOT_LLM_API_KEY": "ak-the-key",
        }
        async with wired(env) as executor:
            details = await run_one_agent(executor.engine)
    assert details.result["output"] == "from anthropic"
    (request,) = seen
    assert request["body"]["model"] == "claude-x" and "anthropic-version" in request["headers"]


@pytest.mark.anyio
async def test_BOT_ANTHROPIC_API_KEY_is_sent_as_x_api_key(
    github: tuple[FakeGitHub, str], data_dir: Path
) -> None:
    fake, url = github
    app, seen = anthropic_fake()
    with serve(app) as anthropic_url:
        env = {
            **app_env(fake, url, data_dir),
            "BOT_MODEL": "claude-x",
            "BOT_LLM_PROVIDER": "anthropic",
            "BOT_LLM_BASE_URL": anthropic_url,
        }
        async with wired({**env, "BOT_ANTHROPIC_API_KEY": "ak-the-key"}) as executor:
            details = await run_one_agent(executor.engine)
        async with wired({**env, "BOT_ANTHROPIC_API_KEY": "ak-wrong"}) as executor:
            refused = await run_one_agent(executor.engine)
    assert details.result["output"] == "from anthropic"
    assert [r["headers"]["x-api-key"] for r in seen] == ["ak-the-key", "ak-wrong"]
    assert refused.result["ok"] is False and "401" in refused.result["error"]


@pytest.mark.anyio
async def test_BOT_LLM_STREAM_chooses_a_stream_or_one_answer(
    github: tuple[FakeGitHub, str], model: tuple[FakeLLM, str], data_dir: Path
) -> None:
    fake, url = github
    llm, llm_url = model
    llm.push(text("streamed"), text("whole"))
    env = {**app_env(fake, url, data_dir), **model_env(llm_url)}
    async with wired({**env, "BOT_LLM_STREAM": "true"}) as executor:
        streamed = await run_one_agent(executor.engine)
    async with wired({**env, "BOT_LLM_STREAM": "false"}) as executor:
        whole = await run_one_agent(executor.engine)
    assert (streamed.result["output"], whole.result["output"]) == ("streamed", "whole")
    first, second = llm.bodies
    assert first["stream"] is True and first["stream_options"] == {"include_usage": True}
    assert "stream" not in second and "stream_options" not in second


@pytest.mark.anyio
async def test_BOT_LLM_STREAM_applies_to_the_anthropic_provider_too(
    github: tuple[FakeGitHub, str], data_dir: Path
) -> None:
    fake, url = github
    app, seen = anthropic_fake()
    with serve(app) as anthropic_url:
        env = {
            **app_env(fake, url, data_dir),
            "BOT_MODEL": "claude-x",
            "BOT_LLM_PROVIDER": "anthropic",
            "BOT_LLM_BASE_URL": anthropic_url,
            "BOT_LLM_API_KEY": "ak-the-key",
        }
        for value in ("true", "false"):
            async with wired({**env, "BOT_LLM_STREAM": value}) as executor:
                await run_one_agent(executor.engine)
    assert [request["body"]["stream"] for request in seen] == [True, False]


@pytest.mark.anyio
async def test_BOT_LLM_REASONING_EFFORT_sends_the_agents_effort(
    github: tuple[FakeGitHub, str], model: tuple[FakeLLM, str], data_dir: Path
) -> None:
    fake, url = github
    llm, llm_url = model
    llm.push(text("a"), text("b"))
    env = {**app_env(fake, url, data_dir), **model_env(llm_url)}
    async with wired({**env, "BOT_LLM_REASONING_EFFORT": "true"}) as executor:
        await run_one_agent(executor.engine, effort="low")
    async with wired(env) as executor:  # off by default
        await run_one_agent(executor.engine, effort="low")
    assert [body.get("reasoning_effort") for body in llm.bodies] == ["low", None]


@pytest.mark.anyio
async def test_BOT_FIRST_RESPONSE_TIMEOUT_is_how_long_an_agent_waits_for_the_model(
    github: tuple[FakeGitHub, str], model: tuple[FakeLLM, str], data_dir: Path
) -> None:
    fake, url = github
    llm, llm_url = model
    llm.push(hang())
    env = {**app_env(fake, url, data_dir), **model_env(llm_url, BOT_FIRST_RESPONSE_TIMEOUT="0.5")}
    async with wired(env) as executor:
        with anyio.fail_after(30):
            details = await run_one_agent(executor.engine)
    assert details.result["ok"] is False
    assert "the model sent no response within 0.5 s" in details.result["error"]


@pytest.mark.anyio
async def test_BOT_TOOL_TIMEOUT_stops_a_tool_call_that_takes_longer(
    github: tuple[FakeGitHub, str],
    model: tuple[FakeLLM, str],
    data_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bot.agents import tools

    async def slow(self: tools.Toolbox, args: dict[str, Any]) -> str:
        await anyio.sleep(60)
        return "never"

    monkeypatch.setattr(tools.Toolbox, "_tool_list_files", slow)
    fake, url = github
    llm, llm_url = model
    llm.push(tool_call("list_files", {}), text("went on without it"))
    env = {**app_env(fake, url, data_dir), **model_env(llm_url, BOT_TOOL_TIMEOUT="0.3")}
    async with wired(env) as executor:
        with anyio.fail_after(30):
            details = await run_one_agent(
                executor.engine, repo=make_repo(data_dir.parent / "work")[0]
            )
    assert details.result["output"] == "went on without it"
    tool_answers = [m["content"] for m in llm.messages(-1) if m["role"] == "tool"]
    assert tool_answers == ["error: `list_files` timed out after 0.3 s and was stopped"]


@pytest.mark.anyio
async def test_BOT_MAX_TURNS_caps_the_model_turns_of_an_agent(
    github: tuple[FakeGitHub, str], model: tuple[FakeLLM, str], data_dir: Path
) -> None:
    fake, url = github
    llm, llm_url = model
    llm.respond_with(lambda body: tool_call("list_files", {}))  # never finishes by itself
    env = {**app_env(fake, url, data_dir), **model_env(llm_url, BOT_MAX_TURNS="3")}
    async with wired(env) as executor:
        details = await run_one_agent(executor.engine, repo=make_repo(data_dir.parent / "work")[0])
    assert details.result["error"] == "stopped after 3 model turns without finishing"
    assert len(llm.bodies) == 3


@pytest.mark.anyio
async def test_BOT_ROLE_MODELS_picks_the_model_of_an_agent_type(
    github: tuple[FakeGitHub, str], model: tuple[FakeLLM, str], data_dir: Path
) -> None:
    fake, url = github
    llm, llm_url = model
    llm.push(text("a"), text("b"))
    env = {
        **app_env(fake, url, data_dir),
        **model_env(llm_url),
        "BOT_ROLE_MODELS": '{"reviewer": "review-model"}',
    }
    async with wired(env) as executor:
        await run_one_agent(executor.engine, agent_type="reviewer")
        await run_one_agent(executor.engine, agent_type="explorer")
    assert [body["model"] for body in llm.bodies] == ["review-model", "fake-model"]


@pytest.mark.anyio
async def test_BOT_AGENT_TYPES_adds_the_operators_agent_types(
    github: tuple[FakeGitHub, str], model: tuple[FakeLLM, str], data_dir: Path
) -> None:
    fake, url = github
    llm, llm_url = model
    llm.push(text("scouted"))
    scout = {
        "instructions": "You are the scout: list what you see, nothing more.",
        "tools": ["list_files", "read_file"],
        "model": "scout-model",
    }
    env = {
        **app_env(fake, url, data_dir),
        **model_env(llm_url),
        "BOT_AGENT_TYPES": json.dumps({"scout": scout}),
    }
    async with wired(env) as executor:
        details = await run_one_agent(
            executor.engine, agent_type="scout", repo=make_repo(data_dir.parent / "work")[0]
        )
    assert details.result["output"] == "scouted"
    assert "You are the scout: list what you see, nothing more." in llm.system_prompt(0)
    assert sorted(llm.tool_names(0)) == ["list_files", "read_file"]
    assert llm.bodies[0]["model"] == "scout-model"


# BOT_REPO_AGENT_TOOLS: not read yet (`Settings.repo_agent_tools`); its test comes with its use.


@pytest.mark.anyio
async def test_BOT_MODEL_PRICES_give_the_cost_in_the_run_report(
    github: tuple[FakeGitHub, str], model: tuple[FakeLLM, str], data_dir: Path
) -> None:
    fake, url = github
    llm, llm_url = model
    llm.push(text("priced", usage=UsageSpec(prompt=1_000_000, completion=100_000, cached=0)))
    prices = {"fake-model": {"input": 2.0, "output": 10.0, "cache_read": 0.5}}
    env = {
        **app_env(fake, url, data_dir),
        **model_env(llm_url),
        "BOT_MODEL_PRICES": json.dumps(prices),
    }
    async with wired(env) as executor:
        details = await run_one_agent(executor.engine)
    assert details.usage["cost"] == pytest.approx(2.0 + 1.0)
    outcome_usage = usage_of(details, wall_seconds=1.0)
    assert outcome_usage.cost == pytest.approx(3.0)
    outcome = Outcome("succeeded", "done", details.run_id, "settings-effects", usage=outcome_usage)
    footer = render_footer(outcome)
    assert "$3.0000" in footer
    async with wired({**app_env(fake, url, data_dir), **model_env(llm_url)}) as executor:
        llm.push(text("unpriced"))
        unpriced = await run_one_agent(executor.engine)
    assert unpriced.usage.get("cost") is None


# -- the sandbox ----------------------------------------------------------------------------------


async def run_command_with(env: Mapping[str, str], command: str, tmp_path: Path) -> str:
    """What the `run_command` tool answers an implementer for `command`, with the runtime
    `bot.agents.runtime.build_runner` makes from `env` (the wiring's own runner)."""
    llm = FakeLLM([tool_call("run_command", {"command": command}), text("done")])
    root, sha = make_repo(tmp_path / "repo")
    worktree = create_worktree(root, base=sha, run_id="wf_5e771265e771", index=1, label="impl")
    call: AgentInvocation = replace(
        invocation(agent_type=IMPLEMENTER),
        workspace=Workspace(git_dir=root / ".git", commit=sha, worktree=worktree.path),
    )
    with serve(llm) as url:
        runner = build_runner(settings_of({**model_env(url), **env}))
        assert isinstance(runner, AgentRuntime)
        if not runner.sandbox.ok:
            pytest.fail(f"the sandbox does not work on this machine: {runner.sandbox.reason}")
        try:
            with anyio.fail_after(120):
                result = await runner.run(call)
        finally:
            await runner.aclose()
    assert result.error is None, result.error
    (answer,) = [m["content"] for m in llm.messages(-1) if m["role"] == "tool"]
    return str(answer)


@pytest.mark.anyio
async def test_BOT_SANDBOX_MEMORY_MB_limits_a_commands_memory(tmp_path: Path) -> None:
    grab = "python3 -c 'x = bytearray(512 << 20); print(\"allocated\", len(x))'"
    answer = await run_command_with({"BOT_SANDBOX_MEMORY_MB": "64"}, grab, tmp_path)
    assert "allocated" not in answer
    assert "memory limit" in answer and "64 MiB" in answer


@pytest.mark.anyio
async def test_BOT_SANDBOX_PIDS_limits_a_commands_processes(tmp_path: Path) -> None:
    forks = (
        "python3 -c 'import os, time\n"
        "n = 0\n"
        "for _ in range(60):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        break\n"
        "    if pid == 0:\n"
        "        time.sleep(5); os._exit(0)\n"
        "    n += 1\n"
        'print("forked", n)\''
    )
    answer = await run_command_with({"BOT_SANDBOX_PIDS": "8"}, forks, tmp_path)
    assert "forked 60" not in answer
    assert "process limit" in answer and "8 processes" in answer


@pytest.mark.anyio
async def test_BOT_SANDBOX_FILE_MB_limits_the_size_of_a_file(tmp_path: Path) -> None:
    write = "head -c 5000000 /dev/zero > big.bin; echo rc=$?"
    answer = await run_command_with({"BOT_SANDBOX_FILE_MB": "1"}, write, tmp_path)
    assert "rc=153" in answer  # SIGXFSZ
    assert "file size limit" in answer and "1 MiB" in answer


@pytest.mark.anyio
async def test_BOT_SANDBOX_CPU_SECONDS_stops_a_busy_loop(tmp_path: Path) -> None:
    answer = await run_command_with(
        {"BOT_SANDBOX_CPU_SECONDS": "1"}, "while :; do :; done", tmp_path
    )
    assert "[exit code 152]" in answer  # SIGXCPU
    assert "CPU time limit" in answer and "1 s" in answer


@pytest.mark.anyio
async def test_BOT_SANDBOX_TMP_MB_is_the_size_of_tmp(tmp_path: Path) -> None:
    fill = "head -c 3000000 /dev/zero > /tmp/a || echo full-a; head -c 3000000 /dev/zero > /tmp/b || echo full-b"
    small = await run_command_with({"BOT_SANDBOX_TMP_MB": "4"}, fill, tmp_path / "small")
    assert "full-a" not in small and "full-b" in small and "No space left on device" in small
    roomy = await run_command_with({"BOT_SANDBOX_TMP_MB": "16"}, fill, tmp_path / "roomy")
    assert "full-" not in roomy


@pytest.mark.anyio
async def test_BOT_SANDBOX_GROW_MB_caps_the_worktrees_growth(tmp_path: Path) -> None:
    grow = "for i in 1 2 3 4; do head -c 1000000 /dev/zero > part$i.bin; done"
    answer = await run_command_with({"BOT_SANDBOX_GROW_MB": "2"}, grow, tmp_path / "small")
    assert "worktree grew by" in answer and "2 MiB per command" in answer
    roomy = await run_command_with({"BOT_SANDBOX_GROW_MB": "16"}, grow, tmp_path / "roomy")
    assert "worktree grew" not in roomy


# -- commits --------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_BOT_GIT_NAME_and_BOT_GIT_EMAIL_author_the_agents_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Read from the environment only (not a Settings field): set there, as a deployment does.
    monkeypatch.setenv("BOT_GIT_NAME", "Release Robot")
    monkeypatch.setenv("BOT_GIT_EMAIL", "robot@example.test")
    root, sha = make_repo(tmp_path / "repo")
    worktree = create_worktree(root, base=sha, run_id="wf_9177a9177a91", index=1, label="impl")
    box = Toolbox(
        Workspace(git_dir=root / ".git", commit=sha, worktree=worktree.path), IMPLEMENTER.tools
    )
    try:
        await box.call("write_file", {"path": "notes.txt", "content": "hello\n"})
        await box.call("commit", {"message": "Add notes"})
    finally:
        await box.aclose()
    (commit,) = box.commits
    who = git(root, "show", "-s", "--format=%an <%ae> / %cn <%ce>", commit)
    assert who == "Release Robot <robot@example.test> / Release Robot <robot@example.test>"


# -- the operator page ------------------------------------------------------------------------------


def test_BOT_UI_TOKEN_serves_the_operator_page_behind_that_token(data_dir: Path) -> None:
    token = "operator-token-0123456789abcdef"
    store: Storage = Store.open(data_dir / "bot.sqlite3")
    try:
        with serve_ui(create_app(settings_of({}), store)) as url:
            assert httpx.get(f"{url}/ui/", follow_redirects=False).status_code == 404
        with (
            serve_ui(create_app(settings_of({"BOT_UI_TOKEN": token}), store)) as url,
            httpx.Client(base_url=url, timeout=10) as client,
        ):
            assert client.get("/ui/", follow_redirects=False).status_code == 303
            assert client.post("/ui/sign-in", data={"token": "not-it"}).status_code == 401
            signed_in = client.post("/ui/sign-in", data={"token": token}, follow_redirects=False)
            assert signed_in.status_code == 303
            assert client.get("/ui/", follow_redirects=False).status_code == 200
    finally:
        store.close()


# -- run budgets ------------------------------------------------------------------------------


async def run_budgeted(executor: RunExecutor, config: RepoConfig, repo: Path) -> RunDetails:
    """One agent that never finishes by itself (it lists files again and again), run with the
    budget the executor gives a run in a repository with `config` (installation 42)."""

    async def workflow(wf: Workflow, args: Any) -> Any:
        wf.phase("Ask")
        result = await wf.agent("List the files.", agent_type="explorer", label="ask")
        return {"ok": result.ok, "error": result.error, "reached": wf.budget_reached()}

    budget = executor.run_budget(config, 42)
    return await executor.engine.run(
        ONE_AGENT, workflow, None, interaction=AUTONOMOUS, repo=repo, budget=budget
    )


def listing_forever(llm: FakeLLM, tokens: int | None = None) -> None:
    """Every reply a tool call; each counts `tokens` (half prompt, half completion), or what
    it really sent and wrote (the fake's own count, about 4 characters a token) when None."""
    usage = UsageSpec(prompt=tokens // 2, completion=tokens // 2, cached=0) if tokens else None
    llm.respond_with(lambda body: tool_call("list_files", {}, usage=usage))


def sent(llm: FakeLLM, start: int = 0) -> int:
    return len(llm.bodies) - start


@pytest.mark.anyio
async def test_BOT_MAX_RUN_TOKENS_caps_the_tokens_of_every_run(
    github: tuple[FakeGitHub, str], model: tuple[FakeLLM, str], data_dir: Path
) -> None:
    fake, url = github
    llm, llm_url = model
    listing_forever(llm)
    repo = make_repo(data_dir.parent / "work")[0]
    env = {**app_env(fake, url, data_dir), **model_env(llm_url, BOT_MAX_TURNS="30")}
    async with wired({**env, "BOT_MAX_RUN_TOKENS": "6000"}) as executor:
        capped = await run_budgeted(executor, RepoConfig(), repo)
        n_capped = sent(llm)
        # A repository asking for more gets the operator's cap; one asking for less, its own.
        more = RepoConfig.model_validate({"budget": {"max_tokens": 1_000_000}})
        asked_more = await run_budgeted(executor, more, repo)
        n_more = sent(llm, n_capped)
        less = RepoConfig.model_validate({"budget": {"max_tokens": 3000}})
        asked_less = await run_budgeted(executor, less, repo)
        n_less = sent(llm, n_capped + n_more)
    for details, cap in ((capped, 6000), (asked_more, 6000), (asked_less, 3000)):
        assert details.result["error"].startswith("budget reached: the run's"), details.result
        assert details.budget_reached == details.result["reached"] == details.result["error"]
        # Refused when the next request would pass the cap, not before; what was admitted
        # fit, and only the answer of the last (a short tool call) may go past it.
        found = re.search(
            r"used ([\d,]+); the next model call would send about ([\d,]+)",
            details.budget_reached or "",
        )
        assert found is not None, details.budget_reached
        used, next_one = (int(g.replace(",", "")) for g in found.groups())
        assert used == details.usage["total"] <= cap + 50 < used + next_one + 50, details.usage
    assert 1 < n_less < n_capped == n_more < 30
    async with wired(env) as executor:
        free = await run_budgeted(executor, RepoConfig(), repo)
    assert free.result["error"] == "stopped after 30 model turns without finishing"
    assert free.budget_reached is None


@pytest.mark.anyio
async def test_BOT_MAX_RUN_COST_USD_caps_what_every_run_costs(
    github: tuple[FakeGitHub, str], model: tuple[FakeLLM, str], data_dir: Path
) -> None:
    fake, url = github
    llm, llm_url = model
    listing_forever(llm)
    prices = json.dumps({"fake-model": {"input": 100.0, "output": 100.0}})  # $ per million
    repo = make_repo(data_dir.parent / "work")[0]
    env = {
        **app_env(fake, url, data_dir),
        **model_env(llm_url, BOT_MAX_TURNS="30", BOT_MODEL_PRICES=prices),
    }
    async with wired({**env, "BOT_MAX_RUN_COST_USD": "0.5"}) as executor:
        capped = await run_budgeted(executor, RepoConfig(), repo)
    n_capped = sent(llm)
    async with wired({**env, "BOT_MAX_RUN_COST_USD": "1"}) as executor:
        wider = await run_budgeted(executor, RepoConfig(), repo)
    n_wider = sent(llm, n_capped)
    for details, cap in ((capped, 0.5), (wider, 1.0)):
        found = re.search(
            r"the run's \$([\d.]+) \(spent \$([\d.]+); the next model call would cost about "
            r"\$([\d.]+)\)",
            details.budget_reached or "",
        )
        assert found is not None, details.budget_reached
        limit, spent, next_one = (float(g) for g in found.groups())
        assert limit == cap and spent == pytest.approx(details.usage["cost"], abs=1e-4)
        assert spent <= cap + 0.01 < spent + next_one + 0.01
    assert 1 < n_capped < n_wider < 30


@pytest.mark.anyio
async def test_BOT_DAILY_TOKENS_caps_an_installations_day_across_runs(
    github: tuple[FakeGitHub, str], model: tuple[FakeLLM, str], data_dir: Path
) -> None:
    fake, url = github
    llm, llm_url = model
    listing_forever(llm, 10_000)
    repo = make_repo(data_dir.parent / "work")[0]
    env = {
        **app_env(fake, url, data_dir),
        **model_env(llm_url, BOT_MAX_TURNS="2", BOT_DAILY_TOKENS="30000"),
    }
    async with wired(env) as executor:
        first = await run_budgeted(executor, RepoConfig(), repo)  # 2 turns: 20,000
        second = await run_budgeted(executor, RepoConfig(), repo)  # 1 turn, then the day's cap
        third = await run_budgeted(executor, RepoConfig(), repo)  # nothing at all
    assert first.budget_reached is None and first.usage["total"] == 20_000
    assert second.usage["total"] == 10_000
    for details in (second, third):
        assert "this installation's 30,000 tokens for today" in str(details.budget_reached)
    assert third.usage["total"] == 0 and len(llm.bodies) == 3
    # Counted in the database, so every worker's runs count.
    store = Store.open(settings_of(env).sqlite_path)
    try:
        day = time.strftime("%Y-%m-%d", time.gmtime())
        assert store.daily_tokens(42, day) == 30_000
    finally:
        store.close()
