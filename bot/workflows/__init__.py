"""Built-in workflows, by name: `WORKFLOWS[name] -> (meta, fn)`; model-free commands are listed apart.

A workflow is `async def workflow(wf, args)` with a `meta`; `args` is built by the executor:
`{"target": "issue #7", "kind": "issue" | "pull_request", "fence": ..., "context": ...,
"question": ..., "repo_labels": [...] | None (triage: the repository's label names),
"reporter_reply": bool (triage again after the issue's author answered), "language": the
repository's `language` or None (add `language_note(args)` from `bot.workflows.language` to the
prompts of agents whose text is published)}`, and in a `decide` follow-up the same plus
`"decision"` (see `bot.workflows.decide.note`: add `decision_note(args)` only to the prompts of
agents after the point where the run blocked); its return value maps
onto an Outcome (see `policies.outcome`). A workflow may import runs, publish, git, github, the
engine, agents and the store; `flows.py` is the table of flows the wiring hands the executor.
"""

from __future__ import annotations

from bot.engine.workflow import WorkflowFn, WorkflowMeta
from bot.workflows import ask, triage

WORKFLOWS: dict[str, tuple[WorkflowMeta, WorkflowFn]] = {
    "triage": (triage.meta, triage.workflow),
    "ask": (ask.meta, ask.workflow),
}

# Answered by the executor without a model.
MODEL_FREE: frozenset[str] = frozenset(
    {"help", "status", "stop", "pause", "resume", "learn", "learnings", "forget"}
)


def get_workflow(name: str) -> tuple[WorkflowMeta, WorkflowFn] | None:
    return WORKFLOWS.get(name)
