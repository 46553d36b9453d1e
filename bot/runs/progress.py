"""A run's live view for its progress comment, and its usage for the Outcome's footer."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bot.engine.details import RunDetails
from bot.engine.sanitize import strip_terminal
from bot.publish.render import AgentLine, Progress
from policies.outcome import UsageSummary
from policies.untrusted_text import untrusted

_AGENT_STATES = {"pending": "pending", "running": "running", "done": "ok", "error": "failed"}


def clean_model_text(text: str) -> str:
    """What every model-written string goes through before it is shown on GitHub: no
    terminal controls, plain fences, no live mentions or closing keywords."""
    return untrusted(strip_terminal(text))


def progress_of(details: RunDetails, workflow: str, elapsed: float) -> Progress:
    """The publisher's view of the engine's live run details."""
    agents = tuple(
        AgentLine(
            label=clean_model_text(a.label),
            phase=a.phase,
            state="replayed" if a.replayed else _AGENT_STATES.get(a.state, a.state),
        )
        for a in details.agents
    )
    return Progress(
        run_id=details.run_id,
        workflow=workflow,
        phases=tuple(p.get("title", "") for p in details.phases),
        current_phase=details.current_phase,
        agents=agents,
        logs=tuple(clean_model_text(line) for line in details.logs[-10:]),
        tokens=int(details.usage.get("total") or 0),
        elapsed=elapsed,
    )


def usage_of(details: RunDetails | None, wall_seconds: float) -> UsageSummary:
    """Tokens, cost and agent counts from the engine's details, with the run's wall time."""
    if details is None:
        return UsageSummary(wall_seconds=wall_seconds)
    ok, failed = details.counts()
    cost = details.usage.get("cost")
    return UsageSummary(
        input_tokens=int(details.usage.get("input") or 0),
        output_tokens=int(details.usage.get("output") or 0),
        total_tokens=int(details.usage.get("total") or 0),
        cached_tokens=int(details.usage.get("cache_read") or 0),
        cost=float(cost) if isinstance(cost, int | float) else None,
        wall_seconds=wall_seconds,
        agents_ok=ok,
        agents_failed=failed,
        agents_replayed=sum(1 for agent in details.agents if agent.replayed),
    )


@dataclass
class Tracker:
    """Keeps the newest engine snapshot; the progress pump publishes it."""

    workflow: str
    started: float
    details: RunDetails | None = None
    version: int = 0
    published: int = 0
    clock: Callable[[], float] = field(default=time.monotonic)

    def update(self, details: RunDetails) -> None:
        self.details = details
        self.version += 1

    def progress(self) -> Progress | None:
        if self.details is None:
            return None
        return progress_of(self.details, self.workflow, self.clock() - self.started)
