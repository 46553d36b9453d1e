"""One iteration on the app's own pull request: a writer's review (or `@app <words>`) addressed.

The trigger policy routes it (`policies.iterate.asked`: a `fix` run whose command is
`iterate`, for writers only). The run

1. reads the pull request, the review (from the delivery), the review's inline comments
   (`GET .../reviews/{id}/comments`) and the pull request's threads (GraphQL), and counts the
   iterations already made here (runs whose recorded arguments carry `iteration`);
2. lets `policies.iterate.plan` decide: a note and nothing more past `fix.max_iterations`,
   when the head moved since the review (a person pushed: their commit stays, the next review
   is addressed), or when the pull request is not the app's own; nothing at all for a
   `commented` review whose comments are all resolved; otherwise the first 30 unresolved
   comments by position become one request (the rest are named in the app's comment);
3. runs the `fix` flow with that request (`bot.workflows.fix.flow.fix_outcome`): one commit
   on the pull request's own branch, pushed without force, so a person's push during the run
   makes GitHub refuse it and nothing of theirs is lost (the run says so);
4. replies in each addressed thread ("Addressed in `abc1234`: ..." or why not; replies are
   found again rather than posted twice on a retry), asks the reviewer to review again, and
   publishes the outcome in the app's `fix` comment.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from pydantic import BaseModel, ConfigDict

from bot.github.errors import GitHubError, RateLimited
from bot.log import get_logger
from bot.workflows.fix import gitops
from bot.workflows.fix.flow import app_committer, fix_outcome, run_fix
from policies.iterate import (
    ITERATE,
    Go,
    Iteration,
    PullHead,
    ReviewFacts,
    ReviewNote,
    Stop,
    addressed_reply,
    left_out_note,
    not_addressed_reply,
    plan,
)
from policies.outcome import Outcome
from policies.untrusted_text import code_span

if TYPE_CHECKING:
    from bot.github.installation import InstallationClient
    from bot.publish.publisher import Publisher
    from bot.runs.flows import RunHost
    from bot.store.contract import RunRecord
    from policies.event import Trigger

log = get_logger(__name__)

ITERATION_ARG = "iteration"
"""The key of the run's recorded arguments that marks an iteration (what `done` counts)."""
_COUNTED = 1000  # runs on one pull request read back to count its iterations


class _Login(BaseModel):
    model_config = ConfigDict(extra="ignore")
    login: str = ""


class _Review(BaseModel):
    """The review of a `pull_request_review` delivery (lenient: extra keys ignored)."""

    model_config = ConfigDict(extra="ignore")
    id: int
    user: _Login | None = None
    state: str = ""
    commit_id: str | None = None
    body: str | None = None


def review_of(payload: Mapping[str, Any] | None, actor: str) -> ReviewFacts | None:
    """The delivery's review, or None for a comment's request (or a review it cannot read)."""
    raw = payload.get("review") if payload else None
    if not isinstance(raw, Mapping):
        return None
    try:
        review = _Review.model_validate(raw)
    except ValueError:
        return None
    return ReviewFacts(
        id=review.id,
        reviewer=(review.user.login if review.user else "") or actor,
        state=review.state,
        commit_id=review.commit_id,
        body=review.body or "",
    )


async def fix_or_iterate(
    ex: RunHost,
    client: InstallationClient,
    trigger: Trigger,
    run: RunRecord,
    payload: Mapping[str, Any] | None,
    publisher: Publisher,
    started: float,
) -> None:
    """The `fix` flow's entry in the table of flows: an iteration, or a `fix` command."""
    if trigger.command == ITERATE:
        await run_iterate(ex, client, trigger, run, payload, publisher, started)
    else:
        await run_fix(ex, client, trigger, run, payload, publisher, started)


def _iterations(ex: RunHost, trigger: Trigger, run_id: str) -> int:
    runs = ex.store.runs_on_target(
        trigger.repo_full_name, "pull_request", trigger.number, exclude=run_id, limit=_COUNTED
    )
    return sum(1 for r in runs if r.workflow == "fix" and ITERATION_ARG in (r.args or {}))


async def _notes(
    client: InstallationClient, number: int, review: ReviewFacts | None
) -> list[ReviewNote]:
    """The review's inline comments that start a thread, each with its thread's state."""
    if review is None:
        return []
    comments = await client.list_review_comments_of(number, review.id)
    firsts = [c for c in comments if c.in_reply_to_id is None]
    if not firsts:
        return []
    resolved = {t.first_comment_id for t in await client.review_threads(number) if t.is_resolved}
    return [ReviewNote(c.id, c.path, c.line, c.body, resolved=c.id in resolved) for c in firsts]


async def run_iterate(
    ex: RunHost,
    client: InstallationClient,
    trigger: Trigger,
    run: RunRecord,
    payload: Mapping[str, Any] | None,
    publisher: Publisher,
    started: float,
) -> None:
    """One iteration, published: see the module docstring."""
    # The head is about to move: a check run on it would describe a commit that is gone.
    publisher.head_sha = None
    config = (await ex.repo_config(client)).fix
    pull = await client.get_pull(trigger.number)
    head = PullHead(
        repo=trigger.repo_full_name,
        author=pull.user.login if pull.user else None,
        head_ref=pull.head.ref,
        head_sha=pull.head.sha,
        head_repo=pull.head.repo.full_name if pull.head.repo else None,
    )
    review = review_of(payload, trigger.actor)
    pushed_before = await _own_earlier_push(ex, client, run, head, review)
    if pushed_before is not None:
        # This run pushed the head in an attempt that was cut short: plan on the head it
        # started from, so its own commit is not taken for a person's push.
        head = dataclasses.replace(head, head_sha=pushed_before)
    iteration = Iteration("review" if review is not None else "comment", trigger.args)
    done = await anyio.to_thread.run_sync(_iterations, ex, trigger, run.id)
    decided = plan(
        app_slug=ex.app_slug,
        pull=head,
        actor=trigger.actor,
        iteration=iteration,
        review=review,
        comments=await _notes(client, trigger.number, review),
        done=done,
        max_iterations=config.max_iterations,
    )
    if isinstance(decided, Stop):
        await _stopped(ex, publisher, run.id, decided)
        return
    extra = {
        ITERATION_ARG: {
            "n": done + 1,
            "review_id": review.id if review is not None else None,
            "comments": [note.id for note in decided.comments],
            "head": head.head_sha,
        }
    }
    if pushed_before is not None:
        sha: str | None = pull.head.sha
        outcome = Outcome(
            status="succeeded",
            summary=f"Pushed `{pull.head.sha[:12]}` onto {code_span(head.head_ref)} in an "
            "earlier attempt of this run, which stopped before it could reply; replied now.",
            run_id=run.id,
            workflow="fix",
            branches=(head.head_ref,),
        )
    else:
        asked = dataclasses.replace(trigger, args=decided.request)
        outcome, _ = await fix_outcome(
            ex, client, asked, run, payload, publisher, started, ex.repo_config, extra=extra
        )
        sha = await _pushed(ex, client, outcome, head)
        if sha is None:
            outcome = await _explain_refusal(ex, client, outcome, head)
    await _reply_in_threads(ex, client, trigger.number, decided, outcome, sha)
    if sha is not None:
        await _ask_again(client, trigger.number, decided.reviewer)
    note = _note(decided, done + 1, config.max_iterations, sha)
    await ex.publish(publisher, run.id, dataclasses.replace(outcome, note=note))


async def _own_earlier_push(
    ex: RunHost,
    client: InstallationClient,
    run: RunRecord,
    head: PullHead,
    review: ReviewFacts | None,
) -> str | None:
    """The head this run started from, when an earlier attempt of it (its recorded
    `iteration`, for the same review) already pushed the pull request's current head: one
    commit of the app's own on top of that head. None otherwise, and always for a person's
    commit, which the mirror lacks or which another identity committed."""
    earlier = (run.args or {}).get(ITERATION_ARG)
    if not isinstance(earlier, dict):
        return None
    start = earlier.get("head")
    if not isinstance(start, str) or start == head.head_sha:
        return None
    if earlier.get("review_id") != (review.id if review is not None else None):
        return None
    git_dir = ex.mirrors.path_for(client.owner, client.repo)
    _, email = app_committer(ex.app_slug)
    if not await gitops.made_by_on(git_dir, head.head_sha, start, email):
        return None
    log.info("this run pushed the head before", extra={"head": head.head_sha[:12]})
    return start


async def _stopped(ex: RunHost, publisher: Publisher, run_id: str, stop: Stop) -> None:
    if stop.quiet:
        log.info("nothing to iterate on", extra={"reason": stop.reason})
        await ex.record(run_id, "skipped", None)
        return
    outcome = Outcome(status="skipped", summary=stop.reason, run_id=run_id, workflow="fix")
    await ex.publish(publisher, run_id, outcome)


async def _pushed(
    ex: RunHost, client: InstallationClient, outcome: Outcome, head: PullHead
) -> str | None:
    """The commit this run pushed onto the branch (its parent the head it started on), or
    None when it pushed nothing."""
    if outcome.status != "succeeded" or head.head_ref not in outcome.branches:
        return None
    now = (await ex.mirrors.remote_branches(client, head.head_ref)).get(head.head_ref)
    if now is None or now == head.head_sha:
        return None
    git_dir = ex.mirrors.path_for(client.owner, client.repo)
    try:
        parent = await gitops.resolve(git_dir, f"{now}^")
    except Exception:  # a commit the mirror lacks: someone else's, pushed after ours
        return None
    return now if parent == head.head_sha else None


async def _explain_refusal(
    ex: RunHost, client: InstallationClient, outcome: Outcome, head: PullHead
) -> Outcome:
    """A fix that failed because a person pushed to the branch while it ran: say so (their
    commit is kept: the app never forces a push)."""
    if outcome.status != "failed":
        return outcome
    try:
        now = (await ex.mirrors.remote_branches(client, head.head_ref)).get(head.head_ref)
    except RateLimited:
        raise
    except Exception:
        return outcome
    if now is None or now == head.head_sha:
        return outcome
    moved = f"{code_span(head.head_ref)} moved while this ran (from `{head.head_sha[:12]}` to `{now[:12]}`)"
    summary = (
        f"Nothing was pushed: {moved}, and the app never forces a push, so the commit pushed "
        "since is kept as it is. Review the new head and the next review will be addressed on "
        "top of it."
    )
    return dataclasses.replace(outcome, summary=summary, error=moved)


async def _reply_in_threads(
    ex: RunHost,
    client: InstallationClient,
    number: int,
    decided: Go,
    outcome: Outcome,
    sha: str | None,
) -> None:
    count = len(decided.comments)
    for note in decided.comments:
        if sha is not None:
            text = addressed_reply(sha, count)
        else:
            text = not_addressed_reply(outcome.status, outcome.error or "")
        try:
            await client.reply_to_review_comment(number, note.id, ex.redactor(text))
        except RateLimited:
            raise
        except GitHubError as exc:  # a deleted comment; the others still get theirs
            log.warning("could not reply in a thread", extra={"error": str(exc)[:200]})


async def _ask_again(client: InstallationClient, number: int, reviewer: str) -> None:
    """Ask the reviewer to review again; GitHub refuses the pull request's author and people
    who are not collaborators (422), which the run notes in its log only."""
    if not reviewer:
        return
    try:
        await client.request_reviewers(number, [reviewer])
    except RateLimited:
        raise
    except GitHubError as exc:
        log.info("could not ask for the review again", extra={"error": str(exc)[:200]})


def _note(decided: Go, n: int, limit: int, sha: str | None) -> str:
    count = len(decided.comments)
    what = f"{count} comment{'s' if count != 1 else ''} of @{decided.reviewer}'s review"
    if not decided.comments:
        what = f"@{decided.reviewer}'s request"
    line = f"Iteration {n} of {limit}: {what}"
    line += f", addressed in `{sha[:12]}`." if sha is not None else "."
    rest = left_out_note(decided.left_out)
    return f"{line} {rest}" if rest else line
