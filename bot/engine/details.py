"""The live, JSON-serializable record of one run: phases, logs, agents, usage, result."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

RunStatus = Literal["running", "completed", "failed", "aborted"]
AgentState = Literal["pending", "running", "done", "error"]
# requested -> pending -> claimed | replayed | rejected -> running -> settled (or uncertain)
CallLedger = Literal[
    "requested", "pending", "claimed", "replayed", "rejected", "running", "settled", "uncertain"
]
MAX_LOGS = 100
LOG_LINE_CHARS = 300


@dataclass(frozen=True, slots=True)
class PhaseMeta:
    """A phase declared up front: a title and an optional detail line."""

    title: str
    detail: str = ""


@dataclass(slots=True)
class AgentDetails:
    """One agent call as shown in status, reports and progress comments."""

    index: int
    label: str
    phase: str | None
    agent_type: str
    state: AgentState = "pending"
    ledger: CallLedger = "requested"
    replayed: bool = False
    model: str | None = None
    effort: str | None = None
    acceptance: dict[str, Any] | None = None
    error: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    ref: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    worktree_branch: str | None = None
    worktree_path: str | None = None
    worktree_cleanup: dict[str, Any] | None = None
    worktree_handoff: str | None = None

    def to_json(self) -> dict[str, Any]:
        # A shallow copy: the nested values are plain JSON data (asdict's deep copy is slow).
        return {name: getattr(self, name) for name in _AGENT_FIELDS}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AgentDetails:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


_AGENT_FIELDS = tuple(AgentDetails.__dataclass_fields__)


@dataclass(slots=True)
class RunDetails:
    """Everything known about a run; `to_json()` is what workflow.json holds."""

    run_id: str
    name: str
    description: str = ""
    status: RunStatus = "running"
    phases: list[dict[str, str]] = field(default_factory=list)
    current_phase: str | None = None
    logs: list[str] = field(default_factory=list)
    logs_dropped: int = 0
    agents: list[AgentDetails] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    error: str | None = None
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    resumed_from: str | None = None
    resume_note: str | None = None
    repo: str | None = None
    base: str | None = None
    pid: int | None = None
    has_result: bool = False
    budget_reached: str | None = None
    """Why the run's budget refused a model call (`bot.engine.budget`); None: it never did."""

    @property
    def finished(self) -> bool:
        return self.status != "running"

    def counts(self) -> tuple[int, int]:
        """(agents ok, agents failed)."""
        done = sum(1 for a in self.agents if a.state == "done")
        failed = sum(1 for a in self.agents if a.state == "error")
        return done, failed

    def add_log(self, text: str) -> None:
        line = " ".join(text.split())
        if len(line) > LOG_LINE_CHARS:
            line = line[: LOG_LINE_CHARS - 1] + "…"
        self.logs.append(line)
        if len(self.logs) > MAX_LOGS:
            drop = len(self.logs) - MAX_LOGS
            del self.logs[:drop]
            self.logs_dropped += drop

    def to_json(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        data["agents"] = [a.to_json() for a in self.agents]
        data["phases"] = [dict(p) for p in self.phases]
        data["logs"] = list(self.logs)
        data["usage"] = dict(self.usage)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunDetails:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["agents"] = [AgentDetails.from_json(a) for a in data.get("agents", [])]
        return cls(**known)
