"""The built-in workflows on a local checkout (`bot workflow run triage|ask|review`): nothing posted.

Under the worker a built-in workflow gets `args` the executor builds from GitHub: the issue or
pull request as fenced data, with a fence token drawn for the run (`bot.runs.context`), which is
why a workflow file run by hand without them failed on `args["fence"]`. Here the same `args`
are built from what the person gives on the command line, fenced the same way:

- `triage`: the issue's text (`--issue` or `--issue-file`; its first line is the title), as
  *untrusted* data: an issue's words are anyone's, wherever they were copied from;
- `ask`: the question (`--question`), as the asker's own data; read as a question about the
  repository (one explorer, then the advisor);
- `review`: the changes of `--head` (default HEAD) against `--base`, from their merge base, as a
  pull request's (`bot.workflows.review.diffs`), planned and fenced by the review runner with
  the limits of the repository's `.github/bot.yml` at the base commit, and reviewed and
  verified unit by unit as on GitHub. No fix is tried (no worktree, no branch), no review
  memory is read or kept, and the agents read the head commit, not the work tree.

Triage and ask read the checkout's work tree as it is. The outcome is the one GitHub would get
(`policies.outcome`), rendered for a terminal by `report`; nothing reaches GitHub: no client is
built. A local run is no job of the queue, so no lease fence guards it (`bot.store.queue.fence`
checks nothing outside a job, and a fence that always holds is the absence of one).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.engine.details import RunDetails
from bot.engine.git import GitError, common_dir
from bot.engine.workflow import WorkflowFn, WorkflowMeta
from bot.engine.worktree import WorktreeError, resolve_commit
from bot.github.models import GitRef, PullRequest
from bot.runs.context import Part, assemble, new_fence, plain, sanitize, truncate
from bot.runs.progress import clean_model_text, usage_of
from bot.workflows import ask, triage
from bot.workflows.review import diffs, runner
from bot.workflows.review import workflow as review_workflow
from policies.config import CONFIG_PATH, ConfigError, ReviewConfig, parse_repo_config
from policies.outcome import Outcome, RunFacts, outcome_from_run
from policies.review_state import ReviewState
from policies.untrusted_text import code_span

BUILTIN_NAMES = ("triage", "ask", "review")
ISSUE_LIMIT = 16_000
HEADER = "A local checkout, run by hand: nothing is posted anywhere."


class LocalInputError(ValueError):
    """What a built-in workflow needs from the command line is missing or wrong; the message
    names the option to pass."""


@dataclass(frozen=True, slots=True)
class LocalInputs:
    """What the command line gave for a built-in workflow."""

    issue: str | None = None
    question: str | None = None
    base: str | None = None
    head: str = "HEAD"


@dataclass(frozen=True, slots=True)
class LocalRun:
    """A built-in workflow ready for the engine: its `args`, and the commit its agents read."""

    name: str
    meta: WorkflowMeta
    fn: WorkflowFn
    args: dict[str, Any]
    commit: str | None = None
    """The commit read-only agents read (None: the checkout's HEAD)."""
    read_work_tree: bool = True
    nothing_to_do: str | None = None
    """Set when there is nothing to run (a review of no changes): what to say instead."""
    notes: tuple[str, ...] = ()


def is_builtin(name: str) -> bool:
    """Whether `name` (the FILE argument) names a built-in workflow rather than a file."""
    return name in BUILTIN_NAMES


def check_inputs(name: str, inputs: LocalInputs) -> None:
    """LocalInputError unless `inputs` hold what workflow `name` needs."""
    if name == "triage" and not (inputs.issue or "").strip():
        raise LocalInputError("triage needs --issue TEXT or --issue-file PATH (the issue's text)")
    if name == "ask" and not (inputs.question or "").strip():
        raise LocalInputError("ask needs --question TEXT")
    if name == "review" and not (inputs.base or "").strip():
        raise LocalInputError("review needs --base REF (and --head REF, default HEAD)")


def _issue_part(text: str) -> Part:
    lines = sanitize(text).strip().splitlines()
    title = plain(lines[0].lstrip("#")) if lines else ""
    body = "\n".join(lines[1:]).strip() or "(no description)"
    shown = f"Title: {title or '(none)'}\nAuthor: unknown\nLabels: (none)\n\n{body}"
    return Part("issue", truncate(shown, ISSUE_LIMIT), False, priority=0)


def _context(parts: list[Part], fence: str) -> str:
    blocks, _included, omitted = assemble(parts, fence=fence)
    text = f"{HEADER}\n\n{blocks}"
    if omitted:
        text += "\n\nNot included (context budget): " + ", ".join(omitted) + "."
    return text


def _commit(repo: Path, ref: str, option: str) -> str:
    try:
        return resolve_commit(repo, ref)
    except WorktreeError as exc:
        raise LocalInputError(f"{option} {ref} is not a commit of {repo}: {exc}") from exc


async def _review_config(git_dir: Path, base: str) -> ReviewConfig:
    text = await diffs.read_file(git_dir, base, CONFIG_PATH)
    try:
        return parse_repo_config(text).review
    except ConfigError as exc:
        raise LocalInputError(f"{CONFIG_PATH} at the base commit: {exc}") from exc


async def prepare(name: str, inputs: LocalInputs, repo: Path) -> LocalRun:
    """The run of built-in workflow `name` on the checkout (or bare repository) `repo`."""
    check_inputs(name, inputs)
    fence = new_fence()
    if name == "triage":
        context = _context([_issue_part(inputs.issue or "")], fence)
        args = {
            "target": "the issue",
            "kind": "issue",
            "fence": fence,
            "context": context,
            "question": "",
            "repo_labels": None,
            "reporter_reply": False,
        }
        return LocalRun(name, triage.meta, triage.workflow, args)
    if name == "ask":
        question = sanitize(inputs.question)
        part = Part("question", truncate(question, ISSUE_LIMIT), True, priority=0)
        args = {
            "target": "this repository",
            "kind": "issue",
            "fence": fence,
            "context": _context([part], fence),
            "question": question,
        }
        return LocalRun(name, ask.meta, ask.workflow, args)
    if name != "review":
        raise LocalInputError(f"no built-in workflow {name!r}: use one of {BUILTIN_NAMES}")
    return await _prepare_review(inputs, repo, fence)


async def _prepare_review(inputs: LocalInputs, repo: Path, fence: str) -> LocalRun:
    base_ref, head_ref = str(inputs.base), inputs.head
    base, head = _commit(repo, base_ref, "--base"), _commit(repo, head_ref, "--head")
    try:
        git_dir = common_dir(repo)
    except GitError as exc:
        raise LocalInputError(f"{repo} is not a git repository ({exc})") from exc
    config = await _review_config(git_dir, base)
    pull = PullRequest(
        id=0,
        number=0,
        title=f"{head_ref} into {base_ref}",
        head=GitRef(ref=head_ref, sha=head),
        base=GitRef(ref=base_ref, sha=base),
    )
    try:
        prep = await runner.prepare(
            git_dir,
            pull=pull,
            state=ReviewState(),
            config=config,
            full=True,
            fence=fence,
            author_trusted=False,
        )
    except diffs.DiffError as exc:
        raise LocalInputError(f"cannot compare {head_ref} with {base_ref}: {exc}") from exc
    target = f"the changes of {json.dumps(plain(head_ref))} against {json.dumps(plain(base_ref))}"
    lines = [f"Base: {plain(base_ref)} @ {base}", f"Head: {plain(head_ref)} @ {head}"]
    lines += [
        f"- {plain(f.path)} ({f.status}, +{f.additions} -{f.deletions})" for f in prep.changes.files
    ]
    part = Part("changed files", truncate("\n".join(lines), ISSUE_LIMIT), False, priority=1)
    args = {
        "target": target,
        "kind": "pull_request",
        "fence": fence,
        "context": _context([part], fence),
        "review": {
            "units": prep.units,
            "recheck": [],
            "known": [],
            "suggest": 0,
            "max_findings": config.max_findings,
            "follow_up": False,
            "cached": {},
            "done": {},
        },
    }
    notes = tuple(f"Not reviewed: {code_span(s.path)} ({s.reason})." for s in prep.plan.skipped)
    nothing = None
    if not prep.units:
        nothing = f"Nothing to review between {code_span(base_ref)} and {code_span(head_ref)}."
    return LocalRun(
        "review",
        review_workflow.meta,
        review_workflow.workflow,
        args,
        commit=head,
        read_work_tree=False,
        nothing_to_do=nothing,
        notes=notes,
    )


def _review_result(result: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The review workflow's result as an Outcome's shape: its verified findings as findings."""
    raw_review = result.get("review")
    review: dict[str, Any] = raw_review if isinstance(raw_review, dict) else {}
    findings = []
    for raw in review.get("findings") or []:
        if isinstance(raw, dict) and raw.get("path") and raw.get("title"):
            findings.append(
                {
                    "path": str(raw["path"]),
                    "line": raw.get("start_line"),
                    "severity": str(raw.get("severity") or "medium"),
                    "title": str(raw["title"]),
                    "body": str(raw.get("explanation") or ""),
                }
            )
    unverified = ", ".join(code_span(str(p)) for p in review.get("unverified") or [])
    notes = (
        (f"Not verified (its reviewer or verifier failed): {unverified}.",) if unverified else ()
    )
    summary = str(result.get("summary") or "") or "Reviewed."
    return {**result, "summary": summary, "findings": findings}, notes


def outcome(run: LocalRun, details: RunDetails | None, *, app_slug: str) -> Outcome:
    """The outcome of a local run (`details` None: nothing was run)."""
    if details is None:
        facts = RunFacts(run_id="-", workflow=run.name, status="completed")
        done = outcome_from_run({"summary": run.nothing_to_do or ""}, facts, app_slug=app_slug)
        return dataclasses.replace(done, status="no_changes", notes=run.notes)
    wall = (details.finished_at or details.started_at) - details.started_at
    facts = RunFacts(
        run_id=details.run_id,
        workflow=run.name,
        status=details.status,
        error=None if details.error is None else clean_model_text(details.error),
        usage=usage_of(details, wall),
    )
    result: object = details.result
    notes = run.notes
    if run.name == "review" and isinstance(result, dict):
        result, found = _review_result(result)
        notes += found
    done = outcome_from_run(result, facts, app_slug=app_slug, clean=clean_model_text)
    return dataclasses.replace(done, notes=done.notes + notes)


def report(done: Outcome) -> str:
    """The outcome for a terminal: its status line first, then what GitHub would have shown."""
    lines = [f"{done.workflow}: {done.status}", "", done.summary.strip()]
    if done.needs_info is not None:
        lines += ["", "Questions for the reporter:"]
        lines += [f"{n}. {q}" for n, q in enumerate(done.needs_info.questions, start=1)]
    if done.blocked is not None:
        blocked = done.blocked
        lines += ["", f"Decision needed: {blocked.decision}"]
        if blocked.why:
            lines.append(f"Why: {blocked.why}")
        lines += [f"{n}. {option}" for n, option in enumerate(blocked.options, start=1)]
        lines.append(f"Default: {blocked.default}")
        if blocked.risk:
            lines.append(f"Risk: {blocked.risk}")
    if done.findings:
        lines += ["", "Findings:"]
        for f in done.findings:
            where = code_span(f"{f.path}:{f.line}" if f.line else f.path)
            lines.append(f"- **{f.severity}** {where}: {f.title}")
            if f.body:
                lines.append("  " + f.body.replace("\n", "\n  "))
    for note in done.notes:
        lines += ["", note]
    if done.assumptions:
        lines += ["", "Assumptions:"] + [f"- {a}" for a in done.assumptions]
    if done.error:
        lines += ["", f"Error: {done.error}"]
    lines += ["", "(a local run: nothing was posted)"]
    return "\n".join(lines)
