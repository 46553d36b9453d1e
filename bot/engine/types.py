"""The contract between the workflow engine and whatever runs one agent (the AgentRunner)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from policies.interaction import RunInteractionPolicy

READ_ONLY_TOOLS: frozenset[str] = frozenset(
    {"read_file", "list_files", "grep", "git_diff", "git_log", "git_show"}
)
WRITING_TOOLS: frozenset[str] = frozenset({"write_file", "edit_file", "run_command", "commit"})
ALL_TOOLS: frozenset[str] = READ_ONLY_TOOLS | WRITING_TOOLS

Effort = Literal["off", "minimal", "low", "medium", "high", "xhigh", "max"]
EFFORTS: tuple[str, ...] = ("off", "minimal", "low", "medium", "high", "xhigh", "max")


@dataclass(frozen=True, slots=True)
class AgentType:
    """A named preset: instructions, the tools it may use, and its model and effort."""

    name: str
    instructions: str
    tools: tuple[str, ...]
    model: str | None = None
    provider: str | None = None
    effort: str | None = None
    description: str = ""

    @property
    def read_only(self) -> bool:
        return all(tool in READ_ONLY_TOOLS for tool in self.tools)

    @property
    def requires_worktree(self) -> bool:
        return any(tool in WRITING_TOOLS for tool in self.tools)


@dataclass(frozen=True, slots=True)
class Workspace:
    """Where an agent's tools look.

    Read-only agents read `commit` from the object database of `git_dir` (no checkout).
    A writing agent works in `worktree`, a sparse worktree on `branch`, based on `commit`.
    `local_root` is set only for `bot workflow run` on a local repository whose working tree
    read-only agents may read (read-only).
    """

    git_dir: Path | None = None
    commit: str | None = None
    worktree: Path | None = None
    branch: str | None = None
    local_root: Path | None = None

    @property
    def writable(self) -> bool:
        return self.worktree is not None


@dataclass(frozen=True, slots=True)
class AgentInvocation:
    """Everything the runner needs for one agent call; the engine has resolved it all."""

    run_id: str
    index: int
    label: str
    phase: str | None
    prompt: str
    agent_type: AgentType
    interaction: RunInteractionPolicy
    workspace: Workspace
    schema: dict[str, Any] | None = None
    model: str | None = None
    provider: str | None = None
    effort: str | None = None
    artifacts_dir: Path | None = None
    budget: BudgetGate | None = None
    """The run's budget, asked before every model request (`bot.engine.budget`)."""


@dataclass(slots=True)
class Usage:
    """Token and cost counts; `cost` is None when the price is unknown."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float | None = None

    @property
    def total(self) -> int:
        return self.input + self.output + self.cache_read + self.cache_write

    def add(self, other: Usage) -> None:
        self.input += other.input
        self.output += other.output
        self.cache_read += other.cache_read
        self.cache_write += other.cache_write
        if other.cost is not None:
            self.cost = (self.cost or 0.0) + other.cost

    def as_dict(self) -> dict[str, Any]:
        return {
            "input": self.input,
            "output": self.output,
            "cache_read": self.cache_read,
            "cache_write": self.cache_write,
            "total": self.total,
            "cost": self.cost,
        }


@dataclass(slots=True)
class RunnerResult:
    """What one agent produced. `error` set means the agent failed; output is kept anyway."""

    output: str = ""
    structured: Any = None
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    transcript: list[dict[str, Any]] = field(default_factory=list)
    commits: list[str] = field(default_factory=list)


class AgentRunner(Protocol):
    """Runs one agent to completion. Must honour anyio cancellation at every await and
    must not raise for model or tool failures: those come back as `RunnerResult.error`."""

    async def run(self, call: AgentInvocation) -> RunnerResult: ...


class BudgetGate(Protocol):
    """The run's budget as the runner sees it: `admit` before each model request, with the
    tokens (and cost) it is about to send, and `settle` after it with what it used. `admit`
    returns why the request may not be made (start with "budget reached"), else None and
    holds the estimate until `settle`."""

    async def admit(self, tokens: int, cost: float | None) -> str | None: ...

    async def settle(self, tokens: int, cost: float | None, usage: Usage) -> None: ...
