"""One workflow execution: progress, stop, bounded settle, final status and artifacts."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from bot.engine import artifacts
from bot.engine.budget import RunBudget
from bot.engine.details import RunDetails
from bot.engine.dispatch import CallDispatch, RunConfig
from bot.engine.journal import Journal
from bot.engine.report import build_result_message
from bot.engine.sanitize import strip_terminal
from bot.engine.types import Usage
from bot.engine.workflow import Workflow, WorkflowFn
from bot.log import get_logger
from policies.interaction import RunInteractionPolicy

log = get_logger("bot.engine")
STOPPED = "Stopped by user"
WRITE_INTERVAL = 0.5


class Run(CallDispatch):
    """State and behaviour of one run; `Engine` creates it and awaits `execute()`."""

    def __init__(
        self,
        config: RunConfig,
        details: RunDetails,
        *,
        store: artifacts.RunStore,
        interaction: RunInteractionPolicy,
        repo: Path | None,
        git_dir: Path | None,
        base: str | None,
        local_root: Path | None,
        journal: Journal,
        on_update: Callable[[RunDetails], None] | None,
        budget: RunBudget | None = None,
    ) -> None:
        self.config = config
        self.budget = budget
        self.details = details
        self.store = store
        self.run_dir = store.run_dir(details.run_id)
        self.interaction = interaction
        self.repo = repo
        self.git_dir = git_dir
        self.base = base
        self.local_root = local_root
        self.journal = journal
        self.on_update = on_update
        self.concurrency = config.concurrency
        self.limiter = anyio.CapacityLimiter(config.concurrency)
        self.identity: str | None = None
        self.usage = Usage()
        self.submitted = 0
        self.refs: dict[str, tuple[str, str]] = {}
        self.transcripts: dict[str, dict[str, Any]] = {}
        self.writes_started = 0
        self.transcript_bytes = 0
        self.writes_in_flight = 0
        self.in_flight = 0
        self.stop_reason: str | None = None
        self.body_scope = anyio.CancelScope()
        self.body_done = anyio.Event()
        self.stop_event = anyio.Event()
        self.finished = anyio.Event()
        self._outcome: tuple[str, Any] | None = None
        self._dirty = False
        self.setup_error: str | None = None
        self.details.usage = self.usage_snapshot()

    # -- progress ---------------------------------------------------------------------------

    def notify(self, *, force_write: bool = False) -> None:
        self._dirty = True
        if force_write:
            self._flush()
        if self.on_update is not None:
            try:
                self.on_update(self.details)
            except Exception:
                log.exception("on_update callback failed")

    def _flush(self) -> None:
        self._dirty = False
        try:
            self.store.write_details(self.details)
        except (OSError, TypeError, ValueError) as exc:
            log.warning("cannot write workflow.json: %s", exc)

    async def _flusher(self) -> None:
        """Keep workflow.json at most WRITE_INTERVAL behind, for status from other processes."""
        while True:
            await anyio.sleep(WRITE_INTERVAL)
            if self._dirty:
                self._flush()

    def set_phase(self, title: str) -> None:
        title = strip_terminal(title)
        self.details.current_phase = title
        if all(p["title"] != title for p in self.details.phases):
            self.details.phases.append({"title": title, "detail": ""})
        self.notify()

    def add_log(self, message: str) -> None:
        self.details.add_log(strip_terminal(message))
        self.notify()

    def usage_snapshot(self) -> dict[str, Any]:
        data = self.usage.as_dict()
        data["agents"] = self.submitted
        return data

    # -- lifecycle --------------------------------------------------------------------------

    def request_stop(self, reason: str = STOPPED) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
        self.stop_event.set()

    async def execute(self, fn: WorkflowFn, args: Any) -> RunDetails:
        """Run the workflow to the end (or until stopped) and write every artifact."""
        self.notify(force_write=True)
        if self.setup_error is not None:
            self._outcome = ("failed", self.setup_error)
            self._finalize()
            return self.details
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._body, fn, args)
                flusher = anyio.CancelScope()

                async def flush_loop() -> None:
                    with flusher:
                        await self._flusher()

                tg.start_soon(flush_loop)
                await self._supervise()
                flusher.cancel()
                self._finalize()
        except BaseException:
            if not self.details.finished:
                self.stop_reason = self.stop_reason or "Run interrupted"
                self._finalize()
            raise
        return self.details

    async def _body(self, fn: WorkflowFn, args: Any) -> None:
        try:
            with self.body_scope:
                value = await fn(Workflow(self, args), args)
                self._outcome = ("completed", value)
        except Exception as exc:
            log.warning("workflow raised", exc_info=True)
            self._outcome = ("failed", f"{type(exc).__name__}: {exc}")
        finally:
            self.body_done.set()

    async def _supervise(self) -> None:
        async with anyio.create_task_group() as waiters:

            async def body_finished() -> None:
                await self.body_done.wait()
                waiters.cancel_scope.cancel()

            async def stop_requested() -> None:
                await self.stop_event.wait()
                self.body_scope.cancel()
                with anyio.move_on_after(self.config.settle_seconds):
                    await self.body_done.wait()
                waiters.cancel_scope.cancel()

            waiters.start_soon(body_finished)
            waiters.start_soon(stop_requested)

    def _finalize(self) -> None:
        details = self.details
        now = time.time()
        for agent in details.agents:
            if agent.state in ("pending", "running"):
                agent.state = "error"
                agent.error = "did not settle"
                agent.ledger = "uncertain"
                agent.finished_at = now
        if self.stop_reason is not None and (self._outcome is None or self.stop_event.is_set()):
            details.status = "aborted"
            details.error = self.stop_reason
        elif self._outcome is None:
            details.status = "aborted"
            details.error = "Run interrupted"
        elif self._outcome[0] == "completed":
            try:
                artifacts.dumps(self._outcome[1])
                details.result = _plain(self._outcome[1])
                details.has_result = True
                details.status = "completed"
            except (TypeError, ValueError) as exc:
                details.status = "failed"
                details.error = f"workflow result is not JSON-serializable: {exc}"
        else:
            details.status = "failed"
            details.error = strip_terminal(str(self._outcome[1]))
        details.finished_at = now
        details.usage = self.usage_snapshot()
        details.budget_reached = self.budget.reached if self.budget is not None else None
        self._write_all()
        self.finished.set()
        self.notify()

    def _write_all(self) -> None:
        """Every artifact; workflow.json last, so a finished status means all are written."""
        try:
            rid = self.details.run_id
            self.store.write_json(
                rid,
                "result.json",
                {
                    "status": self.details.status,
                    "result": self.details.result,
                    "error": self.details.error,
                },
                pretty=True,
            )
            self.store.write_json(rid, "transcripts.json", self.transcripts)
            self.store.write_json(rid, artifacts.JOURNAL, self.journal.to_json())
            self.store.write_text(
                rid, "report.md", build_result_message(self.details, self.run_dir) + "\n"
            )
        except (OSError, TypeError, ValueError) as exc:
            log.error("cannot write run artifacts: %s", exc)
        self._flush()


def _plain(value: Any) -> Any:
    """The result as plain JSON data (AgentResult and friends converted)."""
    return json.loads(artifacts.dumps(value))
