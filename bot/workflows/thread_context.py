"""The context of a command written in a pull request review thread: what that thread is about.

`with_thread` adds, in front of the run's context (`bot.runs.context`), in the same fence:

- the thread's place and state, then its comments, first to last (at most
  `MAX_THREAD_COMMENTS`, the rest counted), each in its own block, fenced as trusted or
  untrusted by its author exactly as the conversation's comments are;
- the code the thread is on: the file at the pull request's head around the thread's lines
  (`AROUND` lines either side), with line numbers; a thread on a removed line shows the file
  at the base instead, and an outdated thread (GitHub no longer places it: `line` is null)
  says so and shows its original lines at the head;
- for the app's own thread, the finding it posted (title, severity, category, place, status)
  as the review memory holds it (`bot.workflows.review.memory`), so "why is this unsafe?" is
  answered about that finding, and `fix` fixes that finding.

Nothing changes when the command was not written in a review thread, or when the asking
comment is gone (the answer then says why in the conversation: `policies.thread_target`).
`thread_request` is the request a `fix` given in a thread carries: the thread, plus the words
written after `fix`, if any.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bot.github.models import ReviewComment
from bot.log import get_logger
from bot.runs.context import (
    FIELD_LIMIT,
    Part,
    RunContext,
    assemble,
    is_trusted,
    plain,
    sanitize,
    truncate,
)
from bot.workflows.review.memory import load_state
from bot.workflows.review.render import finding_of
from policies.review_state import StoredFinding
from policies.thread_target import InThread, thread_target

if TYPE_CHECKING:
    from bot.github.installation import InstallationClient
    from bot.store.contract import Storage
    from policies.event import Trigger

log = get_logger(__name__)

MAX_THREAD_COMMENTS = 30
AROUND = 12
THREAD_BUDGET_TOKENS = 8_000
EXCERPT_LIMIT = 6_000
IN_THREAD = ", in one of its review threads (the review thread blocks of the context)"
"""Added to a run's target when it was asked in a review thread (app-written: outside the
fence, so no path or name of the thread's)."""


@dataclass(frozen=True, slots=True)
class Thread:
    """A review thread as the pull request's review comments list it, first comment first."""

    first: ReviewComment
    comments: tuple[ReviewComment, ...]
    left_out: int
    """Comments past `MAX_THREAD_COMMENTS`, not shown."""

    @property
    def path(self) -> str:
        return self.first.path

    def field(self, name: str) -> Any:
        return self.first.raw.get(name)

    @property
    def outdated(self) -> bool:
        """GitHub no longer places the thread on a line of the current diff."""
        return self.first.line is None

    @property
    def removed_line(self) -> bool:
        """The thread is on the old side of the diff (a line the change removed)."""
        return (self.first.side or "RIGHT") == "LEFT"

    def lines(self) -> tuple[int, int] | None:
        """The first and last line the thread is on (its original lines when outdated)."""
        end = self.first.line if self.first.line is not None else self.field("original_line")
        if not isinstance(end, int):
            return None
        start = self.field("start_line") if self.first.line is not None else None
        if start is None and self.first.line is None:
            start = self.field("original_start_line")
        return (start if isinstance(start, int) and start <= end else end), end

    def where(self) -> str:
        span = self.lines()
        if span is None:
            return plain(self.path)
        first, last = span
        return plain(self.path) + (f":{first}" if first == last else f":{first}-{last}")


def comment_in_thread(trigger: Trigger, payload: Mapping[str, Any] | None) -> int | None:
    """The review comment the trigger's command was written in, when it was one."""
    comment = payload.get("comment") if payload else None
    if not isinstance(comment, Mapping) or "pull_request_review_id" not in comment:
        return None
    if trigger.target_kind != "pull_request" or comment.get("id") != trigger.comment_id:
        return None
    return trigger.comment_id


def thread_of(comments: Sequence[ReviewComment], comment_id: int) -> Thread | None:
    """The thread review comment `comment_id` is in; None when it cannot take a reply."""
    target = thread_target(comment_id, {c.id: c.in_reply_to_id for c in comments})
    if not isinstance(target, InThread):
        return None
    first = next(c for c in comments if c.id == target.reply_to)
    replies = [c for c in comments if c.in_reply_to_id == first.id]
    shown = [first, *replies][:MAX_THREAD_COMMENTS]
    return Thread(first, tuple(shown), 1 + len(replies) - len(shown))


def excerpt(text: str, lines: tuple[int, int] | None) -> str:
    """The file's lines around `lines` (all of a short file), numbered as GitHub numbers them."""
    all_lines = text.split("\n")
    if all_lines and all_lines[-1] == "":
        all_lines.pop()
    first, last = lines if lines is not None else (1, min(len(all_lines), 2 * AROUND))
    low, high = max(1, first - AROUND), min(len(all_lines), last + AROUND)
    width = len(str(high))
    shown = [
        f"{n:>{width}}{'>' if first <= n <= last else ' '} {all_lines[n - 1]}"
        for n in range(low, high + 1)
    ]
    return truncate("\n".join(shown), EXCERPT_LIMIT)


def finding_text(finding: StoredFinding) -> str:
    place = plain(finding.path) + (f":{finding.line}" if finding.line else "")
    lines = [
        f"Title: {plain(finding.title)}",
        f"Severity: {plain(finding.severity)}; category: {plain(finding.category)}",
        f"On: {place}; raised at head {plain(finding.head)[:12] or 'unknown'}",
        f"Status in the review memory: {finding.status}",
    ]
    if finding.resolution:
        lines.append(f"Resolution: {plain(finding.resolution)}")
    return "\n".join(lines)


def thread_parts(
    thread: Thread,
    *,
    code: str | None,
    code_at: str,
    code_trusted: bool,
    finding: StoredFinding | None,
    actor: str,
    actor_can_write: bool,
) -> list[Part]:
    """The thread's comments, the code it is on and the app's finding, as parts."""
    state = []
    if thread.outdated:
        state.append(
            "The thread is outdated: the lines it was written on changed since, and GitHub "
            "no longer places it on the current diff."
        )
    if thread.removed_line:
        state.append("The thread is on a line the change removes (the old side of the diff).")
    head = [f"Review thread on {thread.where()}, {len(thread.comments)} comments", *state]
    if thread.left_out:
        head.append(f"{thread.left_out} later comments of the thread are not shown.")
    parts = [Part(f"review thread {thread.first.id}", "\n".join(head), code_trusted, priority=0)]
    for position, comment in enumerate(thread.comments):
        text = sanitize(comment.body)
        if not text:
            continue
        parts.append(
            Part(
                # Each comment in its own block, labelled by its author's trust.
                f"thread comment {comment.id}",
                truncate(text, FIELD_LIMIT),
                _trusted(comment, actor, actor_can_write),
                plain(comment.user.login if comment.user else None) or None,
                priority=1 + (position if position == 0 else len(thread.comments) - position),
            )
        )
    hunk = thread.field("diff_hunk")
    if isinstance(hunk, str) and hunk.strip():
        parts.append(
            Part(
                "thread diff hunk",
                truncate(sanitize(hunk, markup=False), FIELD_LIMIT),
                code_trusted,
                priority=2,
            )
        )
    if code is not None:
        parts.append(
            Part(
                f"code of the thread ({code_at})",
                f"{plain(thread.path)}\n{excerpt(sanitize(code, markup=False), thread.lines())}",
                code_trusted,
                priority=2,
            )
        )
    if finding is not None:
        parts.append(
            Part("the app's finding in this thread", finding_text(finding), True, priority=1)
        )
    return parts


def _trusted(comment: ReviewComment, actor: str, actor_can_write: bool) -> bool:
    user = comment.user
    return is_trusted(
        user.login if user else None,
        comment.author_association,
        is_bot=bool(user and user.is_bot),
        actor=actor,
        actor_can_write=actor_can_write,
    )


async def read_thread(client: InstallationClient, number: int, comment_id: int) -> Thread | None:
    return thread_of(await client.list_review_comments(number), comment_id)


async def _finding(
    store: Storage, repo: str, number: int, thread: Thread, *, bot_login: str
) -> StoredFinding | None:
    """The app's finding its own thread is about, as the review memory holds it."""
    user = thread.first.user
    if user is None or user.login.lower() != bot_login.lower():
        return None
    fingerprint = finding_of(thread.first.body)
    if fingerprint is None:
        return None
    state = await load_state(store, repo, number, bot_login=bot_login)
    found = next((f for f in state.findings if f.fingerprint == fingerprint), None)
    if found is None:  # not in the memory (a new database): what the comment itself says
        return StoredFinding(fingerprint=fingerprint, path=thread.path, line=thread.first.line)
    return found


async def with_thread(
    client: InstallationClient,
    trigger: Trigger,
    payload: Mapping[str, Any] | None,
    context: RunContext,
    *,
    store: Storage,
    bot_login: str,
    actor_can_write: bool = True,
) -> tuple[RunContext, Thread | None]:
    """`context` with the review thread the command was written in in front (see the module
    docstring), and that thread; unchanged and None when there is none."""
    comment_id = comment_in_thread(trigger, payload)
    if comment_id is None:
        return context, None
    thread = await read_thread(client, trigger.number, comment_id)
    if thread is None:
        return context, None
    ref = context.base_sha if thread.removed_line else context.head_sha
    code = await client.get_file_text(thread.path, ref=ref) if ref else None
    at = "the base" if thread.removed_line else "the head"
    finding = await _finding(
        store, trigger.repo_full_name, trigger.number, thread, bot_login=bot_login
    )
    parts = thread_parts(
        thread,
        code=code,
        code_at=f"at {at}",
        code_trusted=context.author_trusted,
        finding=finding,
        actor=trigger.actor,
        actor_can_write=actor_can_write,
    )
    blocks, included, omitted = assemble(
        parts, fence=context.fence, budget_tokens=THREAD_BUDGET_TOKENS
    )
    log.info("the review thread is in the context", extra={"comments": len(thread.comments)})
    return (
        dataclasses.replace(
            context,
            blocks=f"{blocks}\n\n{context.blocks}",
            included=(*included, *context.included),
            omitted=(*omitted, *context.omitted),
        ),
        thread,
    )


def thread_request(thread: Thread, words: str) -> str:
    """What a `fix` written in a review thread asks for: that thread, and `words` (the text
    after `fix`) when given."""
    ask = (
        f"Fix what the review thread on {thread.where()} is about (the review thread block "
        "in the context: the finding or the comment, on its lines)"
    )
    return f"{ask}: {words}" if words.strip() else f"{ask}."
