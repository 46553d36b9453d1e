"""Triage an issue: explore the repository, then judge whether the issue is actionable.

Phase "Explore": one explorer reads the issue and the repository (read-only, at the default
branch's commit) and reports the code the issue concerns and what the report lacks.
Phase "Conclude": an advisor fills a `TriageVerdict`: a summary with suggested labels (from the
repository's labels when they are known) and the likely area of code; when the issue lacks what
only its reporter can tell, up to three questions for them (the outcome is then `needs_info`,
and the reporter's reply runs triage again); a BLOCKED report only for a decision that is
high-risk or irreversible.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from bot.engine.workflow import Workflow, WorkflowMeta
from bot.runs.context import context_prompt, plain
from bot.workflows.decide.note import decision_note
from bot.workflows.language import language_note
from bot.workflows.schemas import CodeRef, ExplorerReport, TriageVerdict
from policies.untrusted_text import code_span

meta = WorkflowMeta(
    name="triage",
    description="Judge whether a new issue is actionable, suggest labels and the code it concerns.",
    phases=("Explore", "Conclude"),
)

EXPLORE_TASK = """\
You are triaging {target} of this repository. Read the issue in the context below, then look
through the repository for the code it concerns. Report the files (with line numbers) most
likely involved, and say whether the issue gives what a maintainer needs to act on it: for a
bug, what happens, what was expected, how to reproduce it and the version or environment; for
a feature, the use case. Do not try to fix anything."""

CONCLUDE_TASK = """\
Triage {target} of this repository. The explorer's report is attached below the context.
Fill the structured result:
- actionable: true when a maintainer could start work from the issue as written;
- summary: what is asked and what the repository shows, in a few sentences;
- labels: {labels};
- areas: the likely area of code, most likely first, with paths from the repository;
- questions: when the issue lacks what only the reporter can tell and the repository cannot
  settle (steps to reproduce, expected and actual behaviour, version or environment, the use
  case), at most three concrete questions to the reporter; set actionable to false then.
Missing information is never a reason to stop: ask for it in `questions`. Fill `blocked` only
for a decision a maintainer must make that is high-risk or irreversible (a security report
that should not be discussed in public, a request to delete data or to break a public
interface): the decision as one question, two to four options, the one you would take, and
the risk of taking it."""

REPLY_NOTE = """

The reporter has replied since the last triage: their answers are in the comments (newest
last), after the app's earlier triage comment. Judge the issue with them."""

BUG_QUESTIONS = (
    "What are the exact steps to reproduce the problem, from a fresh start?",
    "What did you expect to happen, and what happened instead (the full error message or "
    "output, if any)?",
    "Which version are you using, and on what environment (operating system, runtime version)?",
)
"""Asked when a verdict is not actionable but names no questions (any kind but a feature)."""

FEATURE_QUESTIONS = (
    "What are you trying to do that you cannot do today?",
    "What should the new behaviour look like: an example of what you would run and what you "
    "would expect to see?",
    "Which version are you using, and what do you do instead for now?",
)
"""Asked when a feature request is not actionable but its verdict names no questions."""


def _labels_instruction(repo_labels: Sequence[str] | None) -> str:
    if repo_labels:
        # Names from GitHub, in the task's text: quoted, one line each.
        listed = ", ".join(
            json.dumps(plain(label), ensure_ascii=False) for label in repo_labels[:100]
        )
        return f"choose only from the repository's labels: {listed}"
    return "suggest short conventional labels (for example `bug`, `enhancement`, `docs`)"


def _area_line(ref: CodeRef) -> str:
    where = f"{ref.path}:{ref.line}" if ref.line else ref.path
    return f"- {code_span(where)}" + (f": {ref.note}" if ref.note else "")


def triage_result(verdict: TriageVerdict, repo_labels: Sequence[str] | None) -> dict[str, Any]:
    """The workflow's return value (an Outcome shape) for a triage verdict.

    A high-risk decision (`blocked`) stops the run; otherwise a verdict that is not actionable
    is `needs_info`, with the verdict's questions or, when it has none, the usual ones for its
    kind. Questions on an actionable verdict are listed as open, without asking for a reply.
    """
    labels = [label.strip() for label in verdict.labels if label.strip()]
    if repo_labels:
        known = {label.lower(): label for label in repo_labels}
        labels = [known[label.lower()] for label in labels if label.lower() in known]
    questions = [q.strip() for q in verdict.questions if q.strip()][:3]
    lines = [verdict.summary.strip()]
    lines += ["", f"**Kind:** {verdict.kind}"]
    if labels:
        lines += ["", "**Suggested labels:** " + ", ".join(code_span(label) for label in labels)]
    if verdict.areas:
        lines += ["", "**Likely area of code:**"] + [_area_line(ref) for ref in verdict.areas[:8]]
    if verdict.actionable and questions and verdict.blocked is None:
        lines += ["", "**Open questions:**"] + [f"- {q}" for q in questions]
    result: dict[str, Any] = {
        "summary": "\n".join(lines),
        "assumptions": list(verdict.assumptions),
        "labels": labels,
    }
    if verdict.blocked is not None:
        result["blocked"] = verdict.blocked.model_dump()
    elif not verdict.actionable:
        default = FEATURE_QUESTIONS if verdict.kind == "feature" else BUG_QUESTIONS
        result["status"] = "needs_info"
        result["questions"] = questions or list(default)
    return result


async def workflow(wf: Workflow, args: dict[str, Any]) -> dict[str, Any]:
    target = str(args.get("target") or "the issue")
    fence = str(args["fence"])
    context = str(args["context"])
    repo_labels = args.get("repo_labels")
    labels = list(repo_labels) if isinstance(repo_labels, list) else None
    reply = REPLY_NOTE if args.get("reporter_reply") else ""

    wf.phase("Explore")
    explore = await wf.agent(
        context_prompt(EXPLORE_TASK.format(target=target) + reply, fence, context),
        agent_type="explorer",
        label="explore",
        phase="Explore",
        schema=ExplorerReport,
    )
    if not explore.ok:
        wf.log(f"exploration failed: {explore.error}")

    wf.phase("Conclude")
    task = CONCLUDE_TASK.format(target=target, labels=_labels_instruction(labels)) + reply
    if not explore.ok:
        task += "\n\nThe exploration failed; work from the issue text alone."
    conclude = await wf.agent(
        context_prompt(task + language_note(args) + decision_note(args), fence, context),
        agent_type="advisor",
        label="conclude",
        phase="Conclude",
        schema=TriageVerdict,
        inputs=[explore.ref] if explore.ok and explore.ref else None,
    )
    if not conclude.ok:
        return {"status": "failed", "summary": f"Triage could not conclude: {conclude.error}"}
    return triage_result(TriageVerdict.model_validate(conclude.structured), labels)
