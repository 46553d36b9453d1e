"""`decide`: answer a BLOCKED run by resuming its workflow with the maintainer's decision.

The executor runs `answer_blocked`, the `decide` flow, for a `decide` command from a writer:

1. The question: for a retried job, the run this `decide` run already answers; else the
   newest run on the issue or pull request whose status is `blocked` (model-free commands
   never block). `policies.decide.choose` checks the answer against it: no question, one
   already answered by another live run, an option number out of range. Each of those gets a
   short sticky `decide` reply, without a model, and the run ends `skipped`.
2. The handler: `FOLLOW_UPS[workflow]` (fix; review, `bot.workflows.review.resume`), else
   `resume_workflow` for the built-in workflows (`bot.workflows.get_workflow`: ask, triage),
   else a reply that the workflow cannot be resumed.
3. The claim: `Storage.claim_answer` records `args["decision"]` on this run atomically, so two
   `decide` replies at once start one follow-up; a follow-up that failed or was skipped
   releases its claim, so the question can be answered again.
4. The handler runs the follow-up under this run's id and returns its outcome; the follow-up's
   comment is its own (kind `follow-up`, never sticky), titled by the blocked workflow, and
   opens with what it answers and how many agent calls it replayed.
5. The outcome is recorded ("publishing"), posted, the blocked run's comment is edited to
   show the answer and link the follow-up (keeping its hidden line, `KEPT_LINES`: a review
   summary's memory), then the final status is recorded. A job retried
   after a failure at the end posts the recorded outcome and edits again, without the model;
   both writes are found by run marker, so nothing is posted twice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from bot.engine.artifacts import RunNotFound
from bot.git.checkout import CheckoutError
from bot.github.errors import RateLimited
from bot.log import get_logger
from bot.publish.publisher import FOLLOW_UP_KIND, Publisher, find_run_comment
from bot.publish.render import Progress, answered_note, follow_up_note, render_reply
from bot.runs.context import default_branch_of, sanitize
from bot.runs.flows import PUBLISHING
from bot.runs.progress import Tracker, clean_model_text
from bot.workflows import MODEL_FREE, get_workflow
from bot.workflows.decide.handler import FollowUp, FollowUpHandler, Resumed
from bot.workflows.fix.flow import resume_fix
from bot.workflows.review.resume import memory_line, resume_review
from policies.budget import stopped_summary
from policies.carried_run import CarriedRun, read_carried
from policies.decide import (
    Chosen,
    Question,
    Refused,
    already_answered,
    choose,
    decision_args,
    no_answer,
    no_arguments,
    not_resumable,
    parse_answer,
)
from policies.outcome import Blocked, Outcome, failed_outcome, outcome_from_run
from policies.outcome_json import outcome_from_json

if TYPE_CHECKING:
    from pathlib import Path

    from bot.engine.details import RunDetails
    from bot.github.client import InstallationClient
    from bot.github.models import IssueComment
    from bot.runs.flows import RunHost
    from bot.store.contract import RunRecord, Storage
    from policies.event import Trigger

log = get_logger(__name__)

RECENT = 100  # runs on one issue or pull request searched for the newest BLOCKED one
EARLIER = 5  # earlier answers in a chain of follow-ups passed on to the next one


def _titles(meta: Any) -> tuple[str, ...]:
    return tuple(p.title for p in meta.phase_list())


async def _workspace(ex: RunHost, fu: FollowUp) -> tuple[Path, str, str | None]:
    """The mirror, the commit the blocked run read, and the run to resume from.

    The same commit (not the branch's newest) keeps the workspace identity the replay keys
    hold, and answers the question about the code it was asked on. Without the blocked run's
    artifacts (another data dir, or a commit that is gone) it reads what a new run would, and
    every call runs for real.
    """
    trigger, client = fu.trigger, fu.client
    is_pull = trigger.target_kind == "pull_request"
    try:
        previous = await anyio.to_thread.run_sync(lambda: ex.engine.status(fu.blocked.id))
    except RunNotFound:
        previous = None
    if previous is not None and previous.base:
        try:
            git_dir = await ex.mirrors.ensure_commit(
                client,
                previous.base,
                pull_number=trigger.number if is_pull else None,
                branch=None if is_pull else default_branch_of(fu.payload),
            )
        except CheckoutError as exc:
            log.warning(
                "the blocked run's commit is gone; reading the newest", extra={"error": str(exc)}
            )
        else:
            return git_dir, previous.base, previous.run_id
    head = (await client.get_pull(trigger.number)).head.sha if is_pull else None
    git_dir, base = await ex.workspace(client, trigger, fu.payload, head)
    return git_dir, base, previous.run_id if previous is not None else None


async def resume_workflow(ex: RunHost, fu: FollowUp) -> Resumed | Refused:
    """The follow-up of a built-in workflow: the same arguments plus the decision, on the
    engine with `resume_from`, so the read-only calls before the decision replay."""
    entry = get_workflow(fu.workflow)
    if entry is None:
        return not_resumable(fu.workflow, ex.app_slug)
    if fu.args is None:
        return no_arguments(fu.blocked.id)
    meta, fn = entry
    git_dir, base, resume_from = await _workspace(ex, fu)
    if fu.publisher.check_name and fu.publisher.head_sha is None:
        fu.publisher.head_sha = base
    await fu.publisher.start(
        Progress(run_id=fu.run.id, workflow=fu.workflow, phases=_titles(meta)), defer=True
    )
    details = await ex.run_workflow(
        meta,
        fn,
        {**fu.args, "decision": fu.decision},
        git_dir=git_dir,
        base=base,
        run_id=fu.run.id,
        publisher=fu.publisher,
        tracker=Tracker(fu.workflow, fu.started, clock=ex.clock),
        resume_from=resume_from,
    )
    facts = ex.facts_of(details, fu.run.id, fu.workflow, fu.started)
    if details.budget_reached is not None:
        summary = stopped_summary(fu.workflow, details.budget_reached)
        return Resumed(failed_outcome(facts, details.budget_reached, summary=summary), details)
    outcome = outcome_from_run(details.result, facts, app_slug=ex.app_slug, clean=clean_model_text)
    return Resumed(outcome, details)


FOLLOW_UPS: dict[str, FollowUpHandler] = {
    "fix": resume_fix,  # its own runner: the app pushes and opens the pull request
    "review": resume_review,  # its own runner: the review, its memory and its check run
}
"""Handlers by the blocked workflow's name, before the generic `resume_workflow`."""

KeptLine = Callable[["RunHost", "InstallationClient", int], Awaitable[str]]
KEPT_LINES: dict[str, KeptLine] = {
    "review": memory_line,  # the sticky review summary ends with the signed memory
}
"""By the blocked run's comment kind: the hidden line that comment keeps when it is marked
answered."""


def handler_for(workflow: str) -> FollowUpHandler | None:
    """The handler that resumes `workflow`, or None when `decide` cannot resume it."""
    handler = FOLLOW_UPS.get(workflow)
    if handler is None and get_workflow(workflow) is not None:
        handler = resume_workflow
    return handler


# -- the question ------------------------------------------------------------------------------


def comment_kind(run: RunRecord) -> str:
    """The kind in a run's comment marker: a follow-up's is its own, not its workflow's."""
    return FOLLOW_UP_KIND if run.workflow == "decide" else run.workflow


def blocked_workflow(run: RunRecord) -> str:
    """The workflow a BLOCKED run ran: a follow-up's is the one it resumed."""
    workflow = (run.outcome or {}).get("workflow")
    if run.workflow == "decide" and isinstance(workflow, str):
        return workflow
    return run.workflow


def _blocked_of(run: RunRecord) -> Blocked | None:
    if run.outcome is None:
        return None
    try:
        return outcome_from_json(run.outcome).blocked
    except ValueError:
        return None


async def carry_in(ex: RunHost, client: InstallationClient, trigger: Trigger) -> bool:
    """Put the newest BLOCKED run its own comment carries (the app's, signed for this target:
    `policies.carried_run`) into the store, under its own id, as the server would have kept
    it; whether one was found. Its engine journal is not carried: the follow-up runs its
    agent calls again rather than replaying them."""
    comments = await client.list_issue_comments(trigger.number)
    for comment in reversed(comments):
        if comment.user is None or comment.user.login.lower() != ex.bot_login.lower():
            continue
        run = read_carried(
            comment.body, key=ex.review_key, repo=trigger.repo_full_name, number=trigger.number
        )
        if run is None or run.target_kind != trigger.target_kind:
            continue

        def keep(found: CarriedRun = run) -> None:
            if ex.store.get_run(found.id) is not None:
                return
            ex.store.create_run(
                delivery_id=f"carried-{found.id}",
                repo=found.repo,
                target_kind=found.target_kind,
                number=found.number,
                workflow=found.workflow,
                mode=found.mode,
                run_id=found.id,
            )
            ex.store.update_run(found.id, status="blocked", outcome=found.outcome)
            if found.args is not None:
                ex.store.set_run_args(found.id, found.args)

        await anyio.to_thread.run_sync(keep)
        log.info("the BLOCKED run was carried in from its comment", extra={"blocked": run.id})
        return True
    return False


def find_question(
    store: Storage, trigger: Trigger, run: RunRecord
) -> tuple[RunRecord, Blocked] | None:
    """The BLOCKED run `run` answers (blocking: run it in a thread).

    A retried job keeps the run it claimed; otherwise the newest blocked run on the target.
    """
    claimed = run.answers()
    blocked = store.get_run(claimed) if claimed else None
    if blocked is None:
        recent = store.runs_on_target(
            trigger.repo_full_name,
            trigger.target_kind,
            trigger.number,
            exclude=run.id,
            limit=RECENT,
        )
        blocked = next(
            (r for r in recent if r.workflow not in MODEL_FREE and r.status == "blocked"), None
        )
    question = _blocked_of(blocked) if blocked is not None else None
    return (blocked, question) if blocked is not None and question is not None else None


def _earlier(args: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The answers given before, in a chain of follow-ups (oldest first)."""
    decision = (args or {}).get("decision")
    if not isinstance(decision, dict):
        return []
    earlier = decision.get("earlier")
    chain = [d for d in earlier if isinstance(d, dict)] if isinstance(earlier, list) else []
    latest = {k: v for k, v in decision.items() if k != "earlier"}
    return [*chain, latest][-EARLIER:]


# -- the flow ----------------------------------------------------------------------------------


async def _refuse(ex: RunHost, publisher: Publisher, run: RunRecord, refused: Refused) -> None:
    await publisher.reply(render_reply(run.id, "decide", refused.reply))
    await ex.record(run.id, "skipped", None)
    log.info("decide answered without a follow-up")


async def answer_blocked(
    ex: RunHost,
    client: InstallationClient,
    trigger: Trigger,
    run: RunRecord,
    payload: Mapping[str, Any] | None,
    publisher: Publisher,
    started: float,
) -> None:
    """`decide` end to end (see the module docstring); `publisher` posts the short replies."""
    found = await anyio.to_thread.run_sync(lambda: find_question(ex.store, trigger, run))
    if found is None and ex.carry_blocked and await carry_in(ex, client, trigger):
        found = await anyio.to_thread.run_sync(lambda: find_question(ex.store, trigger, run))
    if run.status == PUBLISHING and run.outcome is not None and found is not None:
        blocked, _ = found
        workflow = blocked_workflow(blocked)
        try:
            recorded = outcome_from_json(run.outcome)
        except ValueError:
            log.warning("the recorded outcome is unreadable; answering again")
        else:
            log.info("posting the follow-up recorded before the last attempt failed")
            follow = ex.publisher_for(
                client, trigger, run, payload, kind=FOLLOW_UP_KIND, workflow=workflow
            )
            decision = (run.args or {}).get("decision")
            await _finish(ex, follow, run, blocked, recorded, decision or {}, None)
            return

    answer = parse_answer(sanitize(trigger.args))
    if answer is None:  # the trigger policy skips a bare `decide`; an edited payload may not
        await _refuse(ex, publisher, run, no_answer(ex.app_slug))
        return
    question: Question | None = None
    if found is not None:
        blocked, asked = found
        other = await anyio.to_thread.run_sync(
            lambda: ex.store.answered_by(blocked, exclude=run.id)
        )
        question = Question(blocked.id, asked, other.id if other is not None else None)
    chosen = choose(answer, question, app_slug=ex.app_slug)
    if isinstance(chosen, Refused):
        await _refuse(ex, publisher, run, chosen)
        return
    assert found is not None and question is not None
    blocked, asked = found
    workflow = blocked_workflow(blocked)
    handler = handler_for(workflow)
    if handler is None:
        await _refuse(ex, publisher, run, not_resumable(workflow, ex.app_slug))
        return
    await _follow(
        ex, handler, client, trigger, run, payload, publisher, blocked, question, chosen, started
    )


async def _follow(
    ex: RunHost,
    handler: FollowUpHandler,
    client: InstallationClient,
    trigger: Trigger,
    run: RunRecord,
    payload: Mapping[str, Any] | None,
    reply_to: Publisher,
    blocked: RunRecord,
    question: Question,
    chosen: Chosen,
    started: float,
) -> None:
    """Claim the answer, run the handler, publish its outcome and mark the question answered."""
    decision: dict[str, Any] = {
        **decision_args(chosen, question, by=trigger.actor),
        "earlier": _earlier(blocked.args),
    }
    other = await anyio.to_thread.run_sync(lambda: ex.store.claim_answer(run.id, blocked, decision))
    if other is not None:  # another `decide` claimed it since the check
        await _refuse(ex, reply_to, run, already_answered(blocked.id, other.id))
        return
    workflow = blocked_workflow(blocked)
    comments = await client.list_issue_comments(trigger.number)
    follow = ex.publisher_for(client, trigger, run, payload, kind=FOLLOW_UP_KIND, workflow=workflow)
    follow.know_comments(comments)
    fu = FollowUp(
        client=client,
        trigger=trigger,
        run=run,
        payload=payload,
        blocked=blocked,
        workflow=workflow,
        question=question.blocked,
        decision=decision,
        args=blocked.args,
        publisher=follow,
        started=started,
    )
    details: RunDetails | None = None
    try:
        result = await handler(ex, fu)
        if isinstance(result, Refused):
            await _refuse(ex, reply_to, run, result)
            return
        outcome, details = result.outcome, result.details
    except RateLimited:
        log.warning("rate limited beyond the cap; the job goes back to the queue")
        raise
    except Exception as exc:
        log.exception("the follow-up failed")
        outcome = ex.failed_by(exc, run.id, workflow, details, started)
    asked_in = find_run_comment(comments, bot_login=ex.bot_login, run_id=blocked.id)
    note = follow_up_note(
        by=trigger.actor,
        text=chosen.text,
        option=chosen.option,
        blocked_run=blocked.id,
        url=asked_in.html_url if asked_in is not None else None,
        replayed=sum(1 for a in details.agents if a.replayed) if details else 0,
        total=len(details.agents) if details else 0,
    )
    outcome = dataclasses.replace(outcome, note=note)
    await _finish(ex, follow, run, blocked, outcome, decision, comments)


async def _finish(
    ex: RunHost,
    follow: Publisher,
    run: RunRecord,
    blocked: RunRecord,
    outcome: Outcome,
    decision: Mapping[str, Any],
    comments: list[IssueComment] | None,
) -> None:
    """Record the follow-up's outcome, post it, mark the question answered, record the end.

    The mark comes before the final status, so a job retried because the mark failed (a
    rate limit) makes it again; a follow-up that failed leaves the question open.
    """
    await ex.record(run.id, PUBLISHING, outcome)
    await follow.finish(outcome)
    if outcome.status != "failed":
        await _mark_answered(ex, follow, blocked, decision, comments)
    await ex.record(run.id, outcome.status, outcome)
    log.info(
        "follow-up published",
        extra={
            "status": outcome.status,
            "comment_id": follow.comment_id,
            "blocked_run": blocked.id,
        },
    )


async def _mark_answered(
    ex: RunHost,
    follow: Publisher,
    blocked: RunRecord,
    decision: Mapping[str, Any],
    comments: list[IssueComment] | None,
) -> None:
    """Edit the blocked run's comment: who answered what, and the link to the follow-up."""
    if blocked.outcome is None:
        return
    try:
        asked = outcome_from_json(blocked.outcome)
    except ValueError:
        log.warning("the blocked run's outcome is unreadable; its comment is left as it is")
        return
    option = decision.get("option")
    note = answered_note(
        by=str(decision.get("by") or ""),
        text=str(decision.get("text") or ""),
        option=option if isinstance(option, int) else None,
        follow_up=follow.run_id,
        url=follow.comment_url,
    )
    kind = comment_kind(blocked)
    kept = KEPT_LINES.get(kind)
    publisher = Publisher(
        follow.client,
        run_id=blocked.id,
        kind=kind,
        number=follow.number,
        bot_login=ex.bot_login,
        known_comments=comments,
        redactor=ex.redactor,
    )
    try:
        hidden = await kept(ex, follow.client, follow.number) if kept is not None else ""
        in_threads = blocked.target_kind == "pull_request"  # asked in a review thread, maybe
        if not await publisher.amend(asked, answered=note, hidden=hidden, in_threads=in_threads):
            log.info("the blocked run's comment is gone; nothing to mark answered")
    except RateLimited:
        raise
    except Exception as exc:  # the follow-up is posted; the mark is a courtesy
        log.warning("could not mark the question answered", extra={"error": ex.redactor(str(exc))})
