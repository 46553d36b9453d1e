"""Agent calls inside a run: budget, validation, replay, limiter, runner, worktree, ledger."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import anyio

from bot.engine import artifacts
from bot.engine.acceptance import evaluate
from bot.engine.budget import RunBudget
from bot.engine.calls import (
    MAX_INPUTS,
    OUTPUT_CAP,
    AgentRequest,
    AgentResult,
    CallRejected,
    ResolvedCall,
    new_upstream_fence,
    resolve_call,
    result_text,
)
from bot.engine.details import AgentDetails, RunDetails
from bot.engine.handoff import Cleanup, collect_handoff, reclaim
from bot.engine.journal import Journal, call_key, workspace_identity
from bot.engine.sanitize import strip_terminal
from bot.engine.schema import schema_violation
from bot.engine.types import (
    AgentInvocation,
    AgentRunner,
    AgentType,
    RunnerResult,
    Usage,
    Workspace,
)
from bot.engine.worktree import Worktree, WorktreeError, create_worktree
from bot.log import bound, get_logger
from policies.budget import estimate_tokens
from policies.interaction import RunInteractionPolicy

log = get_logger("bot.engine")
TRANSCRIPT_ENTRIES = 40
TRANSCRIPT_ENTRY_CHARS = 8 * 1024
TRANSCRIPTS_TOTAL = 16 * 1024 * 1024
OFFERED_CHARS = 128 * 1024
"""The cap of a transcript's leading `system` entry: the system prompt (32 KiB at most) and
the tools' specifications with their schemas."""


@dataclass(frozen=True, slots=True)
class RunConfig:
    """Engine-wide settings a run works under."""

    runner: AgentRunner
    agent_types: Mapping[str, AgentType]
    role_models: Mapping[str, str]
    default_model: str | None
    default_effort: str | None
    concurrency: int
    max_calls: int
    settle_seconds: float


def _bounded_transcript(entries: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The first entry plus the newest, each capped; and the size that takes in JSON. A
    leading `system` entry (what the agent was offered, `bot.agents.transcript`) is kept
    besides, under its own cap (OFFERED_CHARS)."""
    head = 2 if entries and entries[0].get("role") == "system" else 1
    kept = (
        entries
        if len(entries) <= TRANSCRIPT_ENTRIES + head - 1
        else [*entries[:head], *entries[-(TRANSCRIPT_ENTRIES - 1) :]]
    )
    out: list[dict[str, Any]] = []
    size = 0
    for n, entry in enumerate(kept):
        cap = OFFERED_CHARS if head == 2 and n == 0 else TRANSCRIPT_ENTRY_CHARS
        try:
            text = artifacts.dumps(entry)
        except (TypeError, ValueError):
            text = repr(entry)
            entry = {"unserializable": text[:cap]}
        if len(text) > cap:
            entry = {"truncated": text[:cap]}
        out.append(entry)
        size += min(len(text), cap)
    return out, size


class CallDispatch:
    """The agent-call half of a run; `Run` adds progress and lifecycle."""

    config: RunConfig
    details: RunDetails
    store: artifacts.RunStore
    run_dir: Path
    interaction: RunInteractionPolicy
    git_dir: Path | None
    base: str | None
    local_root: Path | None
    journal: Journal
    limiter: anyio.CapacityLimiter
    identity: str | None
    usage: Usage
    submitted: int
    refs: dict[str, tuple[str, str]]
    transcripts: dict[str, dict[str, Any]]
    writes_started: int
    transcript_bytes: int
    writes_in_flight: int
    in_flight: int
    stop_reason: str | None
    finished: anyio.Event
    budget: RunBudget | None

    @cached_property
    def upstream_fence(self) -> str:
        """This run's token for the fences around upstream results (see `upstream_block`)."""
        return new_upstream_fence()

    def notify(self, *, force_write: bool = False) -> None:
        raise NotImplementedError

    def usage_snapshot(self) -> dict[str, Any]:
        raise NotImplementedError

    def _flush(self) -> None:
        raise NotImplementedError

    async def agent(self, req: AgentRequest) -> AgentResult:
        self.submitted += 1
        index = self.submitted
        label = (
            strip_terminal(str(req.label)) if req.label else f"{req.agent_type or 'agent'}-{index}"
        )
        phase = strip_terminal(str(req.phase)) if req.phase else self.details.current_phase
        agent = AgentDetails(
            index=index, label=label, phase=phase, agent_type=str(req.agent_type or "general")
        )
        self.details.agents.append(agent)
        self.details.usage = self.usage_snapshot()
        with bound(run_id=self.details.run_id, agent=index):
            try:
                call = self._resolve(req, index)
            except CallRejected as exc:
                return self._reject(agent, str(exc))
            agent.ledger = "pending"
            agent.model, agent.effort = call.model, call.effort
            try:
                return await self._dispatch(agent, call)
            except Exception as exc:  # an engine bug must fail the call, never the workflow
                log.exception("agent call failed inside the engine")
                reason = f"engine error: {type(exc).__name__}: {exc}"
                if agent.state not in ("done", "error"):
                    agent.state, agent.ledger, agent.error = "error", "settled", reason
                    agent.finished_at = time.time()
                self.notify()
                return AgentResult(ok=False, error=reason, label=agent.label)

    def _resolve(self, req: AgentRequest, index: int) -> ResolvedCall:
        if index > self.config.max_calls:
            raise CallRejected(
                f"agent call budget exhausted: {self.config.max_calls} calls per run "
                f"(this was call {index})"
            )
        upstream: list[tuple[str, str]] = []
        if req.inputs:
            inputs = list(req.inputs)
            if len(inputs) > MAX_INPUTS:
                raise CallRejected(f"at most {MAX_INPUTS} inputs per call")
            for ref in inputs:
                if ref not in self.refs:
                    raise CallRejected(
                        f"unknown input ref {ref!r} (refs come from this run's successful calls)"
                    )
                upstream.append(self.refs[ref])
        return resolve_call(
            req,
            agent_types=self.config.agent_types,
            role_models=self.config.role_models,
            default_model=self.config.default_model,
            default_effort=self.config.default_effort,
            upstream=upstream,
            fence=self.upstream_fence,
        )

    def _reject(self, agent: AgentDetails, reason: str) -> AgentResult:
        agent.ledger = "rejected"
        agent.state = "error"
        agent.error = reason
        agent.finished_at = time.time()
        self.notify()
        return AgentResult(ok=False, error=reason, label=agent.label)

    async def _dispatch(self, agent: AgentDetails, call: ResolvedCall) -> AgentResult:
        key: str | None = None
        if call.replayable and self.identity is not None:
            key = call_key(
                prompt=call.key_prompt,
                schema=call.schema,
                agent_type=call.agent_type,
                model=call.model,
                provider=call.provider,
                effort=call.effort,
                acceptance=call.contract.as_dict() if call.contract else None,
                workspace=self.identity,
                mode=self.interaction.mode.value,
            )
            entry = self.journal.claim(key)
            if entry is not None:
                return self._replay(agent, key, entry)
        agent.ledger = "claimed"
        self.notify()
        try:
            await self.limiter.acquire()
        except anyio.get_cancelled_exc_class():
            agent.state, agent.ledger = "error", "settled"
            agent.error = self.stop_reason or "cancelled"
            raise
        try:
            if self.budget is not None:
                # The call's first request, estimated before it starts; the runner asks again
                # before every request it makes (`AgentInvocation.budget`).
                sending = estimate_tokens(len(call.prompt) + len(call.agent_type.instructions))
                refused = self.budget.check(sending)
                if refused is not None:
                    return self._reject(agent, refused)
            return await self._execute(agent, call, key)
        finally:
            self.limiter.release()

    def _replay(self, agent: AgentDetails, key: str, entry: dict[str, Any]) -> AgentResult:
        agent.ledger = "replayed"
        agent.replayed = True
        agent.state = "done"
        agent.acceptance = entry.get("acceptance")
        agent.started_at = agent.finished_at = time.time()
        result = AgentResult(
            ok=True,
            output=str(entry.get("output", "")),
            structured=entry.get("structured"),
            acceptance=entry.get("acceptance"),
            ref=self._ref(agent),
            label=agent.label,
        )
        self.refs[result.ref or ""] = (agent.label, result_text(result))
        self._record(key, self._journal_entry(agent, result))
        self.transcripts[str(agent.index)] = {
            "label": agent.label,
            "replayed": True,
            **result.to_dict(),
        }
        agent.ref = result.ref
        self.notify()
        return result

    def _ref(self, agent: AgentDetails) -> str:
        return f"{self.details.run_id}#{agent.index}"

    def _journal_entry(self, agent: AgentDetails, result: AgentResult) -> dict[str, Any]:
        return {
            "label": agent.label,
            "output": result.output,
            "structured": result.structured,
            "acceptance": result.acceptance,
        }

    async def _execute(
        self, agent: AgentDetails, call: ResolvedCall, key: str | None
    ) -> AgentResult:
        agent.ledger = "running"
        agent.state = "running"
        agent.started_at = time.time()
        self.in_flight += 1
        writes_before = self.writes_started
        overlapped = self.writes_in_flight > 0
        if call.worktree:
            self.writes_started += 1
            self.writes_in_flight += 1
        self.notify()
        worktree: Worktree | None = None
        outcome: RunnerResult | None = None
        try:
            if call.worktree:
                worktree, failure = await self._make_worktree(agent)
                if worktree is None:
                    outcome = RunnerResult(error=failure)
            if outcome is None:
                outcome = await self._call_runner(agent, call, worktree)
        except anyio.get_cancelled_exc_class():
            if not self.finished.is_set():
                agent.state = "error"
                agent.error = self.stop_reason or "cancelled"
                agent.ledger = "settled"
                agent.finished_at = time.time()
            raise
        finally:
            self.in_flight -= 1
            if call.worktree:
                self.writes_in_flight -= 1
            if worktree is not None:
                with anyio.CancelScope(shield=True):
                    await self._finish_worktree(agent, worktree)
        result = self._settle(agent, call, outcome)
        if (
            key is not None
            and result.ok
            and not overlapped
            and self.writes_started == writes_before
            and await self._workspace_unchanged()
        ):
            self._record(key, self._journal_entry(agent, result))
        return result

    def _record(self, key: str, entry: dict[str, Any]) -> None:
        """Journal a replayable result and write the journal at once, so an attempt that is
        killed mid-run (a crashed worker) still leaves what it finished for the next one."""
        self.journal.record(key, entry)
        try:
            self.store.write_json(self.details.run_id, artifacts.JOURNAL, self.journal.to_json())
        except (OSError, TypeError, ValueError) as exc:
            log.warning("cannot write the journal: %s", exc)

    async def _workspace_unchanged(self) -> bool:
        if self.local_root is None:
            return True
        now = await anyio.to_thread.run_sync(
            workspace_identity, self.git_dir, self.base, self.local_root
        )
        return now is not None and now == self.identity

    async def _make_worktree(self, agent: AgentDetails) -> tuple[Worktree | None, str]:
        if self.git_dir is None or self.base is None:
            return None, "isolation='worktree' needs a git repository for this run"
        try:
            wt = await anyio.to_thread.run_sync(
                lambda: create_worktree(
                    self.git_dir,  # type: ignore[arg-type]
                    base=self.base,  # type: ignore[arg-type]
                    run_id=self.details.run_id,
                    index=agent.index,
                    label=agent.label,
                )
            )
        except WorktreeError as exc:
            return None, str(exc)
        except Exception as exc:
            log.exception("worktree creation failed")
            return None, f"cannot create worktree for agent {agent.index}: {exc}"
        agent.worktree_branch = wt.branch
        agent.worktree_path = str(wt.path)
        self.notify()
        return wt, ""

    async def _finish_worktree(self, agent: AgentDetails, wt: Worktree) -> None:
        """Write the handoff record first, then reclaim what is safe to reclaim."""
        name = f"worktrees/agent-{agent.index}.json"

        def work() -> Cleanup:
            record = collect_handoff(wt)
            self.store.write_json(
                self.details.run_id,
                name,
                {"agent": agent.index, "label": agent.label, **record.as_dict()},
                pretty=True,
            )
            return reclaim(wt, record)

        try:
            cleanup = await anyio.to_thread.run_sync(work)
        except Exception as exc:  # never lose the run over a cleanup problem
            log.warning("worktree handoff failed", exc_info=True)
            agent.worktree_cleanup = {"reason": f"handoff failed: {exc}", "commits": 0}
        else:
            agent.worktree_handoff = name
            agent.worktree_cleanup = cleanup.as_dict()
            agent.worktree_branch = cleanup.branch
            agent.worktree_path = None if cleanup.removed else str(wt.path)
        if self.finished.is_set():
            self._flush()  # a late handoff still reaches workflow.json
        self.notify()

    async def _call_runner(
        self, agent: AgentDetails, call: ResolvedCall, wt: Worktree | None
    ) -> RunnerResult:
        workspace = Workspace(
            git_dir=self.git_dir,
            commit=self.base,
            worktree=wt.path if wt else None,
            branch=wt.branch if wt else None,
            local_root=None if wt else self.local_root,
        )
        invocation = AgentInvocation(
            run_id=self.details.run_id,
            index=agent.index,
            label=agent.label,
            phase=agent.phase,
            prompt=call.prompt,
            agent_type=call.agent_type,
            interaction=self.interaction,
            workspace=workspace,
            schema=call.schema,
            model=call.model,
            provider=call.provider,
            effort=call.effort,
            artifacts_dir=self.run_dir,
            budget=self.budget,
        )
        try:
            result = await self.config.runner.run(invocation)
        except anyio.get_cancelled_exc_class():
            if anyio.current_effective_deadline() == -math.inf:
                raise  # the run (or its caller) is being cancelled
            # A cancellation the runner raised on its own: a failed call, not a failed run.
            return RunnerResult(error="agent was cancelled")
        except Exception as exc:
            log.exception("agent runner raised")
            return RunnerResult(error=f"agent runner crashed: {type(exc).__name__}: {exc}")
        if not isinstance(result, RunnerResult):
            return RunnerResult(
                error=f"agent runner returned {type(result).__name__}, not RunnerResult"
            )
        return result

    def _settle(
        self, agent: AgentDetails, call: ResolvedCall, outcome: RunnerResult | None
    ) -> AgentResult:
        if self.finished.is_set():  # settled after the run ended: the record stays as it was
            return AgentResult(ok=False, error="did not settle", label=agent.label)
        outcome = outcome or RunnerResult(error="agent produced no result")
        output = outcome.output or ""
        if len(output) > OUTPUT_CAP:
            output = output[:OUTPUT_CAP] + "\n… (output truncated at 64 KiB)"
        error = outcome.error
        structured = outcome.structured
        if structured is not None:
            try:
                artifacts.dumps(structured)
            except (TypeError, ValueError):
                structured = artifacts.json_safe(structured)  # e.g. a set: now a list
        if error is None and call.schema is not None:
            if structured is None:
                error = "agent finished without a structured result"
            else:
                problem = schema_violation(structured, call.schema)
                if problem is not None:
                    error = f"structured result does not match the schema {problem}"
        acceptance = evaluate(structured, call.contract) if call.contract else None
        if error is None and acceptance is not None and acceptance["status"] != "accepted":
            error = f"acceptance {acceptance['status']}: " + "; ".join(
                acceptance["problems"] or ["criteria rejected"]
            )
        ok = error is None
        if isinstance(outcome.usage, Usage):
            self.usage.add(outcome.usage)
            agent.usage = outcome.usage.as_dict()
        self.details.usage = self.usage_snapshot()
        agent.acceptance = acceptance
        agent.error = strip_terminal(error) if error else None
        agent.state = "done" if ok else "error"
        agent.ledger = "settled"
        agent.finished_at = time.time()
        ref = self._ref(agent) if ok else None
        agent.ref = ref
        result = AgentResult(
            ok=ok,
            output=output,
            structured=structured,
            acceptance=acceptance,
            ref=ref,
            error=agent.error,
            label=agent.label,
            commits=tuple(outcome.commits),
            branch=agent.worktree_branch if _has_commits(agent) else None,
        )
        if ref is not None:
            self.refs[ref] = (agent.label, result_text(result))
        transcript, size = _bounded_transcript(list(outcome.transcript))
        size += len(output)
        if self.transcript_bytes + size > TRANSCRIPTS_TOTAL:
            transcript = [{"dropped": "the run's transcript budget (16 MiB) is spent"}]
            size = len(output)
        self.transcript_bytes += size
        self.transcripts[str(agent.index)] = {
            "label": agent.label,
            **result.to_dict(),
            "commits": list(outcome.commits),
            "transcript": transcript,
        }
        self.notify()
        return result


def _has_commits(agent: AgentDetails) -> bool:
    """Whether a writing agent's branch was kept because it holds commits."""
    cleanup = agent.worktree_cleanup or {}
    return bool(agent.worktree_branch) and bool(cleanup.get("commits"))
