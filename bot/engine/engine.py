"""The workflow engine: blocking and background runs, status, stop, stale-run recovery."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, overload

import anyio
from anyio.abc import TaskGroup

from bot.engine import artifacts
from bot.engine.artifacts import (
    JOURNAL,
    RUN_ID,
    ArtifactMirror,
    RunNotFound,
    RunStore,
    new_run_id,
)
from bot.engine.budget import RunBudget
from bot.engine.details import RunDetails
from bot.engine.dispatch import RunConfig
from bot.engine.git import GitError, common_dir
from bot.engine.journal import Journal, JournalError, workspace_identity
from bot.engine.run import STOPPED, Run
from bot.engine.types import AgentRunner, AgentType
from bot.engine.workflow import WorkflowFn, WorkflowMeta
from bot.engine.worktree import WorktreeError, resolve_commit
from bot.log import bound, get_logger
from policies.interaction import RunInteractionPolicy

log = get_logger("bot.engine")
MAX_CONCURRENCY = 64
MAX_CALLS = 1024
RECENT_RUNS = 20
# Runs executing in this process, whichever Engine runs them: never "stale".
_RUNNING_HERE: set[str] = set()


class Engine:
    """Runs workflows on an AgentRunner and keeps their artifacts under `<data_dir>/runs/`.

    `await engine.run(...)` blocks until the run ends. For background runs use
    `async with Engine(...) as engine:` (or `engine.serve(task_group)`) and `engine.start(...)`.
    """

    def __init__(
        self,
        runner: AgentRunner,
        *,
        data_dir: Path,
        agent_types: Mapping[str, AgentType] | None = None,
        role_models: Mapping[str, str] | None = None,
        default_model: str | None = None,
        default_effort: str | None = None,
        concurrency: int = 8,
        max_calls: int = 128,
        settle_seconds: float = 8.0,
        mirror: ArtifactMirror | None = None,
    ) -> None:
        if not 1 <= concurrency <= MAX_CONCURRENCY:
            raise ValueError(f"concurrency must be between 1 and {MAX_CONCURRENCY}")
        if not 1 <= max_calls <= MAX_CALLS:
            raise ValueError(f"max_calls must be between 1 and {MAX_CALLS}")
        if settle_seconds < 0:
            raise ValueError("settle_seconds must not be negative")
        if agent_types is None:
            # Imported here: the presets' module imports the engine's types, so a module-level
            # import would make the two packages import each other.
            from bot.agents.types import builtin_agent_types

            agent_types = builtin_agent_types()
        self.store = RunStore(Path(data_dir), mirror=mirror)
        self.config = RunConfig(
            runner=runner,
            agent_types=dict(agent_types),
            role_models=dict(role_models or {}),
            default_model=default_model,
            default_effort=default_effort,
            concurrency=concurrency,
            max_calls=max_calls,
            settle_seconds=settle_seconds,
        )
        self._active: dict[str, Run] = {}
        self._recent: dict[str, RunDetails] = {}
        self._stop_early: dict[str, str] = {}
        self._preparing: dict[str, anyio.Event] = {}
        self._tg: TaskGroup | None = None
        self._own_tg: TaskGroup | None = None

    # -- background task group ----------------------------------------------------------------

    async def __aenter__(self) -> Engine:
        self._own_tg = anyio.create_task_group()
        await self._own_tg.__aenter__()
        self._tg = self._own_tg
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        for run in list(self._active.values()):
            run.request_stop("Engine shut down")
        for rid in self._preparing:
            self._stop_early.setdefault(rid, "Engine shut down")
        tg, self._own_tg, self._tg = self._own_tg, None, None
        assert tg is not None
        return await tg.__aexit__(exc_type, exc, tb)

    def serve(self, task_group: TaskGroup) -> None:
        """Start background runs in this task group (instead of `async with`)."""
        self._tg = task_group

    # -- runs ----------------------------------------------------------------------------------

    async def run(
        self,
        meta: WorkflowMeta,
        fn: WorkflowFn,
        args: Any = None,
        *,
        interaction: RunInteractionPolicy,
        repo: Path | None,
        base: str | None = None,
        local_root: Path | None = None,
        run_id: str | None = None,
        resume_from: str | None = None,
        on_update: Callable[[RunDetails], None] | None = None,
        agent_types: Mapping[str, AgentType] | None = None,
        budget: RunBudget | None = None,
    ) -> RunDetails:
        """Run a workflow to its end and return its details (status completed|failed|aborted).

        `repo` is a git dir or a work tree (a bare mirror in webhook runs); `base` is the
        commit read-only agents read and worktrees branch from (default: HEAD of `repo`).
        `local_root` lets read-only agents read that work tree. `resume_from` (a run id or
        unique suffix) replays the journaled read-only calls of that run. `agent_types`
        replaces the engine's for this run (a repository's own added); `budget` is asked
        before every model call and refuses those past it (`bot.engine.budget`). Raises RunNotFound
        for a bad `resume_from` and ValueError for a bad `run_id`; never for workflow errors.
        The run can be stopped from the moment this is called.
        """
        rid = self._register(meta, run_id)
        run: Run | None = None
        try:
            run = await self._prepare(
                meta,
                interaction,
                repo,
                base,
                local_root,
                rid,
                resume_from,
                on_update,
                agent_types,
                budget,
            )
        except BaseException:
            self._recent.pop(rid, None)
            raise
        finally:
            self._prepared(rid, run)
        return await self._execute(run, fn, args)

    def start(
        self,
        meta: WorkflowMeta,
        fn: WorkflowFn,
        args: Any = None,
        *,
        interaction: RunInteractionPolicy,
        repo: Path | None,
        base: str | None = None,
        local_root: Path | None = None,
        run_id: str | None = None,
        resume_from: str | None = None,
        on_update: Callable[[RunDetails], None] | None = None,
    ) -> str:
        """Start a run in the background and return its id at once."""
        if self._tg is None:
            raise RuntimeError("background runs need `async with Engine(...)` or engine.serve(tg)")
        if resume_from is not None:
            self.store.resolve(resume_from)  # a bad reference fails here, before the start
        rid = self._register(meta, run_id)
        placeholder = self._recent[rid]

        async def go() -> None:
            run: Run | None = None
            try:
                run = await self._prepare(
                    meta, interaction, repo, base, local_root, rid, resume_from, on_update
                )
            except Exception as exc:
                placeholder.status = "failed"
                placeholder.error = str(exc)
                placeholder.finished_at = time.time()
                with contextlib.suppress(OSError):
                    self.store.write_details(placeholder)
                return
            finally:
                self._prepared(rid, run)
            await self._execute(run, fn, args)

        self._tg.start_soon(go)
        return rid

    def _register(self, meta: WorkflowMeta, run_id: str | None) -> str:
        """A checked run id, known to status and stop (as preparing) from now on."""
        rid = run_id or new_run_id()
        if not artifacts.RUN_ID.match(rid):
            raise ValueError(f"run id must be wf_ + 12 hex, not {rid!r}")
        if rid in self._active or rid in self._preparing:
            raise ValueError(f"run {rid} is already running")
        self._recent[rid] = RunDetails(run_id=rid, name=meta.name, description=meta.description)
        self._preparing[rid] = anyio.Event()
        return rid

    def _prepared(self, rid: str, run: Run | None) -> None:
        """Preparation is over (`run` is None when it failed): a stop requested during it
        is passed on to the run, which `_execute` must register before the next await."""
        self._preparing.pop(rid).set()
        reason = self._stop_early.pop(rid, None)
        if reason is not None and run is not None:
            run.request_stop(reason)

    async def _prepare(
        self,
        meta: WorkflowMeta,
        interaction: RunInteractionPolicy,
        repo: Path | None,
        base: str | None,
        local_root: Path | None,
        run_id: str,
        resume_from: str | None,
        on_update: Callable[[RunDetails], None] | None,
        agent_types: Mapping[str, AgentType] | None = None,
        budget: RunBudget | None = None,
    ) -> Run:
        rid = run_id
        previous = None
        if resume_from is not None and resume_from == rid:
            previous = rid  # an interrupted attempt of this same run (a crashed worker)
        elif resume_from is not None:
            # A full id whose journal the mirror holds may have run on another machine.
            elsewhere = RUN_ID.match(resume_from) is not None and await anyio.to_thread.run_sync(
                self.store.restore, resume_from, JOURNAL
            )
            others = [r for r in self.store.run_ids() if r != rid]
            previous = resume_from if elsewhere else self.store.resolve(resume_from, others)
        details = RunDetails(
            run_id=rid,
            name=meta.name,
            description=meta.description,
            phases=[{"title": p.title, "detail": p.detail} for p in meta.phase_list()],
            pid=os.getpid(),
            resumed_from=previous,
        )
        journal = Journal()
        if previous == rid:
            # The interrupted attempt may have run on another machine.
            await anyio.to_thread.run_sync(self.store.restore, previous, JOURNAL)
        if previous is not None:
            try:
                journal = Journal.resuming(
                    self.store.run_dir(previous) / JOURNAL, carry=previous == rid
                )
            except JournalError as exc:
                details.resume_note = f"{exc}; every call runs for real"
        git_dir: Path | None = None
        commit: str | None = None
        setup_error: str | None = None
        if repo is not None:
            try:
                git_dir = await anyio.to_thread.run_sync(common_dir, Path(repo))
                commit = await anyio.to_thread.run_sync(resolve_commit, Path(repo), base or "HEAD")
            except (GitError, WorktreeError) as exc:
                setup_error = f"repository {repo} cannot be used: {exc}"
        details.repo = str(repo) if repo is not None else None
        details.base = commit
        config = self.config
        if agent_types is not None:
            config = dataclasses.replace(config, agent_types=dict(agent_types))
        run = Run(
            config,
            details,
            store=self.store,
            interaction=interaction,
            repo=Path(repo) if repo is not None else None,
            git_dir=git_dir,
            base=commit,
            local_root=Path(local_root) if local_root is not None else None,
            journal=journal,
            on_update=on_update,
            budget=budget,
        )
        if setup_error is None:
            run.identity = await anyio.to_thread.run_sync(
                workspace_identity, git_dir, commit, run.local_root
            )
            if run.identity is None and previous is not None and details.resume_note is None:
                details.resume_note = (
                    "the workspace cannot be fingerprinted; every call runs for real"
                )
        else:
            run.setup_error = setup_error
        return run

    async def _execute(self, run: Run, fn: WorkflowFn, args: Any) -> RunDetails:
        rid = run.details.run_id
        self._active[rid] = run
        self._recent[rid] = run.details
        _RUNNING_HERE.add(rid)
        try:
            with bound(run_id=rid):
                log.info("workflow started", extra={"workflow": run.details.name})
                details = await run.execute(fn, args)
                log.info("workflow finished", extra={"status": details.status})
                return details
        finally:
            self._active.pop(rid, None)
            _RUNNING_HERE.discard(rid)
            self._trim_recent()

    def _trim_recent(self) -> None:
        finished = [rid for rid, d in self._recent.items() if d.finished]
        for rid in finished[:-RECENT_RUNS]:
            self._recent.pop(rid, None)

    # -- status, stop, recovery -----------------------------------------------------------------

    @overload
    def status(self, run_id: str) -> RunDetails: ...
    @overload
    def status(self, run_id: None = None) -> list[RunDetails]: ...
    def status(self, run_id: str | None = None) -> RunDetails | list[RunDetails]:
        """One run's details (active, recent, or from disk; exact id or unique suffix), or the
        list of active and recently finished runs. Raises RunNotFound."""
        if run_id is None:
            known = dict(self._recent)
            for rid in self.store.recent_ids(RECENT_RUNS):
                if rid not in known:
                    try:
                        known[rid] = self.store.read_details(rid)
                    except RunNotFound:
                        continue
            return sorted(known.values(), key=lambda d: d.started_at)
        candidates = sorted(set(self.store.run_ids()) | set(self._recent))
        if self.store.mirror is not None and RUN_ID.match(run_id) and run_id not in candidates:
            return self.store.read_details(run_id)  # a run of another machine's, if mirrored
        rid = self.store.resolve(run_id, candidates)
        if rid in self._recent:
            return self._recent[rid]
        return self.store.read_details(rid)

    async def stop(self, run_id: str, reason: str = STOPPED) -> RunDetails:
        """Stop a running run (exact id or unique suffix): its agents are cancelled, it
        settles (bounded) and ends aborted. Raises RunNotFound if no such run is running."""
        rid = self.store.resolve(run_id, sorted([*self._active, *self._preparing]))
        if rid not in self._active:  # still resolving its repository: stop it at once
            self._stop_early[rid] = reason
            return await self.wait(rid)
        run = self._active[rid]
        run.request_stop(reason)
        await run.finished.wait()
        return run.details

    async def wait(self, run_id: str) -> RunDetails:
        """Wait for a run (exact id or unique suffix) to finish; its final details."""
        candidates = sorted(set(self.store.run_ids()) | set(self._recent))
        if self.store.mirror is not None and RUN_ID.match(run_id) and run_id not in candidates:
            return self.store.read_details(run_id)  # a run of another machine's, if mirrored
        rid = self.store.resolve(run_id, candidates)
        preparing = self._preparing.get(rid)
        if preparing is not None:  # still resolving its repository
            await preparing.wait()
        run = self._active.get(rid)
        if run is not None:
            await run.finished.wait()
        return self.status(rid)

    def recover_stale(self) -> list[str]:
        """Mark persisted runs still "running" but run by no live process as aborted."""
        recovered: list[str] = []
        for rid in self.store.run_ids():
            if rid in self._active or rid in _RUNNING_HERE or rid in self._preparing:
                continue
            try:
                details = self.store.read_details(rid)
            except RunNotFound:
                continue
            if details.status != "running" or _alive_elsewhere(details.pid):
                continue
            now = time.time()
            details.status = "aborted"
            details.error = "Recovered at start-up: the process running it had ended"
            details.finished_at = now
            for agent in details.agents:
                if agent.state in ("pending", "running"):
                    agent.state = "error"
                    agent.error = "did not settle"
                    agent.ledger = "uncertain"
                    agent.finished_at = now
            try:
                self.store.write_details(details)
            except OSError as exc:
                log.warning("cannot recover run %s: %s", rid, exc)
                continue
            recovered.append(rid)
        return recovered


def _alive_elsewhere(pid: int | None) -> bool:
    """True when `pid` is another live process (this process's runs are all in `_active`)."""
    if pid is None or pid == os.getpid() or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
