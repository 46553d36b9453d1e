"""Review a pull request: unit by unit, each finding verified, fixes proven, then a summary.

The review runner (`bot.workflows.review.runner`) prepares `args["review"]`: the units to review (each a
few files with their patches, fenced as data), the findings already raised on this pull
request (so none is raised twice), the open findings whose code changed (to re-check), and
how many fixes to try. This workflow only talks to agents; deciding what is posted, where,
and what the pull request's review memory becomes is the runner's job.

Phase "Review": a pipeline over the units, without a barrier: a reviewer reports candidate
findings with evidence, then a verifier rules on each against the code and the known findings,
with an acceptance contract (evidence confirmed, about this change, not a repeat). A unit whose
verifier does not accept keeps none of its candidates: nothing unverified is posted. A
reviewer reports at most `max_findings` candidates (its schema says so, and the workflow cuts
any excess), and the run keeps at most as many in all, the most severe first.
Phase "Re-check": whether each earlier open finding whose lines changed is still present.
The reviewer of the unit that holds a finding's file rules on it in the same call (its code
after the unit's changes); one re-check call rules on the rest: the findings on files no unit
reviews, and any a unit's reviewer left unanswered (its review failed, was reused, or skipped
the finding).
Phase "Prove": the verified findings a test can show, at least `review.prove_severity`
severe, get a failing test written, run and ruled on (`bot.workflows.review.proofs`; the
runner binds `run_test`, which runs the test in the sandbox).
Phase "Suggest": for the verified findings that carry a small replacement (most severe first,
at most `suggest`), an implementer in its own worktree applies the fix and commits it; the
runner then proves the commit (it applies, stays in the commented lines, passes the check).
Phase "Summarize": an advisor writes the summary, or a BLOCKED report when the change needs a
maintainer's high-risk or irreversible decision. A `decide` follow-up (`args["decision"]`,
`bot.workflows.review.resume`) runs with the blocked run's arguments, so every call before
this one replays, and the advisor gets the maintainer's answer, fenced as theirs.

Under a budget (`.github/bot.yml` `budget`, the operator's caps) the units go one after the
other, reviewed and verified, so that what a budget leaves out is the last units whole. Once
the budget refuses a call, no agent is asked for again: the units not finished are named
(`review.budget`: why, how many units, how many were reviewed, the paths not reviewed) and
the later phases are left out.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from bot.engine.workflow import Workflow, WorkflowMeta
from bot.runs.context import context_prompt, plain
from bot.workflows.decide.note import decision_context
from bot.workflows.language import language_note
from bot.workflows.review.proofs import ProofTestRunner, prove_findings
from bot.workflows.schemas import (
    RecheckReport,
    RecheckVerdict,
    ReviewFinding,
    ReviewSummary,
    UnitReview,
    VerifierReport,
    unit_review_schema,
)
from policies.budget import BUDGET_REACHED
from policies.learnings import Learning, covering

meta = WorkflowMeta(
    name="review",
    description="Review a pull request's changes, verify every finding, prove suggested fixes.",
    phases=("Review", "Re-check", "Prove", "Suggest", "Summarize"),
)

SEVERITY_ORDER = {"critical": 0, "high": 1, "medium": 2, "low": 3, "info": 4}

REVIEW_TASK = """\
Review part of {pr}: the files named after the context below. The data block "changes" there
holds their diff against the merge base; line numbers on the new side are the head commit's,
which your tools read.

Report only real problems the change introduces or exposes (wrong behaviour, security holes,
data loss, races, mishandled errors, broken interfaces, untested behaviour changes), not
matters of taste. Read the surrounding code before reporting, and cite it as `path:line`.
Per problem: path, new-side line range, severity, category, a one-line title, the
explanation, and, when a small fix within those lines exists, `replacement`: the exact new
text of all those lines.
No problem found is a fine answer: return an empty list."""

FOCUS = """

This is a follow-up review: the block above shows only what changed since the last review;
the rest of each file was reviewed before and is context."""

VERIFY_TASK = """\
You are verifying candidate findings that a reviewer reported on {pr}, for the files named
after the context below, where the candidates and the findings already raised are listed.
Rule on every candidate by its index. Keep a candidate only when all of these hold:
- its evidence holds when you read the code at the head commit yourself;
- it is about code or behaviour that this pull request changes;
- it does not repeat a finding already raised on this pull request (listed below with their
  status: open, fixed or dismissed; a dismissed one was declined by a person and must not be
  raised again, even in other words).
When in doubt, drop it: a wrong comment costs the authors more than a missed one."""

VERIFY_UNIT = """\
Files of this part: {paths}

Candidates (JSON):
{candidates}

Findings already raised on this pull request (JSON):
{known}"""

RULE_TASK = """

This part's changes are small, so no verifier will see your findings: rule on each yourself
before you report it. Report a finding only when its evidence holds when you read the code at
the head commit, it is about code or behaviour this pull request changes, and it does not
repeat a finding already raised on this pull request (listed after the changes with their
status; a dismissed one was declined by a person and must not be raised again, even in other
words). When in doubt, leave it out."""

LEARNINGS_TASK = """

This repository's maintainers taught the review the learnings in the block whose source is
`learnings` (numbered). Drop a candidate that a learning answers, and give that learning's
number in the verdict's `learning`."""

VERIFY_CONTRACT = {
    "criteria": [
        {
            "id": "evidence",
            "description": "Every kept finding's evidence was confirmed by reading the code.",
            "requiredEvidence": "path:line of what you read for each kept finding",
        },
        {
            "id": "in-change",
            "description": "Every kept finding concerns code or behaviour this PR changes.",
        },
        {
            "id": "not-repeated",
            "description": "No kept finding repeats one already raised on this pull request.",
        },
    ]
}

RECHECK_TASK = """\
Earlier reviews of {pr} raised the findings below, and the code they point at has changed
since. For each, read the code at the head commit and say whether the problem is still there.
Say it is gone only when the code now clearly avoids it.

Findings (JSON):
{findings}"""

UNIT_RECHECK = """

Earlier reviews of this pull request raised the findings below on these files, and the code
they point at has changed since. Besides your review, say in `rechecks` of each, by its
fingerprint, whether the problem is still there: read the code at the head commit, and say it
is gone only when the code now clearly avoids it.

Findings to re-check (JSON):
{findings}

{blocks}"""

SUGGEST_TASK = """\
Apply the smallest fix for this review finding on {pr}, in your own worktree, then commit it
with a short message. Change only lines {start}..{end} of `{path}`; change nothing else, add
no files, and run nothing that changes other files. If the fix cannot be made within those
lines, make no commit and say why.

Finding (JSON):
{finding}"""

SUMMARY_TASK = """\
Write the summary of this review of {pr}: what the pull request does, in a sentence or two,
then the main points of the review (the verified findings below; say so when there are none).
Fill `blocked` only when the change needs a decision from a maintainer that is high-risk or
irreversible, such as an irreversible data migration or a security trade-off; everything else
is a finding, not a decision.

Verified findings (JSON):
{findings}"""

LINKED_TASK = """

The pull request's description says it closes the issues below (their text is in the data
blocks whose source starts with `linked issue`). In `linked_issues`, say of each whether
the change does what it asks, with one short reason.

Linked issues (JSON):
{linked}"""


DEFAULT_MAX_FINDINGS = 50


def most_severe(findings: list[ReviewFinding], cap: int) -> list[ReviewFinding]:
    """At most `cap` findings, the most severe first (ties keep the reviewer's order)."""
    ranked = sorted(enumerate(findings), key=lambda p: (SEVERITY_ORDER.get(p[1].severity, 9), p[0]))
    return [f for _, f in ranked[:cap]]


async def one_by_one(
    wf: Workflow,
    units: list[dict[str, Any]],
    reviewer: Any,
    verifier: Any,
) -> list[list[ReviewFinding] | None]:
    """The units in order, each reviewed and verified before the next starts, until the
    budget refuses a call: None for each unit not finished (as `wf.pipeline` gives)."""
    results: list[list[ReviewFinding] | None] = [None] * len(units)
    for i, unit in enumerate(units):
        if wf.budget_reached() is not None:
            break
        try:
            results[i] = await verifier(await reviewer(None, unit, i), unit, i)
        except UnitFailed:
            continue
    return results


class UnitFailed(RuntimeError):
    """A unit's reviewer or verifier failed: the unit is dropped (and named as unverified),
    and nothing of it is remembered for reuse."""


def _paths(unit: dict[str, Any]) -> str:
    # The PR author's file names, in the task's text: quoted, one line each.
    return ", ".join(json.dumps(plain(p), ensure_ascii=False) for p in unit["paths"])


def _finding_json(f: ReviewFinding) -> dict[str, Any]:
    return f.model_dump(exclude_none=True)


def _listed(items: list[dict[str, Any]]) -> str:
    """Earlier findings to re-check, as JSON without their code."""
    return json.dumps(
        [{k: v for k, v in i.items() if k != "block"} for i in items], ensure_ascii=False
    )


def _blocks(items: list[dict[str, Any]]) -> str:
    """The code of earlier findings to re-check, one fenced block each."""
    return "\n\n".join(str(item.get("block", "")) for item in items)


async def workflow(
    wf: Workflow, args: dict[str, Any], *, run_test: ProofTestRunner | None = None
) -> dict[str, Any]:
    review = args["review"]
    fence = str(args["fence"])
    context = str(args["context"])
    pr = str(args.get("target") or "the pull request")
    units: list[dict[str, Any]] = list(review.get("units") or [])
    known = review.get("known") or []
    unverified: list[str] = []
    candidates_total = 0
    cap = int(review.get("max_findings") or DEFAULT_MAX_FINDINGS)
    learnings = [
        Learning(
            repo="",
            number=int(x["number"]),
            text=str(x.get("text") or ""),
            author=str(x.get("author") or ""),
            source="",
            category=str(x.get("category") or ""),
            title=str(x.get("title") or ""),
            paths=tuple(str(p) for p in x.get("paths") or ()),
        )
        for x in review.get("learnings") or []
        if isinstance(x, dict) and isinstance(x.get("number"), int)
    ]
    learnings_block = str(review.get("learnings_block") or "")
    learned: list[dict[str, Any]] = []

    def with_unit(task: str, unit: dict[str, Any]) -> str:
        # The pull request's context first and the unit after the mark: what every unit's
        # reviewer shares is the prompt's stable part (`bot.agents.models.CACHE_MARK`).
        here = f"Files of this part: {_paths(unit)}\n\n{unit['block']}"
        # What sets this unit apart from the run's others follows its changes, after the
        # part of the prompt that every unit's reviewer shares.
        here += (FOCUS if unit.get("focus") else "") + (RULE_TASK if alone(unit) else "")
        if alone(unit):
            related = [k for k in known if isinstance(k, dict) and k.get("path") in unit["paths"]]
            raised = json.dumps(related, ensure_ascii=False)[:24_000]
            here += f"\n\nFindings already raised on this pull request (JSON):\n{raised}"
        owed = rechecks_of.get(str(unit["id"]))
        if owed:
            here += UNIT_RECHECK.format(findings=_listed(owed), blocks=_blocks(owed))
        return context_prompt(task, fence, context, tail=here)

    def alone(unit: dict[str, Any]) -> bool:
        """Whether the unit's reviewer also rules (`policies.review_plan.one_call`): a small
        follow-up delta without lint candidates, which a verifier must judge."""
        return bool(unit.get("one_call")) and not unit.get("lint") and not learnings_block

    def changes_of(unit: dict[str, Any], paths: set[str]) -> str:
        """Only the files the candidates are about, without the conversation: the verifier
        judges code, not intentions."""
        blocks = unit.get("file_blocks") or {}
        chosen = [str(blocks[p]) for p in unit["paths"] if p in paths and p in blocks]
        return "\n\n".join(chosen) if chosen else str(unit["block"])

    to_recheck: list[dict[str, Any]] = [
        item for item in review.get("recheck") or [] if isinstance(item, dict)
    ]
    # Each earlier finding to re-check goes with the first unit that reviews its file.
    rechecks_of: dict[str, list[dict[str, Any]]] = {}
    for item in to_recheck:
        home = next((u for u in units if item.get("path") in u["paths"]), None)
        if home is not None:
            rechecks_of.setdefault(str(home["id"]), []).append(item)
    rechecked: dict[str, dict[str, Any]] = {}
    cached: dict[str, Any] = review.get("cached") or {}
    done: dict[str, Any] = review.get("done") if isinstance(review.get("done"), dict) else {}

    async def reviewer(_prev: Any, unit: dict[str, Any], _i: int) -> list[ReviewFinding]:
        nonlocal candidates_total
        reused = cached.get(str(unit.get("key")))
        if isinstance(reused, list):
            wf.log(f"reused the finished review of {', '.join(unit['paths'])}")
            return most_severe([ReviewFinding.model_validate(f) for f in reused], cap)
        task = REVIEW_TASK.format(pr=pr) + language_note(args)
        owed = rechecks_of.get(str(unit["id"])) or []
        result = await wf.agent(
            with_unit(task, unit),
            agent_type="reviewer",
            label=f"review {unit['id']}",
            phase="Review",
            # One schema for every reviewer of the run: their tools are a prefix they share.
            schema=unit_review_schema(cap, rechecks=bool(rechecks_of)),
        )
        if not result.ok:
            wf.log(f"review of {', '.join(unit['paths'])} failed: {result.error}")
            unverified.extend(unit["paths"])
            raise UnitFailed(str(result.error))
        found = UnitReview.model_validate(result.structured).findings
        if owed and isinstance(result.structured, dict):
            asked = {str(item.get("fingerprint")) for item in owed}
            for raw in result.structured.get("rechecks") or []:
                try:
                    verdict = RecheckVerdict.model_validate(raw)
                except ValidationError:
                    continue  # unanswered: the re-check call rules on it
                if verdict.fingerprint in asked:
                    rechecked.setdefault(verdict.fingerprint, verdict.model_dump())
        # The schema's cap again, in code: a replayed or lenient result obeys it too.
        # The repository's lint command's hits on this unit's changed lines are candidates
        # like the reviewer's own (`bot.workflows.review.evidence`): the verifier rules on them.
        linted = [ReviewFinding.model_validate(f) for f in unit.get("lint") or []]
        in_unit = most_severe([f for f in [*found, *linted] if f.path in unit["paths"]], cap)
        candidates_total += len(in_unit)
        return in_unit

    async def verifier(
        found: list[ReviewFinding], unit: dict[str, Any], _i: int
    ) -> list[ReviewFinding]:
        # A finding a learning's dismissal already answered is dropped before any model call.
        found = [f for f in found if not answered(f)]
        if str(unit.get("key")) in cached:
            kept = found  # verified by the run that reviewed these same changes
        elif not found:
            kept = []
        elif alone(unit):
            kept = found  # its reviewer ruled on them (RULE_TASK): no second call
        else:
            kept = await verify(found, unit)
        done[str(unit.get("key"))] = [_finding_json(f) for f in kept]
        return kept

    def answered(f: ReviewFinding, number: int | None = None) -> bool:
        """Whether a learning covers `f` (`number`: the one the verifier named); if so, it
        is named in the summary."""
        by = next((x for x in learnings if x.number == number), None) if number else None
        by = by or covering(learnings, path=f.path, category=f.category, title=f.title)
        if by is None:
            return False
        learned.append({"path": f.path, "title": f.title, "learning": by.number})
        return True

    async def verify(found: list[ReviewFinding], unit: dict[str, Any]) -> list[ReviewFinding]:
        listed = [{"index": i, **_finding_json(f)} for i, f in enumerate(found)]
        related = [k for k in known if isinstance(k, dict) and k.get("path") in unit["paths"]]
        task = VERIFY_TASK.format(pr=pr)
        here = VERIFY_UNIT.format(
            paths=_paths(unit),
            candidates=json.dumps(listed, ensure_ascii=False),
            known=json.dumps(related, ensure_ascii=False)[:24_000],
        )
        here += "\n\n" + changes_of(unit, {f.path for f in found})
        if learnings_block:
            task += LEARNINGS_TASK
        result = await wf.agent(
            context_prompt(task, fence, learnings_block, tail=here),
            agent_type="reviewer",
            label=f"verify {unit['id']}",
            phase="Review",
            schema=VerifierReport,
            acceptance=VERIFY_CONTRACT,
        )
        if not result.ok:
            wf.log(f"verification of {', '.join(unit['paths'])} failed: {result.error}")
            unverified.extend(unit["paths"])
            raise UnitFailed(str(result.error))
        report = VerifierReport.model_validate(result.structured)
        keep = {v.index for v in report.verdicts if v.keep}
        for v in report.verdicts:
            if not v.keep and v.learning is not None and 0 <= v.index < len(found):
                answered(found[v.index], v.learning)
        return [f for i, f in enumerate(found) if i in keep]

    wf.phase("Review")
    if wf.budgeted():
        per_unit = await one_by_one(wf, units, reviewer, verifier)
    else:
        per_unit = await wf.pipeline(units, reviewer, verifier)
    verified = most_severe([f for found in per_unit if found for f in found], cap)
    # What no unit's reviewer ruled on gets a re-check call of its own.
    unanswered = [item for item in to_recheck if str(item.get("fingerprint")) not in rechecked]
    rechecks: list[dict[str, Any]] = [
        rechecked[fp]
        for fp in (str(item.get("fingerprint")) for item in to_recheck)
        if fp in rechecked
    ]
    left_unchecked = bool(unanswered)
    if unanswered and wf.budget_reached() is None:
        wf.phase("Re-check")
        checked = await wf.agent(
            context_prompt(
                RECHECK_TASK.format(pr=pr, findings=_listed(unanswered)),
                fence,
                context + "\n\n" + _blocks(unanswered),
            ),
            agent_type="reviewer",
            label="re-check",
            phase="Re-check",
            schema=RecheckReport,
        )
        if checked.ok:
            report = RecheckReport.model_validate(checked.structured)
            rechecks += [v.model_dump() for v in report.verdicts]
            left_unchecked = False
        else:
            wf.log(f"re-check failed: {checked.error}")

    proofs: dict[int, dict[str, Any]] = {}
    proving = review.get("prove")
    if isinstance(proving, dict) and verified:
        proofs = await prove_findings(
            wf,
            verified,
            proving,
            run_test=run_test,
            pr=pr,
            fence=fence,
            context=context,
            known=[k for k in known if isinstance(k, dict)],
        )

    suggestions: dict[int, dict[str, Any]] = {}
    tries = int(review.get("suggest") or 0)
    fixable = sorted(
        (i for i, f in enumerate(verified) if f.replacement is not None),
        key=lambda i: (SEVERITY_ORDER.get(verified[i].severity, 9), i),
    )[:tries]
    if fixable and wf.budget_reached() is None:
        wf.phase("Suggest")

        def suggest(i: int) -> Any:
            f = verified[i]

            async def run() -> None:
                task = SUGGEST_TASK.format(
                    pr=pr,
                    path=f.path,
                    start=f.start_line,
                    end=f.end_line,
                    finding=json.dumps(_finding_json(f), ensure_ascii=False),
                )
                result = await wf.agent(
                    context_prompt(task, fence, context),
                    agent_type="implementer",
                    label=f"suggest {i}",
                    phase="Suggest",
                    isolation="worktree",
                )
                suggestions[i] = {
                    "ok": result.ok,
                    "commit": result.commits[-1] if result.commits else None,
                    "branch": result.branch,
                    "error": result.error,
                }

            return run

        await wf.parallel([suggest(i) for i in fixable])

    out: dict[str, Any] = {
        "summary": "",
        "assumptions": [],
        "review": {
            "findings": [
                {**_finding_json(f), "suggestion": suggestions.get(i), "proof": proofs.get(i)}
                for i, f in enumerate(verified)
            ],
            "candidates": candidates_total,
            "unverified": sorted(set(unverified)),
            "rechecks": rechecks,
            "learned": learned,
        },
    }
    stopped = wf.budget_reached()
    if stopped is not None:
        # What the budget left out: the units not finished, and every later step.
        left = [
            p for u, found in zip(units, per_unit, strict=True) if found is None for p in u["paths"]
        ]
        undone = ["the summary"]
        if (fixable and len(suggestions) < len(fixable)) or any(
            s.get("error") and BUDGET_REACHED in str(s["error"]) for s in suggestions.values()
        ):
            undone.insert(0, "suggested fixes")
        if left_unchecked:
            undone.insert(0, "the re-check of earlier findings")
        out["review"]["unverified"] = [p for p in out["review"]["unverified"] if p not in left]
        out["review"]["budget"] = {
            "reason": stopped,
            "units": len(units),
            "reviewed": sum(1 for found in per_unit if found is not None),
            "not_reviewed": left,
            "not_done": undone,
        }
        return out
    linked = review.get("linked") or []
    if (
        review.get("follow_up")
        and not linked
        and not any(f.severity in ("critical", "high") for f in verified)
    ):
        # A follow-up asks the advisor again only when a push brought something serious (a
        # decision may be needed); otherwise the runner shows the last summary, and the new
        # findings speak for themselves in the review. With linked issues the advisor is
        # asked every time: whether the change addresses them may change with any push.
        return out

    wf.phase("Summarize")
    summary_task = SUMMARY_TASK.format(
        pr=pr,
        findings=json.dumps([_finding_json(f) for f in verified], ensure_ascii=False)[:24_000],
    )
    if linked:
        summary_task += LINKED_TASK.format(linked=json.dumps(linked, ensure_ascii=False)[:4_000])
    # A `decide` follow-up: the advisor, who asked, gets the answer; every earlier prompt is
    # the blocked run's, byte for byte, so those calls replay.
    decided, decision_block = decision_context(args)
    summary = await wf.agent(
        context_prompt(
            summary_task + language_note(args) + decided,
            fence,
            context + "\n\n" + decision_block if decision_block else context,
        ),
        agent_type="advisor",
        label="summarize",
        phase="Summarize",
        schema=ReviewSummary,
    )
    if summary.ok:
        verdict = ReviewSummary.model_validate(summary.structured)
        out["summary"] = verdict.summary
        out["assumptions"] = list(verdict.assumptions)
        if verdict.blocked is not None:
            out["blocked"] = verdict.blocked.model_dump()
        out["linked_issues"] = [v.model_dump() for v in verdict.linked_issues]
    else:
        wf.log(f"summary failed: {summary.error}")
    return out
