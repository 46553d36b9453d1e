"""Model-free replies: `help`, `status`, `stop`, and help for an unknown command."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from bot.engine.artifacts import RunNotFound
from bot.engine.sanitize import strip_terminal
from bot.log import get_logger
from bot.publish.render import RunRow, render_help, render_reply, render_status, render_stop
from bot.workflows.review.memory import load_state, save_state
from policies.commands import render_help as help_text
from policies.untrusted_text import code_span

if TYPE_CHECKING:
    from bot.engine.engine import Engine
    from bot.publish.publisher import Publisher
    from bot.store.contract import Storage

log = get_logger(__name__)


def target_name(kind: str, number: int) -> str:
    return f"{'PR' if kind == 'pull_request' else 'issue'} #{number}"


def runs_for_target(
    store: Storage, repo: str, kind: str, number: int, *, exclude: str = ""
) -> list[RunRow]:
    """The newest 20 runs on one issue or PR, newest first (blocking: run it in a thread)."""
    return [
        RunRow(
            run_id=run.id,
            workflow=run.workflow,
            status=run.status,
            created=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(run.created_at)),
        )
        for run in store.runs_on_target(repo, kind, number, exclude=exclude)
    ]


STOPPED_BY_REQUEST = "stopped on request"


async def stop_runs(engine: Engine, rows: list[RunRow], store: Storage | None = None) -> list[str]:
    """Stop the running or queued runs of `rows`; the ids asked to stop.

    Each is marked in the store, which every worker watches for the runs it carries out
    (`RunExecutor`), so a run on another worker or machine stops within a few seconds, even
    before its agents start; one in this process's engine is stopped at once as well.
    """
    stopped: list[str] = []
    for row in rows:
        if row.status not in ("running", "queued"):
            continue
        if store is not None:
            await anyio.to_thread.run_sync(store.request_stop, row.run_id, STOPPED_BY_REQUEST)
        try:
            await engine.stop(row.run_id)
        except RunNotFound:
            if store is None:
                continue  # not running in this process, and nobody else to tell
        stopped.append(row.run_id)
        log.info("run stopped on request", extra={"stopped_run": row.run_id})
    return stopped


async def answer_command(
    publisher: Publisher,
    *,
    command: str,
    run_id: str,
    repo: str,
    kind: str,
    number: int,
    store: Storage,
    engine: Engine,
    app_slug: str,
) -> None:
    """Reply to `help`, `status`, `stop`, `pause` or `resume` on the command's issue or PR."""
    target = target_name(kind, number)
    if command == "help":
        body = render_help(run_id, help_text(app_slug))
    elif command in ("pause", "resume"):
        paused = command == "pause"
        state = await load_state(store, repo, number, bot_login=f"{app_slug}[bot]")
        await save_state(store, repo, number, state.model_copy(update={"paused": paused}))
        if not paused:  # `review.auto_pause` counts afresh from here
            await anyio.to_thread.run_sync(store.forget_auto_reviews, repo, number)
        text = (
            f"Automatic reviews of this pull request are paused. Comment `@{app_slug} resume` "
            f"to turn them on again; `@{app_slug} review` still reviews on request."
            if paused
            else "Automatic reviews of this pull request are on again: each push is reviewed."
        )
        body = render_reply(run_id, command, text)
    else:
        rows = await anyio.to_thread.run_sync(
            lambda: runs_for_target(store, repo, kind, number, exclude=run_id)
        )
        if command == "status":
            body = render_status(run_id, rows, target=target)
        else:
            body = render_stop(run_id, await stop_runs(engine, rows, store), target=target)
    await publisher.reply(body)


def unknown_command_note(detail: str) -> str:
    """The line above the help text: which word was not understood, or the policy's sentence."""
    word = strip_terminal(detail).strip()[:80]
    if not word:
        return "I did not get that."
    if " " in word:  # a sentence from the policy, e.g. "ask needs a question"
        sentence = word.replace("`", "'")
        return sentence[0].upper() + sentence[1:] + "."
    return f"{code_span(word)} is not a command I know."


async def answer_unknown(publisher: Publisher, *, run_id: str, detail: str, app_slug: str) -> None:
    """Reply to an unknown command with the help text, saying what was not understood."""
    note = unknown_command_note(detail)
    await publisher.reply(render_help(run_id, help_text(app_slug), note=note))
