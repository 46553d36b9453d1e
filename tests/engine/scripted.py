"""A scripted AgentRunner for engine tests: per-call latency, output, errors, side effects."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from bot.engine.types import AgentInvocation, RunnerResult, Usage
from policies.interaction import RunInteractionMode, RunInteractionPolicy

POLICY = RunInteractionPolicy(RunInteractionMode.AUTONOMOUS)
GIT_ID = ["-c", "user.name=Test", "-c", "user.email=test@example.invalid"]


@dataclass
class Script:
    """What one call does."""

    latency: float = 0.0
    hold: anyio.Event | None = None  # wait for this (after the latency), shielded if asked
    output: str | Callable[[AgentInvocation], str] = "done"
    structured: Any = None
    error: str | None = None
    raises: BaseException | None = None
    usage: Usage = field(default_factory=lambda: Usage(input=10, output=5))
    action: Callable[[AgentInvocation], None] | None = None
    shielded: bool = False
    transcript: list[dict[str, Any]] = field(default_factory=list)


class ScriptedRunner:
    """Picks a Script per call (by `rule`, then label, then default) and records what ran."""

    def __init__(
        self,
        default: Script | None = None,
        by_label: dict[str, Script] | None = None,
        rule: Callable[[AgentInvocation], Script | None] | None = None,
    ) -> None:
        self.default = default or Script()
        self.by_label = by_label or {}
        self.rule = rule
        self.calls: list[AgentInvocation] = []
        self.events: list[tuple[str, str]] = []
        self.cancelled: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.started = anyio.Event()
        self._moved = anyio.Event()

    async def wait_for_in_flight(self, n: int) -> None:
        """Return once at least `n` calls are running at the same time."""
        while self.in_flight < n:
            await self._moved.wait()
            self._moved = anyio.Event()

    async def wait_for_call(self, label: str) -> None:
        """Return once a call with this label has started."""
        while not any(c.label == label for c in self.calls):
            await self._moved.wait()
            self._moved = anyio.Event()

    def pick(self, call: AgentInvocation) -> Script:
        if self.rule is not None:
            found = self.rule(call)
            if found is not None:
                return found
        return self.by_label.get(call.label, self.default)

    async def run(self, call: AgentInvocation) -> RunnerResult:
        self.calls.append(call)
        self.events.append(("start", call.label))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.started.set()
        self._moved.set()
        script = self.pick(call)
        try:
            with anyio.CancelScope(shield=script.shielded):
                if script.latency:
                    await anyio.sleep(script.latency)
                if script.hold is not None:
                    await script.hold.wait()
            if script.action is not None:
                script.action(call)
            if script.raises is not None:
                raise script.raises
            output = script.output(call) if callable(script.output) else script.output
            return RunnerResult(
                output=output,
                structured=script.structured,
                error=script.error,
                transcript=list(script.transcript),
                usage=Usage(
                    input=script.usage.input,
                    output=script.usage.output,
                    cost=script.usage.cost,
                ),
            )
        except anyio.get_cancelled_exc_class():
            self.cancelled.append(call.label)
            raise
        finally:
            self.in_flight -= 1
            self.events.append(("end", call.label))


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *GIT_ID, "-C", str(cwd), *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def make_repo(root: Path, *, files: int = 5, bare: bool = False) -> Path:
    """A small repository with a few committed files; a bare clone of it when `bare`."""
    work = root / "work"
    work.mkdir(parents=True)
    git(work, "init", "-q", "-b", "main")
    for i in range(files):
        sub = work / f"pkg{i % 2}"
        sub.mkdir(exist_ok=True)
        (sub / f"mod{i}.py").write_text(f"VALUE = {i}\n")
    (work / "README.md").write_text("# demo\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "initial")
    if not bare:
        return work
    mirror = root / "mirror.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(mirror)], check=True)
    return mirror
