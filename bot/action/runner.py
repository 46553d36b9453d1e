"""`bot action`: one GitHub Actions job's event through the same path as a server's delivery.

The job's event (`policies.action_event`) is stored as one delivery in a SQLite store of the
job's own (a fresh temporary directory), and a worker of one task handles it and every job
it leads to until none is left: `decide()`, the workflow, the publisher, exactly as `bot
serve` would. What differs is who the app is and what it remembers:

- it acts with the job's token (`TokenApp`): `github-actions[bot]` for `GITHUB_TOKEN`, or the
  App named by `--app-slug` when the workflow made an App token; its own comments are known
  by their marker together with that login, never by the marker alone;
- nothing survives the job but what it posted: a review's memory is read back from the
  signed marker in the pull request's sticky summary (`BOT_STATE_KEY`, else a key derived
  from the model's API key, so the next job can check it);
- the job's checkout lends its objects to the app's mirror when it holds the whole history
  of the event's repository (`fetch-depth: 0`); otherwise the mirror fetches what it needs.

The outcome goes to the job log, the step summary (`GITHUB_STEP_SUMMARY`) and the exit code:
0 for a run that ended (BLOCKED included) or an event the app does not act on, 1 for a failed
run or a job that cannot run the app.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from bot.action.env import ActionEnv, ActionEnvError, read_event
from bot.action.report import ActionReport, Annotation, write_step_summary
from bot.action.workspace import lend_workspace
from bot.log import configure, get_logger

if TYPE_CHECKING:
    from bot.intake.delivery_writer import IncomingDelivery
    from bot.runs.worker import Worker
from bot.settings import Settings, SettingsError, load_settings
from policies.action_event import ActionDelivery, ActionSkip, plan_delivery

log = get_logger(__name__)

TOKEN_LOGIN = "github-actions"
"""The account a job's `GITHUB_TOKEN` acts as (`github-actions[bot]`)."""
MAX_WAIT_S = 600.0
"""How long the job waits for a job deferred to later (GitHub's rate limit, a retry)."""
POLL_S = 2.0

# Settings that describe a server's App and store; a job has neither.
_SERVER_ONLY = (
    "BOT_APP_ID",
    "BOT_PRIVATE_KEY",
    "BOT_PRIVATE_KEY_PATH",
    "BOT_DATABASE_URL",
    "BOT_WEBHOOK_SECRET",
    "BOT_UI_TOKEN",
)


def action_environ(
    environ: Mapping[str, str], env: ActionEnv, data_dir: Path, slug: str
) -> dict[str, str]:
    """The BOT_* settings for the job: the operator's model settings as given, the job's
    GitHub, a store of its own, one task, and no background sweeps."""
    out = {k: v for k, v in environ.items() if k not in _SERVER_ONLY}
    out.update(
        BOT_DATA_DIR=str(data_dir),
        BOT_GITHUB_API_URL=env.github_api_url,
        BOT_GITHUB_WEB_URL=env.github_server_url,
        BOT_APP_SLUG=slug,
        BOT_WORKERS="1",
        BOT_REDELIVER_INTERVAL="0",
    )
    return out


def review_key(settings: Settings) -> tuple[bytes, str | None]:
    """The key that signs the review memory, and a warning when none lasts past this job."""
    from policies.review_state import state_key

    if settings.state_key is not None:
        return state_key(settings.state_key.get_secret_value().encode()), None
    for secret in (settings.llm_api_key, settings.anthropic_api_key):
        if secret is not None and secret.get_secret_value().strip():
            # A key of its own, derived: the marker reveals nothing of the API key.
            material = b"bot action review memory\0" + secret.get_secret_value().encode()
            return state_key(material), None
    return secrets.token_bytes(32), (
        "no BOT_STATE_KEY and no model API key: the review memory of this job cannot be "
        "checked by the next one, so each push is reviewed in full"
    )


def stop_commands() -> str | None:
    """In a job, stop the runner reading workflow commands in the step's output: what the app
    logs quotes GitHub and the model, and none of that may set an output or mask a value.
    The token resumes them (`annotate`); None outside Actions."""
    if os.environ.get("GITHUB_ACTIONS") != "true":
        return None
    token = secrets.token_hex(16)
    print(f"::stop-commands::{token}", flush=True)
    return token


def annotate(token: str | None, annotations: tuple[Annotation, ...]) -> None:
    """Print the annotations as workflow commands, the only ones the app gives."""
    if not annotations:
        return
    if token is not None:
        print(f"::{token}::", flush=True)
    for annotation in annotations:
        print(annotation.command(), flush=True)
    if token is not None:
        print(f"::stop-commands::{secrets.token_hex(16)}", flush=True)


def run(args: argparse.Namespace) -> int:
    configure(os.environ.get("BOT_LOG_LEVEL", "INFO"), json_lines=False)
    commands = stop_commands()
    summary_path = os.environ.get("GITHUB_STEP_SUMMARY") or None
    try:
        env = ActionEnv.read()
        payload = read_event(env.github_event_path)
    except ActionEnvError as exc:
        log.error(str(exc))
        write_step_summary(summary_path, ActionReport.refused(str(exc)))
        return 1
    plan = plan_delivery(env.github_event_name, payload, env.github_repository)
    if isinstance(plan, ActionSkip):
        (log.error if plan.failed else log.info)(plan.reason)
        report = (
            ActionReport.refused(plan.reason) if plan.failed else ActionReport.skip(plan.reason)
        )
        write_step_summary(summary_path, report)
        return 1 if plan.failed else 0
    slug = args.app_slug or TOKEN_LOGIN
    data_dir = Path(tempfile.mkdtemp(prefix="bot-action-", dir=env.runner_temp))
    try:
        settings = load_settings(action_environ(os.environ, env, data_dir, slug), dotenv=None)
    except SettingsError as exc:
        log.error(str(exc))
        write_step_summary(summary_path, ActionReport.refused(str(exc)))
        return 1
    try:
        report = anyio.run(_handle, settings, env, plan, slug)
    finally:
        if args.artifacts is not None:
            _keep_artifacts(data_dir, args.artifacts)
        shutil.rmtree(data_dir, ignore_errors=True)
    for line in report.log_lines():
        (log.error if report.failed else log.info)(line)
    annotate(commands, report.annotations)
    write_step_summary(summary_path, report)
    return 1 if report.failed else 0


SANDBOX_NOTE = (
    "agents could not run commands: the sandbox (bubblewrap) cannot start on this runner. "
    "On GitHub's Ubuntu runners, a step before this one can allow it: "
    "`sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`"
)


async def _handle(
    settings: Settings, env: ActionEnv, plan: ActionDelivery, slug: str
) -> ActionReport:
    from bot.agents.sandbox import probe_sandbox
    from bot.agents.sandbox_limits import SandboxLimits
    from bot.github.client import RetryPolicy, TokenApp
    from bot.intake.delivery_writer import DeliveryWriter
    from bot.runs.worker import Worker
    from bot.store.backend import job_queue, open_store
    from bot.store.sqlite import Store
    from bot.wiring import build_worker_hooks

    store = open_store(settings)
    assert isinstance(store, Store)  # a job's store is always its own SQLite file
    github = TokenApp(
        env.github_token.get_secret_value(),
        app_slug=slug,
        api_url=settings.github_api_url,
        policy=RetryPolicy(mutation_interval_s=settings.github_write_interval),
    )
    key, key_warning = review_key(settings)
    notes = [key_warning] if key_warning else []
    sandbox = await anyio.to_thread.run_sync(
        lambda: probe_sandbox(limits=SandboxLimits.from_settings(settings))
    )
    if not sandbox.ok:
        notes.append(f"{SANDBOX_NOTE} ({sandbox.reason})")
    try:
        hooks = build_worker_hooks(
            settings,
            store,
            github=github,
            review_key=key,
            sweeps=False,
            sandbox=sandbox,
            carry_blocked=True,
        )
        worker = Worker(
            store,
            job_queue(store),
            hooks,
            app_slug=slug,
            concurrency=1,
            lease_seconds=settings.job_lease_seconds,
        )
        lent = await lend_workspace(env, settings)
        if lent:
            notes.append(lent)
        writer = DeliveryWriter(store.path)
        writer.start()
        try:
            await writer.submit(_incoming(env, plan))
        finally:
            writer.stop()
        waited_out = await _drain_unless_cancelled(worker)
        if waited_out:
            notes.append(waited_out)
        return ActionReport.from_store(store, env.delivery_id, notes=notes)
    finally:
        await github.aclose()
        store.close()


def _incoming(env: ActionEnv, plan: ActionDelivery) -> IncomingDelivery:
    import json

    from bot.intake.delivery_writer import IncomingDelivery

    headers = {"x-github-event": plan.event, "x-github-delivery": env.delivery_id}
    action = plan.payload.get("action")
    return IncomingDelivery(
        guid=env.delivery_id,
        event=plan.event,
        action=action if isinstance(action, str) else None,
        hook_id=None,
        target_type="repository",
        target_id=None,
        headers_json=json.dumps(headers),
        body=json.dumps(plan.payload, separators=(",", ":")).encode(),
        received_at=time.time(),
    )


CANCELLED = "the job was cancelled"
STOP_GRACE_S = 6.0
"""After a cancel, how long the runs have to record and post that they stopped: GitHub
sends SIGINT, then SIGTERM 7.5 s later, and kills the step 2.5 s after that."""


async def _drain_unless_cancelled(worker: Worker) -> str | None:
    """`_drain`, and on SIGINT or SIGTERM (a cancelled job) stop the runs in flight so they
    post that they stopped (their check run concluded, the sticky comment edited) rather
    than leave them in progress; what is not done within STOP_GRACE_S is abandoned."""
    result: list[str | None] = []

    async def drain(scope: anyio.CancelScope) -> None:
        result.append(await _drain(worker))
        scope.cancel()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(drain, tasks.cancel_scope)
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                log.warning("cancelled; stopping the runs", extra={"signal": signum})
                stop = worker.hooks.stop_run
                for run_id in worker.held_runs():
                    if stop is not None:
                        await stop(run_id, CANCELLED)
                tasks.cancel_scope.deadline = anyio.current_time() + STOP_GRACE_S
                break
    return result[0] if result else f"{CANCELLED}; what it had not finished was stopped"


async def _drain(worker: Worker) -> str | None:
    """Handle jobs until none is queued; wait for one deferred to later up to MAX_WAIT_S."""
    from bot.store.queue.base import JobStatus

    deadline = time.monotonic() + MAX_WAIT_S
    while True:
        await worker.run_until_idle("action")
        counts = await worker.queue.counts()
        if not counts.get(JobStatus.QUEUED, 0) and not counts.get(JobStatus.RUNNING, 0):
            return None
        if time.monotonic() >= deadline:
            return (
                f"a job deferred to later was still waiting after {int(MAX_WAIT_S)} s; "
                "the next event of this pull request or issue takes it up"
            )
        await anyio.sleep(POLL_S)


def _keep_artifacts(data_dir: Path, target: Path) -> None:
    """The run's journal and artifacts (the engine's files and the store), for upload."""
    target.mkdir(parents=True, exist_ok=True)
    for name in ("runs", "bot.sqlite3"):
        source = data_dir / name
        if source.is_dir():
            shutil.copytree(source, target / name, dirs_exist_ok=True)
        elif source.is_file():
            shutil.copy2(source, target / name)
