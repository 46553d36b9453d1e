"""Where the answer to a command written in a pull request review thread goes: pure.

A command in a review comment (a new thread, or a reply in one) is answered in that thread.
GitHub takes a reply only to a thread's first comment (a reply to a reply is refused), so the
answer goes to the first comment: the triggering comment itself when it starts the thread,
else the comment it replies to (`in_reply_to_id`, which GitHub always sets to the thread's
first comment). When there is no thread left to answer in, the answer goes to the pull
request's conversation with a line saying why, rather than being lost:

- the comment that asked was deleted before the answer (nothing to reply under);
- the thread's first comment was deleted (its replies stay, but take no reply).

An outdated thread, or one on a removed line, still takes replies on GitHub: it is answered
in place (the context says what became of its lines).

`review` is the one command answered elsewhere wherever it is asked: its answer is a review
of the whole pull request and the sticky summary that carries its signed memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

TOP_LEVEL_KINDS: frozenset[str] = frozenset({"review"})
"""Comment kinds whose answer is never a thread reply (see the module docstring)."""

ASKING_COMMENT_GONE = "the review comment that asked was deleted"
FIRST_COMMENT_GONE = (
    "the first comment of its review thread was deleted, and GitHub takes replies only to "
    "a thread's first comment"
)


@dataclass(frozen=True, slots=True)
class InThread:
    """Reply under review comment `reply_to`, the thread's first comment."""

    reply_to: int


@dataclass(frozen=True, slots=True)
class TopLevel:
    """Answer in the pull request's conversation instead, saying `reason`."""

    reason: str


ThreadTarget = InThread | TopLevel


def answers_in_thread(kind: str) -> bool:
    """Whether a command's answer of this comment kind goes into the thread it was asked in."""
    return kind not in TOP_LEVEL_KINDS


def thread_target(comment_id: int, listed: Mapping[int, int | None]) -> ThreadTarget:
    """Where the answer to review comment `comment_id` goes; `listed` is every review comment
    of the pull request as GitHub lists it now (id -> its `in_reply_to_id`)."""
    if comment_id not in listed:
        return TopLevel(ASKING_COMMENT_GONE)
    first = listed[comment_id]
    if first is None:
        return InThread(comment_id)
    if first not in listed:
        return TopLevel(FIRST_COMMENT_GONE)
    return InThread(first)


def top_level_note(reason: str, link: str | None = None) -> str:
    """The line an answer that could not go into its thread opens with."""
    where = f"the [review thread]({link})" if link else "the review thread"
    return f"Answered here rather than in {where}: {reason}."
