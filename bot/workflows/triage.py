"""Triage a newly opened issue: explore the repository, then judge whether the issue is actionable.

Phase "Explore": one explorer reads the issue and the repository (read-only, at the default
branch's commit) and reports the code the issue concerns and what the report lacks.
Phase "Conclude": an advisor fills a `TriageVerdict`: a summary with suggested labels (from the
repository's labels when they are known) and the likely area of code, or a BLOCKED report
naming the information only the reporter can give.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from bot.engine.workflow import Workflow, WorkflowMeta
from bot.github.context import context_prompt, plain
from bot.workflows.decision import decision_note
from bot.workflows.schemas import BlockedReport, CodeRef, ExplorerReport, TriageVerdict

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
- areas: the likely area of code, most likely first, with paths from the repository.
If the issue lacks information that only the reporter can give and that the repository
cannot settle, fill `blocked`: the missing information as one question, two to four
possible answers, the one you would assume, and the risk of assuming it."""

DEFAULT_GAP = BlockedReport(
    decision="What information is missing for a maintainer to act on this issue?",
    why="The issue as written does not say enough to start work.",
    options=["Steps to reproduce", "The expected behaviour", "The version or environment"],
    default="Steps to reproduce",
    risk="Work started on a guess may solve the wrong problem.",
)


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
    return f"- `{where}`" + (f": {ref.note}" if ref.note else "")


def triage_result(verdict: TriageVerdict, repo_labels: Sequence[str] | None) -> dict[str, Any]:
    """The workflow's return value (an Outcome shape) for a triage verdict."""
    labels = [label.strip() for label in verdict.labels if label.strip()]
    if repo_labels:
        known = {label.lower(): label for label in repo_labels}
        labels = [known[label.lower()] for label in labels if label.lower() in known]
    lines = [verdict.summary.strip()]
    lines += ["", f"**Kind:** {verdict.kind}"]
    if labels:
        lines += ["", "**Suggested labels:** " + ", ".join(f"`{label}`" for label in labels)]
    if verdict.areas:
        lines += ["", "**Likely area of code:**"] + [_area_line(ref) for ref in verdict.areas[:8]]
    result: dict[str, Any] = {
        "summary": "\n".join(lines),
        "assumptions": list(verdict.assumptions),
    }
    blocked = verdict.blocked
    if blocked is None and not verdict.actionable:
        blocked = DEFAULT_GAP
    if blocked is not None:
        result["blocked"] = blocked.model_dump()
    return result


async def workflow(wf: Workflow, args: dict[str, Any]) -> dict[str, Any]:
    target = str(args.get("target") or "the issue")
    fence = str(args["fence"])
    context = str(args["context"])
    repo_labels = args.get("repo_labels")
    labels = list(repo_labels) if isinstance(repo_labels, list) else None

    wf.phase("Explore")
    explore = await wf.agent(
        context_prompt(EXPLORE_TASK.format(target=target), fence, context),
        agent_type="explorer",
        label="explore",
        phase="Explore",
        schema=ExplorerReport,
    )
    if not explore.ok:
        wf.log(f"exploration failed: {explore.error}")

    wf.phase("Conclude")
    task = CONCLUDE_TASK.format(target=target, labels=_labels_instruction(labels))
    if not explore.ok:
        task += "\n\nThe exploration failed; work from the issue text alone."
    conclude = await wf.agent(
        context_prompt(task + decision_note(args), fence, context),
        agent_type="advisor",
        label="conclude",
        phase="Conclude",
        schema=TriageVerdict,
        inputs=[explore.ref] if explore.ok and explore.ref else None,
    )
    if not conclude.ok:
        return {"status": "failed", "summary": f"Triage could not conclude: {conclude.error}"}
    return triage_result(TriageVerdict.model_validate(conclude.structured), labels)
