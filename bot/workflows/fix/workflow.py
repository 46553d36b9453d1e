"""Make the change an issue or pull request asks for: plan, implement in a worktree, review.

Phase "Plan": an explorer (read-only, so a follow-up run replays it) reads the request and the
repository and lists the files it would change. A request or a plan that touches what a
maintainer must decide (`policies.fix`: workflow files, protected paths, deletions,
dependencies, credentials) stops here with BLOCKED, before anything is written, unless the
run carries the maintainer's decision. The app's own report records what it asks about
(`fix.asked`), so that an answer approves those risks and no others.
Phase "Implement": an implementer in its own worktree, from the commit the run reads, makes
the change and commits it.
Phase "Review": a reviewer reads the diff against the request with acceptance criteria (the
request is met, nothing unrelated changed, tests where the repository has them).

The workflow never pushes: it returns the commit, and the runner (`bot.workflows.fix.flow`) classifies
the real change again, runs the check command, and pushes the branch and opens the pull
request itself. `diff_of(commit)` gives the reviewer the change's diff; the runner binds it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bot.engine.workflow import Workflow, WorkflowMeta
from bot.runs.context import context_prompt
from bot.workflows.decide.note import decision_note
from bot.workflows.language import language_note
from policies.config import FixConfig
from policies.fix import (
    OPTION_NARROW,
    Change,
    FixChoice,
    asked_for,
    blocked_for,
    choice_of,
    classify_change,
    request_risk,
)
from policies.untrusted_text import code_span, untrusted

meta = WorkflowMeta(
    name="fix",
    description="Make the change an issue or pull request asks for, on a branch of its own.",
    phases=("Plan", "Implement", "Review"),
)

DiffOf = Callable[[str], Awaitable[str]]

PLAN_TASK = """\
Plan the change requested on {target} of this repository. Do not change anything yet.
{request}
Read the relevant code, then fill the structured result: what you will change and why, every
file you will modify, add or delete (repository-relative paths), and the tests you will add
or update (when the repository has tests). Keep the change as small as the request allows.
State every assumption you make. Fill `blocked` only for a decision that is high-risk or
irreversible (a data migration, a security trade-off); otherwise proceed on the smallest
reversible assumption and list it."""

IMPLEMENT_TASK = """\
Make the change requested on {target} of this repository, in your worktree, then commit it.
{request}
The plan attached below says which files to change. Make the smallest change that does what is
asked; add or update tests where the repository has tests; change nothing unrelated. Commit
with a short message whose first line says what the change does. If you find that nothing
needs to change, commit nothing and say why in one paragraph."""

REVIEW_TASK = """\
Check this change against the request made on {target} of this repository.
{request}
The change's diff is in the data block named "change" below. Rule on each acceptance
criterion with evidence from the diff or the repository, and summarize the change for the
pull request's description: what changed and why, in a few sentences."""

_NO_REQUEST = "The request is the issue or pull request itself (see the context)."


class _Result(BaseModel):
    model_config = ConfigDict(extra="ignore")


class PlannedFile(_Result):
    path: str = Field(min_length=1, max_length=500, description="Repository-relative path.")
    action: Literal["modify", "add", "delete"] = Field(description="What happens to the file.")
    why: str = Field(default="", description="Why this file changes, in one sentence.")


class FixPlan(_Result):
    """The planned change, before anything is written."""

    summary: str = Field(description="What you will change and why, in a few sentences.")
    files: list[PlannedFile] = Field(
        default_factory=list, max_length=200, description="Every file the change touches."
    )
    tests: str = Field(default="", description="The tests you will add or update, if any.")
    assumptions: list[str] = Field(
        default_factory=list, description="Every material assumption you made."
    )
    blocked: dict[str, Any] | None = Field(
        default=None,
        description="Only for a high-risk or irreversible decision: {decision, why, options "
        "(2-4), default, risk}.",
    )


class FixReview(_Result):
    """The reviewer's account of the change."""

    summary: str = Field(description="What changed and why, for the pull request description.")
    notes: str = Field(default="", description="Anything a maintainer should check.")


ACCEPTANCE = {
    "criteria": [
        {
            "id": "request-met",
            "description": "The change does what the request asks.",
            "requiredEvidence": "the lines of the diff that do it",
        },
        {
            "id": "nothing-unrelated",
            "description": "The change touches nothing the request does not need.",
        },
        {
            "id": "tests",
            "description": "Tests are added or updated where the repository has tests "
            "(accepted when it has none, saying so).",
        },
    ]
}

_ACTIONS = {"modify": "M", "add": "A", "delete": "D"}


def planned_changes(plan: FixPlan) -> list[Change]:
    """The plan as `policies.fix` changes (line counts unknown before the change exists)."""
    return [(_ACTIONS[f.action], f.path.strip(), None, 0, 0) for f in plan.files if f.path.strip()]


def _request_text(question: str) -> str:
    text = question.strip()
    if not text:
        return _NO_REQUEST
    return "The request, as written by someone with write access:\n\n    " + " ".join(text.split())


def _choice(decision: Mapping[str, Any] | None) -> FixChoice | None:
    """What a decision tells the follow-up to do. Words that are not one of the app's options
    are an "answer" for the implementer to act on; no choice approves a risk (the runner
    judges the change against the approved risks the blocked run's record names)."""
    if not decision:
        return None
    return choice_of(str(decision.get("text") or "")) or "answer"


def fenced_change(fence: str, diff: str) -> str:
    """The change's diff as a data block in the run's fence (agent-written: untrusted)."""
    body = diff.replace(fence, "[fence]")
    return f'<untrusted-data fence="{fence}" source="change">\n{body}\n</untrusted-data fence="{fence}">'


async def workflow(
    wf: Workflow, args: dict[str, Any], *, diff_of: DiffOf | None = None
) -> dict[str, Any]:
    target = str(args.get("target") or "the issue")
    fence = str(args["fence"])
    context = str(args["context"])
    question = str(args.get("question") or "")
    config = FixConfig.model_validate(args.get("fix_config") or {})
    decision = args.get("decision") if isinstance(args.get("decision"), Mapping) else None
    choice = _choice(decision)
    request = _request_text(question)
    language = language_note(args)
    out: dict[str, Any] = {"summary": "", "assumptions": [], "fix": {"choice": choice}}

    wf.phase("Plan")
    planned = await wf.agent(
        context_prompt(PLAN_TASK.format(target=target, request=request) + language, fence, context),
        agent_type="explorer",
        label="plan",
        phase="Plan",
        schema=FixPlan,
    )
    if not planned.ok:
        return {"status": "failed", "summary": f"The fix could not be planned: {planned.error}"}
    plan = FixPlan.model_validate(planned.structured)
    out["assumptions"] = list(plan.assumptions)
    out["fix"]["plan"] = plan.model_dump()
    risk = request_risk(question, config) or classify_change(planned_changes(plan), config)
    if choice is None:
        if risk is not None:
            wf.log("the request needs a maintainer's decision before anything is written")
            out["fix"]["asked"] = asked_for(risk).to_json()
            return {**out, "summary": plan.summary, "blocked": blocked_for(risk)}
        if plan.blocked:
            return {**out, "summary": plan.summary, "blocked": plan.blocked}
    if choice == "stop":
        who = str(decision.get("by") or "a maintainer") if decision else "a maintainer"
        return {
            **out,
            "status": "no_changes",
            "summary": f"Nothing was changed: @{who} decided not to go ahead.",
        }

    wf.phase("Implement")
    task = IMPLEMENT_TASK.format(target=target, request=request) + language
    task += decision_note(args)
    if choice == "narrow" and risk is not None:
        avoided = "; ".join(a for reason in risk.reasons for a in reason.actions)
        task += f"\n\n{OPTION_NARROW}: do not {avoided}."
    made = await wf.agent(
        context_prompt(task, fence, context),
        agent_type="implementer",
        label="implement",
        phase="Implement",
        isolation="worktree",
        inputs=[planned.ref] if planned.ref else None,
    )
    commit = made.commits[-1] if made.commits else None
    out["fix"].update({"commit": commit, "branch": made.branch, "agent_said": made.output[-2000:]})
    if not made.ok and commit is None:
        return {"status": "failed", "summary": f"The change could not be made: {made.error}"}
    if commit is None:
        said = " ".join(made.output.split())[:1500] or "it gave no reason"
        return {
            **out,
            "status": "no_changes",
            "summary": f"The agent committed nothing, so no branch was pushed. It said: {said}",
        }

    wf.phase("Review")
    diff = await diff_of(commit) if diff_of is not None else ""
    reviewed = await wf.agent(
        context_prompt(
            REVIEW_TASK.format(target=target, request=request) + language,
            fence,
            context + "\n\n" + fenced_change(fence, diff),
        ),
        agent_type="reviewer",
        label="review",
        phase="Review",
        schema=FixReview,
        acceptance=ACCEPTANCE,
    )
    verdict = reviewed.structured if isinstance(reviewed.structured, dict) else {}
    summary = str(verdict.get("summary") or "") or plan.summary
    out["fix"]["review"] = {
        "accepted": reviewed.ok,
        "error": reviewed.error,
        "notes": str(verdict.get("notes") or ""),
        "criteria": (reviewed.acceptance or {}).get("criteria", []),
    }
    out["summary"] = summary
    return out


def review_lines(review: Mapping[str, Any]) -> list[str]:
    """The reviewer's rulings, one line each, for the outcome (model-written: the id as a
    code span, the note defused)."""
    lines = []
    for item in review.get("criteria") or []:
        if isinstance(item, Mapping):
            status = "✅" if item.get("status") == "accepted" else "❌"
            note = untrusted(" ".join(str(item.get("note") or "").split())[:300])
            ruling = f"- {status} {code_span(str(item.get('id')))}"
            lines.append(ruling + (f": {note}" if note else ""))
    return lines


def dump(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
