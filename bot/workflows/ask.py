"""Answer a question about the repository or a pull request, with file and line references.

Phase "Explore": one explorer, and for a pull request a reviewer of the change as well, read the
code (read-only, at the PR head or the default branch) for evidence. Phase "Answer": an advisor
writes the answer from their reports, citing `path:line`.
"""

from __future__ import annotations

from typing import Any

from bot.engine.workflow import Workflow, WorkflowMeta
from bot.runs.context import context_prompt
from bot.workflows.decide.note import decision_note
from bot.workflows.language import language_note
from bot.workflows.schemas import AskAnswer, ExplorerReport
from policies.untrusted_text import code_span

meta = WorkflowMeta(
    name="ask",
    description="Answer a question about the repository or a pull request.",
    phases=("Explore", "Answer"),
)

EXPLORE_TASK = """\
Someone with write access to this repository asked, on {target}:

    {question}

Find the evidence in the repository that answers it. Read the relevant code; cite every claim
as `path:line`; say what you could not confirm. Do not change anything."""

REVIEW_TASK = """\
Someone with write access to this repository asked, on {target}:

    {question}

Look at the pull request's change (its diff and the files it touches) for what bears on the
question. Cite `path:line`; separate what you confirmed from what you suspect."""

ANSWER_TASK = """\
Answer this question, asked on {target} by someone with write access to the repository:

    {question}

The explorers' reports are attached below the context. Write a direct answer in Markdown,
with `path:line` references for every claim about the code, and list your assumptions. If the
question cannot be answered without a decision only a person can make, fill `blocked`."""


def _references(answer: AskAnswer) -> list[str]:
    lines = []
    for ref in answer.references[:20]:
        where = f"{ref.path}:{ref.line}" if ref.line else ref.path
        lines.append(f"- {code_span(where)}" + (f": {ref.note}" if ref.note else ""))
    return lines


def ask_result(answer: AskAnswer) -> dict[str, Any]:
    """The workflow's return value (an Outcome shape) for an answer."""
    lines = [answer.answer.strip()]
    refs = _references(answer)
    if refs:
        lines += ["", "**References:**", *refs]
    result: dict[str, Any] = {"summary": "\n".join(lines), "assumptions": list(answer.assumptions)}
    if answer.blocked is not None:
        result["blocked"] = answer.blocked.model_dump()
    return result


def _quoted(question: str) -> str:
    return " ".join(question.split())[:2_000] or "(no question given)"


async def workflow(wf: Workflow, args: dict[str, Any]) -> dict[str, Any]:
    target = str(args.get("target") or "this repository")
    question = _quoted(str(args.get("question") or ""))
    fence = str(args["fence"])
    context = str(args["context"])

    wf.phase("Explore")
    thunks = [
        lambda: wf.agent(
            context_prompt(EXPLORE_TASK.format(target=target, question=question), fence, context),
            agent_type="explorer",
            label="explore",
            phase="Explore",
            schema=ExplorerReport,
        )
    ]
    if args.get("kind") == "pull_request":
        thunks.append(
            lambda: wf.agent(
                context_prompt(
                    REVIEW_TASK.format(target=target, question=question), fence, context
                ),
                agent_type="reviewer",
                label="review-change",
                phase="Explore",
                schema=ExplorerReport,
            )
        )
    reports = await wf.parallel(thunks)
    refs = [r.ref for r in reports if r is not None and r.ok and r.ref]
    for report in reports:
        if report is not None and not report.ok:
            wf.log(f"{report.label or 'explorer'} failed: {report.error}")

    wf.phase("Answer")
    task = ANSWER_TASK.format(target=target, question=question)
    if not refs:
        task += "\n\nNo explorer report is available; answer from the context and say so."
    answer = await wf.agent(
        # After the explorers, so that a `decide` follow-up replays them (see `decision`).
        context_prompt(task + language_note(args) + decision_note(args), fence, context),
        agent_type="advisor",
        label="answer",
        phase="Answer",
        schema=AskAnswer,
        inputs=refs or None,
    )
    if not answer.ok:
        return {"status": "failed", "summary": f"No answer could be written: {answer.error}"}
    return ask_result(AskAnswer.model_validate(answer.structured))
