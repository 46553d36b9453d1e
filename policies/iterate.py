"""Iterating on the app's own pull requests: a writer's review there asks for one more commit.

Two ways in, both on a pull request the app opened from a `bot/` branch of the same
repository (never a fork's):

- a review submitted as `changes_requested`, or as `commented` (which counts when it has
  inline comments: the run finds out), whose body gives the app no command of its own;
- a comment on the pull request's conversation that mentions the app with words that are not
  a command (`@app please rename it`), or that mentions it in passing; a bare `@app` and every
  command keep doing what they do.

`asked` says whether an event is such a request (the trigger policy routes it, and the
actor's write permission is checked as for every command). Once the run has read the pull
request, the review's inline comments and their threads, `plan` decides what it does: at most
`fix.max_iterations` iterations per pull request (then a note), nothing when the head moved
since the review (a person pushed: say so, keep their commit, wait for the next review),
nothing when every comment is resolved, and the first `MAX_COMMENTS` unresolved comments by
position (file, then line), the rest named. The reply texts are here too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from policies.commands import UNKNOWN, Command, strip_non_prose
from policies.event import Event
from policies.untrusted_text import code_span

__all__ = [
    "ITERATE",
    "MAX_COMMENTS",
    "Go",
    "Iteration",
    "PullHead",
    "ReviewFacts",
    "ReviewNote",
    "Stop",
    "addressed_reply",
    "asked",
    "is_own_pull",
    "left_out_note",
    "not_addressed_reply",
    "plan",
]

ITERATE = "iterate"
"""The command name an iteration's Trigger carries (its workflow is `fix`)."""
MAX_COMMENTS = 30
"""Review comments one iteration addresses; the rest are named, not addressed."""
_BODY_CAP = 2000
_STATES = frozenset({"changes_requested", "commented"})
_LISTED = 20  # comments left out that are named one by one


@dataclass(frozen=True, slots=True)
class Iteration:
    """What the event asks the app to address: a review, or a comment's own text."""

    source: Literal["review", "comment"]
    text: str


def _account(login: str | None) -> str:
    return (login or "").strip().lower().removesuffix("[bot]")


def _is_app(login: str | None, app_slug: str) -> bool:
    return bool(login) and _account(login) == _account(app_slug)


def _same_repo(head_repo: str | None, repo: str | None) -> bool:
    return head_repo is not None and repo is not None and head_repo.lower() == repo.lower()


def is_own_pull(
    author: str | None, head_ref: str | None, head_repo: str | None, repo: str | None, app_slug: str
) -> bool:
    """Whether a pull request is the app's own: opened by the app, from a `bot/` branch of
    the same repository (a fork's head never is)."""
    return (
        _is_app(author, app_slug)
        and (head_ref or "").startswith("bot/")
        and _same_repo(head_repo, repo)
    )


def _words_besides_mention(body: str, app_slug: str) -> bool:
    slug = re.escape(app_slug.strip().lstrip("@"))
    rest = re.sub(rf"@{slug}(?:\[bot\])?", " ", strip_non_prose(body), flags=re.IGNORECASE)
    return any(char.isalnum() for char in rest)


def asked(event: Event, command: Command | None, *, app_slug: str) -> Iteration | None:
    """The iteration `event` asks for, or None when it asks for none (see the module
    docstring); `command` is what the comment or review body gives the app, if anything."""
    if event.target_kind != "pull_request" or event.action not in ("submitted", "created"):
        return None
    text = event.comment_body or ""
    if event.name == "pull_request_review":
        if (event.review_state or "").lower() not in _STATES:
            return None
        if not is_own_pull(
            event.author_login,
            event.head_ref,
            event.head_repo_full_name,
            event.repo_full_name,
            app_slug,
        ):
            return None
        if command is not None and command.name != UNKNOWN and command.raw:
            return None  # the review gives a command: that command runs
        return Iteration("review", text)
    if event.name != "issue_comment" or not _is_app(event.author_login, app_slug):
        return None
    if command is None or (command.name != UNKNOWN and command.raw):
        return None  # not addressed to the app, or a command: that command runs
    if not _words_besides_mention(text, app_slug):
        return None  # a bare mention asks for help
    return Iteration("comment", text)


@dataclass(frozen=True, slots=True)
class PullHead:
    """The pull request as the run reads it from GitHub."""

    repo: str
    author: str | None
    head_ref: str
    head_sha: str
    head_repo: str | None


@dataclass(frozen=True, slots=True)
class ReviewFacts:
    """The review the iteration answers, from the delivery."""

    id: int
    reviewer: str
    state: str
    commit_id: str | None
    body: str


@dataclass(frozen=True, slots=True)
class ReviewNote:
    """One inline comment of the review, and whether its thread is resolved."""

    id: int
    path: str
    line: int | None
    body: str
    resolved: bool = False

    @property
    def where(self) -> str:
        return code_span(self.path) + (f" line {self.line}" if self.line else "")


@dataclass(frozen=True, slots=True)
class Go:
    """Run the fix with `request`; reply in the threads of `comments`; name `left_out`."""

    request: str
    comments: tuple[ReviewNote, ...]
    left_out: tuple[ReviewNote, ...]
    reviewer: str


@dataclass(frozen=True, slots=True)
class Stop:
    """Change nothing; say `reason` (nothing at all when `quiet`)."""

    reason: str
    quiet: bool = False


def _flat(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _BODY_CAP else flat[:_BODY_CAP] + " …"


def _request(reviewer: str, body: str, comments: Sequence[ReviewNote], source: str) -> str:
    if source == "comment":
        return _flat(body)
    parts = [f"Address every point of @{reviewer}'s review of this pull request."]
    if body.strip():
        parts.append(f"The review says: {_flat(body)}")
    for n, note in enumerate(comments, 1):
        parts.append(f"({n}) On {note.where}: {_flat(note.body)}")
    return " ".join(parts)


def plan(
    *,
    app_slug: str,
    pull: PullHead,
    actor: str,
    iteration: Iteration,
    review: ReviewFacts | None,
    comments: Sequence[ReviewNote],
    done: int,
    max_iterations: int,
) -> Go | Stop:
    """What one iteration does, from the facts the run read (see the module docstring).

    `done` counts the iterations already made on this pull request; `comments` are the
    review's inline comments (none for a comment's request)."""
    if not is_own_pull(pull.author, pull.head_ref, pull.head_repo, pull.repo, app_slug):
        if not _same_repo(pull.head_repo, pull.repo):
            why = "its head is in a fork, and the app never pushes to a fork"
        else:
            why = f"its head {code_span(pull.head_ref)} is not a `bot/` branch the app opened"
        return Stop(f"Nothing was changed: this pull request is not one of the app's own ({why}).")
    if done >= max_iterations:
        return Stop(
            f"Nothing was changed: this pull request has had {done} iterations, the most "
            f"`fix.max_iterations` in `.github/bot.yml` allows ({max_iterations}). Push the "
            "remaining changes yourself, or raise the limit."
        )
    if review is not None and review.commit_id and review.commit_id != pull.head_sha:
        return Stop(
            f"Nothing was changed: the head moved since this review (reviewed "
            f"`{review.commit_id[:12]}`, now `{pull.head_sha[:12]}`), and the commit pushed "
            "since is kept as it is. Review the new head and the next review will be addressed."
        )
    open_ones = sorted(
        (c for c in comments if not c.resolved), key=lambda c: (c.path, c.line or 0, c.id)
    )
    reviewer = review.reviewer if review is not None else actor
    body = review.body if review is not None else iteration.text
    if review is not None and not open_ones:
        if review.state.lower() == "commented":
            # A comment review asks for changes only through its inline comments.
            return Stop("Nothing to do: the review has no unresolved inline comment.", quiet=True)
        if not body.strip():
            return Stop("Nothing was changed: every comment of this review is resolved.")
    chosen, rest = tuple(open_ones[:MAX_COMMENTS]), tuple(open_ones[MAX_COMMENTS:])
    request = _request(reviewer, body, chosen, iteration.source)
    return Go(request=request, comments=chosen, left_out=rest, reviewer=reviewer)


def left_out_note(left_out: Sequence[ReviewNote]) -> str:
    """The sentence naming the comments past the first MAX_COMMENTS (empty when none)."""
    if not left_out:
        return ""
    named = ", ".join(note.where for note in left_out[:_LISTED])
    more = len(left_out) - _LISTED
    tail = f" and {more} more" if more > 0 else ""
    return (
        f"{len(left_out)} more comments were not addressed (one iteration takes the first "
        f"{MAX_COMMENTS} by position): {named}{tail}. The next review can ask for them again."
    )


def addressed_reply(sha: str, count: int) -> str:
    """The reply in a thread whose comment the pushed commit addresses."""
    what = "this comment" if count == 1 else f"the {count} comments of this review"
    return f"Addressed in `{sha[:7]}`: one commit for {what}."


def not_addressed_reply(status: str, reason: str) -> str:
    """The reply in a thread when the iteration pushed nothing: what happened instead."""
    why = {
        "blocked": "the change needs a maintainer's decision first (see the app's comment)",
        "no_changes": "the fix made no change that was pushed (see the app's comment)",
    }.get(status, f"the fix did not finish: {reason}" if reason else "the fix did not finish")
    return f"Not addressed: {why}."
