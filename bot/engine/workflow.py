"""The workflow DSL: `meta`, and the `wf` object a workflow coroutine drives its agents with."""

from __future__ import annotations

import importlib.util
import inspect
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from bot.engine.calls import AgentRequest, AgentResult
from bot.engine.details import PhaseMeta

if TYPE_CHECKING:
    from bot.engine.run import Run

WorkflowFn = Callable[["Workflow", Any], Awaitable[Any]]


class WorkflowLoadError(ValueError):
    """A workflow file cannot be used; the message says what it must define."""


@dataclass(frozen=True, slots=True)
class WorkflowMeta:
    """A workflow's name, description and phases (declared up front, for progress)."""

    name: str
    description: str = ""
    phases: tuple[str | PhaseMeta, ...] = ()

    def phase_list(self) -> list[PhaseMeta]:
        return [p if isinstance(p, PhaseMeta) else PhaseMeta(str(p)) for p in self.phases]

    @classmethod
    def coerce(cls, raw: object) -> WorkflowMeta:
        """Accept a WorkflowMeta or a dict `{name, description?, phases?: [str | {title, detail?}]}`."""
        if isinstance(raw, WorkflowMeta):
            return raw
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise WorkflowLoadError("meta must be a WorkflowMeta or a dict with a string `name`")
        phases: list[str | PhaseMeta] = []
        for item in raw.get("phases") or []:
            if isinstance(item, str):
                phases.append(item)
            elif isinstance(item, dict) and isinstance(item.get("title"), str):
                phases.append(PhaseMeta(item["title"], str(item.get("detail") or "")))
            else:
                raise WorkflowLoadError("each phase must be a title or {title, detail?}")
        return cls(raw["name"], str(raw.get("description") or ""), tuple(phases))


class Workflow:
    """The `wf` handed to `async def workflow(wf, args)`."""

    def __init__(self, run: Run, args: Any) -> None:
        self._run = run
        self.args = args

    def phase(self, title: str) -> None:
        """Mark the current phase (use titles declared in meta.phases)."""
        self._run.set_phase(str(title))

    def log(self, message: object) -> None:
        """One progress line (newlines flattened, ~300 chars); the newest 100 are kept."""
        self._run.add_log(str(message))

    def usage(self) -> dict[str, Any]:
        """`{input, output, cache_read, cache_write, total, cost, agents}` so far (a lower bound)."""
        return self._run.usage_snapshot()

    def budgeted(self) -> bool:
        """Whether this run has a budget (tokens, cost or the installation's day)."""
        return self._run.budget is not None

    def budget_reached(self) -> str | None:
        """Why the run's budget refused a model call (it then refuses every later one), or
        None: a workflow that sees it stops asking for agents and says what it left undone."""
        budget = self._run.budget
        return budget.reached if budget is not None else None

    async def agent(
        self,
        prompt: str,
        *,
        agent_type: str | None = None,
        label: str | None = None,
        phase: str | None = None,
        schema: object = None,
        acceptance: object = None,
        model: str | None = None,
        provider: str | None = None,
        effort: str | None = None,
        isolation: str | None = None,
        inputs: Sequence[str] | None = None,
    ) -> AgentResult:
        """Run one agent and wait for it. Never raises: failures come back as `ok=False`."""
        request = AgentRequest(
            prompt=prompt,
            agent_type=agent_type,
            label=label,
            phase=phase,
            schema=schema,
            acceptance=acceptance,
            model=model,
            provider=provider,
            effort=effort,
            isolation=isolation,
            inputs=inputs,
        )
        return await self._run.agent(request)

    async def parallel(
        self, thunks: Iterable[Callable[[], Any]], concurrency: int | None = None
    ) -> list[Any]:
        """Run zero-argument thunks concurrently; a barrier. Results in order; a thunk that
        raises settles to None. Concurrency = min(requested, configured), at least 1."""
        if concurrency is not None and (
            isinstance(concurrency, bool) or not isinstance(concurrency, int)
        ):
            raise TypeError(f"parallel(concurrency=) takes an int, not {concurrency!r}")
        items = list(thunks)
        results: list[Any] = [None] * len(items)
        cap = self._run.concurrency
        limiter = anyio.CapacityLimiter(
            max(1, min(cap if concurrency is None else concurrency, cap))
        )

        async def one(i: int, thunk: Callable[[], Any]) -> None:
            async with limiter:
                try:
                    value = thunk()
                    results[i] = await value if inspect.isawaitable(value) else value
                except Exception as exc:
                    self._run.add_log(f"parallel: item {i} failed - {_reason(exc)}")

        async with anyio.create_task_group() as tg:
            for i, thunk in enumerate(items):
                tg.start_soon(one, i, thunk)
        return results

    async def pipeline(self, items: Iterable[Any], *stages: Callable[..., Any]) -> list[Any]:
        """Each item runs through every stage on its own (no barrier between stages); a stage
        gets (previous, item, index). A raising stage drops that item to None and skips its
        later stages. Works on a snapshot of the items; with no stages they come back as is."""
        snapshot = list(items)
        if not stages:
            return snapshot
        results: list[Any] = [None] * len(snapshot)

        async def chain(i: int, item: Any) -> None:
            previous = item
            for stage in stages:
                try:
                    value = stage(previous, item, i)
                    previous = await value if inspect.isawaitable(value) else value
                except Exception as exc:
                    self._run.add_log(f"pipeline: item {i} dropped - {_reason(exc)}")
                    return
            results[i] = previous

        async with anyio.create_task_group() as tg:
            for i, item in enumerate(snapshot):
                tg.start_soon(chain, i, item)
        return results


def _reason(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def load_workflow_file(path: Path) -> tuple[WorkflowMeta, WorkflowFn]:
    """Import a workflow file defining `meta` and `async def workflow(wf, args)`."""
    path = Path(path)
    if not path.is_file():
        raise WorkflowLoadError(f"{path}: no such file")
    name = f"bot_workflow_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise WorkflowLoadError(f"{path}: cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise WorkflowLoadError(f"{path}: import failed: {_reason(exc)}") from exc
    meta = getattr(module, "meta", None)
    fn = getattr(module, "workflow", None)
    if meta is None:
        raise WorkflowLoadError(f"{path}: define `meta = WorkflowMeta(name=..., phases=(...))`")
    if fn is None or not inspect.iscoroutinefunction(fn):
        raise WorkflowLoadError(f"{path}: define `async def workflow(wf, args)`")
    return WorkflowMeta.coerce(meta), fn
