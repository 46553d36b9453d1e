"""Run interaction modes and the one policy object that follows from a run's mode."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

ASK_CLARIFICATION_TOOL_NAME = "ask_clarification"

NO_HUMAN_TOOL_MESSAGE = (
    "No human is present in this run, so nobody can answer this question. "
    "Do not wait: continue on your best judgment, choose the lowest-risk reversible option, "
    "and state every assumption you make in your final result. If the work is high-risk or "
    "irreversible and not authorized, finish with a structured BLOCKED result instead."
)


class RunInteractionMode(StrEnum):
    """How a run may interact with people; only a trusted entry point selects it."""

    INTERACTIVE = "interactive"
    AUTONOMOUS = "autonomous"
    WEBHOOK = "webhook"
    SCHEDULED = "scheduled"


_INTERACTIVE_SYSTEM = """<clarification_system>
Order of work: clarify, then plan, then act.

Before doing anything, look for what is unclear, missing or open to more than one reading.
When you find something, call `ask_clarification` straight away and do not start the work.
Ask first in these cases:
1. Missing information (`missing_info`): a detail the work depends on was not given,
   for example "deploy the app" without naming the environment.
2. Ambiguous requirement (`ambiguous_requirement`): the request can reasonably mean
   different things, for example "make it faster" (latency? memory? start-up?).
3. Approach choice (`approach_choice`): several sound approaches exist and the choice
   belongs to the user, for example session cookies versus tokens for authentication.
4. Risk confirmation (`risk_confirmation`): the step deletes, overwrites or touches
   production data or configuration.
5. Suggestion (`suggestion`): you would recommend something and want approval first.

Rules:
- Clarify before acting, never halfway through the work.
- Do not trade accuracy for speed by guessing; when information is missing, ask.
- Call `ask_clarification` alone: other tool calls in the same turn are dropped.
- After the call the run pauses until the user replies; do not continue on assumptions.

Call shape:
ask_clarification(question="...?", clarification_type="missing_info",
                  context="why this is needed", options=["a", "b"])
</clarification_system>"""

_AUTONOMOUS_SYSTEM = """<clarification_system>
Order of work: assess, pick the lowest-risk path, act.

Nobody can answer a question while this run is going, so do not wait for
clarification or approval. Settle ambiguity from the request and from {sources}.

- Low-risk, reversible work: make the smallest reasonable assumption and carry on.
- List every assumption that matters in your final result.
- High-risk or irreversible work that has not been clearly authorized: do not guess.
  Stop and return a short structured `BLOCKED` result that names the decision a person
  must make (what is needed, why, the options, the default you would take, the risk).
- Look before you change anything: prefer reading and read-only checks first.
</clarification_system>"""

_WEBHOOK_SOURCES = "the issue, pull request, repository, event context, and existing configuration"
_AUTONOMOUS_SOURCES = "the available run context and existing configuration"

_INTERACTIVE_THINKING = (
    "- **Check first:** if anything is unclear, missing or ambiguous, ask for clarification "
    "before doing any work."
)
_AUTONOMOUS_THINKING = (
    "- **No human in this run:** settle ambiguity from the run context, take the lowest-risk "
    "reversible path, and record the assumptions that matter."
)
_INTERACTIVE_REMINDER = (
    "- **Clarify first:** resolve unclear, missing or ambiguous requirements with the user "
    "before starting; do not guess."
)
_AUTONOMOUS_REMINDER = (
    "- **Autonomous run:** do not wait for a reply; make small reversible assumptions and list "
    "them, or return a structured `BLOCKED` result when the ambiguity is high-risk."
)


@dataclass(frozen=True, slots=True)
class RunInteractionPolicy:
    """Everything about a run that depends on whether a human can answer mid-run."""

    mode: RunInteractionMode

    @property
    def allows_clarification(self) -> bool:
        return self.mode is RunInteractionMode.INTERACTIVE

    @property
    def disabled_tool_names(self) -> frozenset[str]:
        if self.allows_clarification:
            return frozenset()
        return frozenset({ASK_CLARIFICATION_TOOL_NAME})

    @property
    def thinking_guidance(self) -> str:
        return _INTERACTIVE_THINKING if self.allows_clarification else _AUTONOMOUS_THINKING

    @property
    def context_sources(self) -> str:
        """What a non-interactive run is told to settle ambiguity from."""
        if self.mode is RunInteractionMode.WEBHOOK:
            return _WEBHOOK_SOURCES
        return _AUTONOMOUS_SOURCES

    @property
    def clarification_system(self) -> str:
        if self.allows_clarification:
            return _INTERACTIVE_SYSTEM
        return _AUTONOMOUS_SYSTEM.format(sources=self.context_sources)

    @property
    def clarification_reminder(self) -> str:
        return _INTERACTIVE_REMINDER if self.allows_clarification else _AUTONOMOUS_REMINDER

    @classmethod
    def interactive(cls) -> RunInteractionPolicy:
        return cls(RunInteractionMode.INTERACTIVE)


def resolve_run_interaction_policy(config: Mapping[str, object] | None) -> RunInteractionPolicy:
    """Resolve a run's policy from the values its trusted entry point set.

    `configurable` is merged first and `context` over it. An explicit `interaction_mode`
    wins; an invalid one raises ValueError (never a silent fall back to interactive).
    Otherwise: `non_interactive` -> scheduled, `channel_name == "github"` -> webhook,
    `disable_clarification` -> autonomous, else interactive.
    """
    merged: dict[str, object] = {}
    if config:
        for key in ("configurable", "context"):
            section = config.get(key)
            if isinstance(section, Mapping):
                merged.update(section)

    raw_mode = merged.get("interaction_mode")
    if raw_mode is not None:
        try:
            return RunInteractionPolicy(RunInteractionMode(str(raw_mode)))
        except ValueError as exc:
            valid = ", ".join(mode.value for mode in RunInteractionMode)
            raise ValueError(
                f"Invalid interaction_mode {raw_mode!r}; expected one of: {valid}"
            ) from exc

    if merged.get("non_interactive"):
        return RunInteractionPolicy(RunInteractionMode.SCHEDULED)
    if merged.get("channel_name") == "github":
        return RunInteractionPolicy(RunInteractionMode.WEBHOOK)
    if merged.get("disable_clarification"):
        return RunInteractionPolicy(RunInteractionMode.AUTONOMOUS)
    return RunInteractionPolicy.interactive()
