"""`decide` on a BLOCKED review: the same review again, at the head it read, with the answer.

A review stops with BLOCKED in its last step, the summary, after it posted its findings; the
maintainer's `decide` resumes it (`resume_review`, in `bot.workflows.decide.flow.FOLLOW_UPS`):

1. The blocked run's recorded arguments and the facts of its review (`saved_facts`: the head
   and base it read, the head reviewed before it, whether it was a full review, the patch
   signatures then) are read back; a run without them is not resumed.
2. A pull request whose head moved since is refused, with both heads named
   (`policies.decide.head_moved`): the question was about the code at the head it read, and
   its answer is not applied to other code. Refusing writes nothing and releases the claim;
   the new head gets its own review (a push starts one, or `@app review`), which asks again
   if it must.
3. The workflow runs on the engine with the same arguments plus `args["decision"]`, resuming
   the blocked run at the same commit: every reviewer, verifier and re-check call replays from
   its journal, and only the advisor, who asked, is asked again, with the answer fenced as the
   maintainer's. No fix is tried again (`suggest` 0): the run that asked posted the findings,
   with their suggestions.
4. The result is concluded against the pull request's memory as it is now, so nothing the
   blocked run posted is posted again (anything new goes in one review); the memory is saved
   with the new summary; the follow-up's `review` check run on that head ends with the
   review's own conclusion (no longer neutral, unless it blocks again); the caller posts the
   follow-up's comment and marks the question answered, keeping the memory's signed line at
   the end of the blocked run's sticky summary (`memory_line`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from bot.engine.artifacts import RunNotFound
from bot.publish.render import Progress
from bot.runs.progress import Tracker, clean_model_text
from bot.workflows.decide.handler import Resumed
from bot.workflows.instructions import read_instructions
from bot.workflows.review import diffs, linked, proofs, runner
from bot.workflows.review import instructions as review_instructions
from bot.workflows.review import workflow as review_workflow
from bot.workflows.review.memory import load_state, mirror_line
from policies.decide import Refused, head_moved, no_arguments
from policies.outcome import outcome_from_run
from policies.review_state import ReviewState

if TYPE_CHECKING:
    from bot.github.installation import InstallationClient
    from bot.github.models import PullRequest
    from bot.runs.flows import RunHost
    from bot.workflows.decide.handler import FollowUp

SAVED = "reviewed"
"""The key of `saved_facts` in a review run's recorded arguments (the workflow never reads it)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Saved:
    """What a review read, as recorded beside its arguments."""

    head: str
    base_sha: str
    base_ref: str
    previous: str | None
    full: bool
    patches: dict[str, str]


def saved_facts(prep: runner.Prepared, pull: PullRequest) -> dict[str, Any]:
    """The facts of a review that a `decide` needs to resume it (`args[SAVED]`)."""
    return {
        "head": prep.head,
        "base_sha": pull.base.sha,
        "base_ref": pull.base.ref,
        "previous": prep.previous,
        "full": prep.full,
        "patches": dict(prep.state.patches),
    }


def _saved(args: Mapping[str, Any] | None) -> Saved | None:
    raw = args.get(SAVED) if args is not None else None
    if not isinstance(raw, Mapping) or not isinstance(args, Mapping):
        return None
    if not isinstance(args.get("review"), Mapping):
        return None
    head, base_sha, base_ref = raw.get("head"), raw.get("base_sha"), raw.get("base_ref")
    previous, patches = raw.get("previous"), raw.get("patches")
    if not (isinstance(head, str) and isinstance(base_sha, str) and isinstance(base_ref, str)):
        return None
    return Saved(
        head=head,
        base_sha=base_sha,
        base_ref=base_ref,
        previous=previous if isinstance(previous, str) else None,
        full=raw.get("full") is True,
        patches={
            str(k): str(v) for k, v in (patches.items() if isinstance(patches, Mapping) else ())
        },
    )


async def _resumable(ex: RunHost, run_id: str) -> str | None:
    """`run_id` when the engine holds its journal here, else None (every call runs again)."""
    try:
        await anyio.to_thread.run_sync(lambda: ex.engine.status(run_id))
    except RunNotFound:
        return None
    return run_id


async def resume_review(ex: RunHost, fu: FollowUp) -> Resumed | Refused:
    """`decide`'s handler for a BLOCKED review: see the module docstring."""
    saved = _saved(fu.args)
    if fu.args is None or saved is None:
        return no_arguments(fu.blocked.id)
    client, trigger = fu.client, fu.trigger
    pull = await client.get_pull(trigger.number)
    if pull.head.sha != saved.head:
        return head_moved(
            fu.blocked.id, asked_at=saved.head, head=pull.head.sha, app_slug=ex.app_slug
        )
    config = (await ex.repo_config(client)).review
    fu.publisher.head_sha = saved.head
    phases = tuple(p.title for p in review_workflow.meta.phase_list())
    await fu.publisher.start(
        Progress(run_id=fu.run.id, workflow="review", phases=phases), defer=True
    )
    git_dir = await ex.mirrors.ensure_commit(client, saved.head, pull_number=trigger.number)
    if not await diffs.has_commit(git_dir, saved.base_sha):
        await ex.mirrors.ensure_commit(client, saved.base_sha, branch=saved.base_ref)
    comments = await client.list_issue_comments(trigger.number)
    state, dismissed = await runner.load(
        ex.store,
        client,
        trigger.number,
        comments=comments,
        bot_login=ex.bot_login,
        key=ex.review_key,
    )
    # What the blocked run reviewed, planned again from what it read: its base, the head
    # reviewed before it and the patches then. Its units are the recorded ones.
    as_read = pull.model_copy(update={"base": pull.base.model_copy(update={"sha": saved.base_sha})})
    then = ReviewState(heads=[saved.previous] if saved.previous else [], patches=saved.patches)
    fence = str(fu.args.get("fence") or "")
    prep = await runner.prepare(
        git_dir,
        pull=as_read,
        state=then,
        config=config,
        full=saved.full,
        fence=fence,
        author_trusted=False,
    )
    prep.state, prep.dismissed_now = state, dismissed
    taught = await read_instructions(client, saved.base_sha, config=config)
    prep.instruction_lines = review_instructions.summary_lines(taught, prep.plan.paths)
    issues = await linked.read_linked(client, pull, actor=trigger.actor, actor_can_write=True)

    recorded = dict(fu.args)
    review_args = {**recorded["review"], "suggest": 0, "done": {}}
    if isinstance(review_args.get("prove"), dict):
        # The blocked run's proofs are in the memory now: none is proven twice.
        review_args["prove"] = {**review_args["prove"], "proved": state.proofs}
    run_test = proofs.bound_runner(
        git_dir,
        head=saved.head,
        command=config.test_command or "",
        time_limit=float(config.check_timeout),
    )
    details = await ex.run_workflow(
        review_workflow.meta,
        functools.partial(review_workflow.workflow, run_test=run_test),
        {**recorded, "review": review_args, "decision": fu.decision},
        git_dir=git_dir,
        base=saved.head,
        run_id=fu.run.id,
        publisher=fu.publisher,
        tracker=Tracker("review", fu.started, clock=ex.clock),
        resume_from=await _resumable(ex, fu.blocked.id),
    )
    await runner.reclaim_run(git_dir, details)
    if details.status != "completed" or not isinstance(details.result, dict):
        raise RuntimeError(details.error or "the review workflow did not complete")
    facts = ex.facts_of(details, fu.run.id, "review", fu.started)
    result = details.result
    model_summary = clean_model_text(str(result.get("summary") or ""))
    prep.linked_lines = linked.summary_lines(issues, result.get("linked_issues"))
    done = await runner.conclude(git_dir, prep, result, config=config)
    done.state = done.state.model_copy(update={"units": {}})
    if model_summary:
        done.state = done.state.model_copy(update={"summary": model_summary[:6000]})
    else:
        model_summary = state.summary
    kept, stale = await runner.post_and_remember(
        client,
        ex.store,
        trigger.repo_full_name,
        trigger.number,
        fu.run.id,
        prep,
        done,
        reviewed_head=saved.head,
        bot_login=ex.bot_login,
        redact=ex.redactor,
    )
    mapped = outcome_from_run(
        {
            "summary": model_summary or "Reviewed.",
            "assumptions": result.get("assumptions") or [],
            **({"blocked": result["blocked"]} if result.get("blocked") else {}),
        },
        facts,
        app_slug=ex.app_slug,
        clean=clean_model_text,
    )
    summary = runner.summary_of(
        prep,
        None if stale else done,
        model_summary,
        stale=stale,
        min_severity=config.min_severity,
    )
    outcome = dataclasses.replace(mapped, summary=summary)
    conclusion = runner.check_conclusion(
        kept,
        fail_on=config.fail_on,
        blocked=outcome.status == "blocked",
        budget_reached=done.budget is not None,
    )
    await fu.publisher.finish_check(outcome, conclusion=conclusion)
    return Resumed(outcome, details)


async def memory_line(ex: RunHost, client: InstallationClient, number: int) -> str:
    """The signed line of the pull request's stored memory, for its sticky review summary."""
    state = await load_state(ex.store, client.full_name, number, bot_login=ex.bot_login)
    return await mirror_line(state, key=ex.review_key, repo=client.full_name, number=number)
