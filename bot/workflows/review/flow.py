"""The executor's path for `review` runs (see `bot.workflows.review.runner` for the steps).

Kept apart from `bot.runs.execute` because a review does more than map a workflow's result onto
one comment: it posts a review, answers and resolves threads, and keeps the pull request's
memory. Like every run, it ends with a published outcome: the sticky summary (with the memory
mirrored in its hidden marker) and the `review` check run on the reviewed head.

One review at a time per pull request in this process: a new review stops a running one on
the same pull request (its summary then says it was superseded) and waits for it to finish
publishing before going on, so the sticky summary ends with the newest head's review.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from bot.engine.artifacts import RunNotFound
from bot.github.errors import RateLimited
from bot.log import get_logger
from bot.publish.render import Progress
from bot.runs.context import fetch_context
from bot.runs.flows import SUPERSEDED
from bot.runs.progress import Tracker, clean_model_text
from bot.workflows.instructions import instructions_context, read_instructions
from bot.workflows.review import (
    diffs,
    evidence,
    learn,
    linked,
    noise,
    proofs,
    resume,
    runner,
)
from bot.workflows.review import instructions as review_instructions
from bot.workflows.review import workflow as review_workflow
from bot.workflows.review.memory import mirror_line
from policies.outcome import Outcome, RunFacts, outcome_from_run

if TYPE_CHECKING:
    from bot.github.installation import InstallationClient
    from bot.publish.publisher import Publisher
    from bot.runs.flows import RunHost
    from bot.store.sqlite import RunRecord
    from policies.event import Trigger

log = get_logger(__name__)

WAIT_FOR_PREVIOUS_S = 30.0


def _full(trigger: Trigger) -> bool:
    words = trigger.args.strip().lower().split()
    return trigger.command == "review" and bool(words) and words[0] == "full"


async def _supersede(ex: RunHost, trigger: Trigger, run: RunRecord) -> None:
    """Stop this process's running reviews of the same pull request; wait until they posted."""
    others = await anyio.to_thread.run_sync(
        lambda: ex.store.runs_on_target(
            trigger.repo_full_name, "pull_request", trigger.number, exclude=run.id
        )
    )
    running = [r for r in others if r.workflow == "review" and r.status in ("running", "queued")]
    for other in running:
        try:
            await ex.engine.stop(other.id, SUPERSEDED)
        except RunNotFound:
            continue
        log.info("a running review was superseded", extra={"superseded": other.id})
        deadline = time.monotonic() + WAIT_FOR_PREVIOUS_S
        while time.monotonic() < deadline:
            record = await anyio.to_thread.run_sync(ex.store.get_run, other.id)
            if record is None or record.status not in ("running", "publishing"):
                break
            await anyio.sleep(0.1)


async def run_review(
    ex: RunHost,
    client: InstallationClient,
    trigger: Trigger,
    run: RunRecord,
    payload: Mapping[str, Any] | None,
    publisher: Publisher,
    started: float,
) -> None:
    read_config = ex.repo_config
    facts = RunFacts(run_id=run.id, workflow="review", status="failed")
    tracker = Tracker("review", started, clock=ex.clock)
    details = None
    git_dir = None
    try:
        pull = await client.get_pull(trigger.number)
        if trigger.command is None and trigger.head_sha and pull.head.sha != trigger.head_sha:
            log.info("the pull request moved on; the newer push gets its own review")
            await ex.record(run.id, "skipped", None)
            return
        config = (await read_config(client)).review
        publisher.head_sha = pull.head.sha
        context = await fetch_context(
            client,
            trigger,
            actor_permission="write" if trigger.command is not None else None,
            run_id=run.id,
            payload=payload,
            default_branch=None,
            pull=pull,
            own_kind="review",
        )
        if context.comments_fetched:
            publisher.know_comments(context.comments)
        # A running review of this pull request stops first: what it finished is in the
        # memory that is loaded next.
        await _supersede(ex, trigger, run)
        state, dismissed = await runner.load(
            ex.store,
            client,
            trigger.number,
            comments=context.comments,
            bot_login=ex.bot_login,
            key=ex.review_key,
        )
        if state.paused and trigger.command is None:
            log.info("automatic reviews are paused on this pull request")
            await ex.record(run.id, "skipped", None)
            return
        if await noise.auto_paused(ex, client, trigger, run, payload, config):
            return
        publisher.hold_comment = noise.hold_for_quiet(trigger, state, config)
        phases = tuple(p.title for p in review_workflow.meta.phase_list())
        await publisher.start(Progress(run_id=run.id, workflow="review", phases=phases), defer=True)
        git_dir = await ex.mirrors.ensure_commit(client, pull.head.sha, pull_number=trigger.number)
        if not await diffs.has_commit(git_dir, pull.base.sha):
            await ex.mirrors.ensure_commit(client, pull.base.sha, branch=pull.base.ref)
        prep = await runner.prepare(
            git_dir,
            pull=pull,
            state=state,
            config=config,
            full=_full(trigger),
            fence=context.fence,
            author_trusted=context.author_trusted,
        )
        prep.dismissed_now = dismissed
        found = None
        if not prep.nothing_to_review:
            found = await evidence.gather(
                client, git_dir, prep, config, fence=context.fence, app_slug=ex.app_slug
            )
            prep.ci = found.ci
        # The repository's instructions at the base (never the head's), and the issues the
        # description links: both fenced, both named in the summary.
        taught = await read_instructions(client, pull.base.sha, config=config)
        review_instructions.scope_units(prep.units, taught, context.fence)
        prep.instruction_lines = review_instructions.summary_lines(taught, prep.plan.paths)
        # The repository's learnings (newest first, capped), fenced as maintainer-written.
        prep.learnings, prep.learnings_left = await learn.for_review(
            ex.store, trigger.repo_full_name
        )
        issues = await linked.read_linked(
            client, pull, actor=trigger.actor, actor_can_write=trigger.command is not None
        )
        prep.linked_lines = linked.summary_lines(issues, None)
        run_context = "\n\n".join(
            part
            for part in (
                context.text,
                instructions_context(
                    taught.everywhere(), context.fence, where=review_instructions.WHERE
                ),
                learn.learnings_context(prep.learnings, context.fence),
                linked.linked_context(issues, context.fence),
                found.block if found else "",
            )
            if part
        )
        model_summary = ""
        result: dict[str, Any] = {}
        finished_units: dict[str, Any] = {}
        if prep.nothing_to_review:
            model_summary = (
                f"Nothing changed that needs a review since `{(prep.previous or prep.head)[:12]}`."
                f" Comment `@{ex.app_slug} review full` to review everything again."
            )
        else:
            args = {
                "target": f"pull request #{trigger.number}",
                "kind": "pull_request",
                "fence": context.fence,
                "context": run_context,
                "review": {
                    "units": prep.units,
                    "recheck": prep.recheck,
                    "known": [
                        {
                            "fingerprint": f.fingerprint,
                            "path": f.path,
                            "line": f.line,
                            "title": f.title,
                            "status": f.status,
                        }
                        for f in state.findings
                    ],
                    "suggest": config.max_suggestions,
                    "max_findings": config.max_findings,
                    "follow_up": prep.previous is not None and not prep.full,
                    "cached": state.units,
                    "done": finished_units,
                    "linked": linked.for_the_workflow(issues),
                    "prove": {
                        "command": config.test_command,
                        "severity": config.prove_severity,
                        "max": config.max_proofs,
                        "head": prep.head,
                        "proved": state.proofs,
                    },
                    "learnings": learn.for_the_workflow(prep.learnings),
                    "learnings_block": learn.learnings_context(prep.learnings, context.fence),
                },
                # Not for the workflow: what a `decide` needs to resume this review.
                resume.SAVED: resume.saved_facts(prep, pull),
            }
            run_test = proofs.bound_runner(
                git_dir,
                head=prep.head,
                command=config.test_command or "",
                time_limit=float(config.check_timeout),
            )

            finished = details = await ex.run_workflow(
                review_workflow.meta,
                functools.partial(review_workflow.workflow, run_test=run_test),
                args,
                git_dir=git_dir,
                base=prep.head,
                run_id=run.id,
                publisher=publisher,
                tracker=tracker,
            )
            facts = ex.facts_of(finished, run.id, "review", started)
            if finished.status == "aborted" and SUPERSEDED in (finished.error or ""):
                await runner.reclaim_run(git_dir, finished)
                # What this run finished is kept for the run that superseded it.
                kept = {**state.units, **finished_units}
                await runner.remember(
                    ex.store,
                    trigger.repo_full_name,
                    trigger.number,
                    state.model_copy(update={"units": dict(list(kept.items())[-100:])}),
                )
                summary = runner.summary_of(prep, None, "", superseded=True)
                outcome = Outcome("skipped", summary, run.id, "review", usage=facts.usage)
                if publisher.hold_comment:
                    await noise.publish_check_only(ex, publisher, outcome)
                else:
                    await ex.publish(publisher, run.id, outcome)
                return
            if finished.status != "completed" or not isinstance(finished.result, dict):
                await runner.reclaim_run(git_dir, finished)
                raise RuntimeError(finished.error or "the review workflow did not complete")
            result = finished.result
            model_summary = clean_model_text(str(result.get("summary") or ""))
            prep.linked_lines = linked.summary_lines(issues, result.get("linked_issues"))
        done = await runner.conclude(git_dir, prep, result, config=config)
        done.state = done.state.model_copy(update={"units": {}})
        if model_summary and not prep.nothing_to_review:
            done.state = done.state.model_copy(update={"summary": model_summary[:6000]})
        elif not model_summary or prep.nothing_to_review:
            model_summary = "\n\n".join(part for part in (state.summary, model_summary) if part)
        await runner.reclaim_run(git_dir, details)
        state, stale = await runner.post_and_remember(
            client,
            ex.store,
            trigger.repo_full_name,
            trigger.number,
            run.id,
            prep,
            done,
            reviewed_head=prep.head,
            bot_login=ex.bot_login,
            redact=ex.redactor,
        )
        mapped = outcome_from_run(
            {
                "summary": model_summary or "Reviewed.",
                "assumptions": result.get("assumptions") or [],
                **({"blocked": result["blocked"]} if result.get("blocked") else {}),
            },
            facts if details is not None else dataclasses.replace(facts, status="completed"),
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
        summary = evidence.with_lint_note(summary, found)
        outcome = dataclasses.replace(mapped, summary=summary)
        conclusion = runner.check_conclusion(
            state,
            fail_on=config.fail_on,
            blocked=outcome.status == "blocked",
            budget_reached=done.budget is not None,
        )
        if noise.quiet_follow_up(
            trigger, prep, done, config, stale=stale, blocked=outcome.status == "blocked"
        ):
            quiet = noise.quiet_outcome(prep, outcome)
            await noise.publish_check_only(ex, publisher, quiet, conclusion=conclusion)
            return
        hidden = await mirror_line(
            state, key=ex.review_key, repo=trigger.repo_full_name, number=trigger.number
        )
        await ex.publish(publisher, run.id, outcome, hidden=hidden, conclusion=conclusion)
    except RateLimited:
        raise
    except Exception as exc:
        log.exception("the review failed")
        if git_dir is not None:
            await runner.reclaim_run(git_dir, details)
        await ex.publish(publisher, run.id, ex.failed_by(exc, run.id, "review", details, started))
