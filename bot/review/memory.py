"""Where a pull request's review memory is kept, and what GitHub's threads say about it.

The state is read from the store; when the store has none (a new database), it is recovered
from the hidden marker in the pull request's sticky summary, which the app writes itself and
only the app's own comment is trusted for. `apply_threads` reads what people did on GitHub
since the last review: a finding whose thread a person resolved, answered "won't fix" in, or
reacted 👎 to is dismissed for the life of the pull request.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio.to_thread
from pydantic import ValidationError

from bot.github.models import IssueComment, ReviewThread
from bot.log import get_logger
from bot.storage import Storage
from policies.review_state import (
    ReviewState,
    StoredFinding,
    ThreadFacts,
    decode_marker,
    dismissal_reason,
)

log = get_logger(__name__)


async def load_state(
    store: Storage,
    repo: str,
    number: int,
    *,
    comments: Sequence[IssueComment] = (),
    bot_login: str,
) -> ReviewState:
    """The stored state, else the one mirrored in the app's own sticky summary, else empty."""
    raw = await anyio.to_thread.run_sync(store.get_review_state, repo, number)
    if raw is not None:
        try:
            return ReviewState.model_validate_json(raw)
        except ValidationError:
            log.warning("the stored review state is unreadable; recovering from GitHub")
    for comment in comments:
        mine = comment.user is not None and comment.user.login.lower() == bot_login.lower()
        if mine:
            state = decode_marker(comment.body)
            if state is not None:
                log.info("review state recovered from the summary comment")
                return state
    return ReviewState()


async def save_state(store: Storage, repo: str, number: int, state: ReviewState) -> None:
    await anyio.to_thread.run_sync(
        store.put_review_state, repo, number, state.model_dump_json(exclude_defaults=True)
    )


def _facts(thread: ReviewThread) -> ThreadFacts:
    comments = list(thread.comments)
    first = comments[0] if comments else None
    return ThreadFacts(
        thread_id=thread.id,
        resolved=thread.is_resolved,
        resolved_by=thread.resolved_by,
        outdated=thread.is_outdated,
        replies=tuple((c.author or "", c.body) for c in comments[1:]),
        thumbs_down_by=first.thumbs_down_by if first is not None else (),
    )


def apply_threads(
    state: ReviewState, threads: Sequence[ReviewThread], *, bot_login: str
) -> tuple[ReviewState, list[str]]:
    """Thread ids filled in for the app's findings, and the dismissals people made; returns
    the new state and a line for each finding dismissed now."""
    by_comment = {t.first_comment_id: t for t in threads if t.first_comment_id is not None}
    dismissed_now: list[str] = []
    findings: list[StoredFinding] = []
    for finding in state.findings:
        thread = by_comment.get(finding.comment_id) if finding.comment_id else None
        if thread is None:
            findings.append(finding)
            continue
        update: dict[str, object] = {"thread_id": thread.id}
        if finding.status != "dismissed":
            reason = dismissal_reason(_facts(thread), bot_login)
            if reason is not None:
                update.update(status="dismissed", resolution=reason)
                dismissed_now.append(f"{finding.title} ({reason})")
        findings.append(finding.model_copy(update=update))
    return state.model_copy(update={"findings": findings}), dismissed_now
