"""Writes a run's progress and outcome to GitHub, once, in the right place, redacted.

Idempotency. Every body carries `<!-- bot:run=<run id> kind=<kind> -->` and every write is
update-or-create: before creating, the publisher looks for a comment *written by the app's own
account* that carries the marker, and edits it instead. A retried or resumed run (same run id)
therefore never posts twice. Comments by anyone else are never edited, even when they carry a
copied marker.

Sticky comments. For the kinds in `STICKY_KINDS` (triage, review, fix, and the model-free
replies help, status, stop) there is one comment per (issue or PR, kind), also marked
`<!-- bot:sticky=<kind> -->`: a later run of the same kind on the same issue edits that comment,
so the issue shows the latest state rather than a stack of reports. `ask` is conversational: each
question gets its own answer comment (per run), since overwriting an earlier answer would lose it.

The comment is created when the run starts ("working", with the phases), edited as phases and
agents progress (at most every `interval` seconds), and always edited a last time with the
summary or the BLOCKED report. `start(defer=True)` holds the "working" comment back for one
interval: a run that ends sooner (a fast model) is published by one write of the final comment
instead of two, which matters because GitHub asks for at least a second between writes; a
longer run shows "working" after `interval` seconds. A command's comment gets a 👀 reaction at
once, so the person who asked sees at once that the app heard. For pull requests a check run
goes `in_progress` -> `completed` with the outcome's conclusion (or is created `completed` when
the run ended before its first progress write), found by `external_id` (the run id) first.

Review threads. A command written in a pull request review comment is answered in that
thread (`bot.publish.thread_reply`, `policies.thread_target`): the run's comment is one reply
under the thread's first comment, edited as the run goes, never sticky; when the thread can
take no reply (its first comment was deleted), the answer goes to the conversation, opening
with a line that says why. `review` is answered with the pull request's review wherever it
was asked.

Lookups cost API calls, so a caller that already knows the issue's comments (from the context,
or because the payload says there are none and this is the run's first attempt) passes them in
`known_comments`, and `known_fresh_checks=True` skips the check-run lookup the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

from bot.github.models import IssueComment
from bot.log import get_logger
from bot.publish.render import (
    Progress,
    parse_markers,
    render_check_output,
    render_outcome,
    render_progress,
)
from bot.publish.thread_reply import ThreadReply, find_reply, with_note
from bot.redact import redact
from policies.outcome import Outcome, check_conclusion
from policies.thread_target import answers_in_thread, top_level_note

if TYPE_CHECKING:
    from bot.github.client import InstallationClient

log = get_logger(__name__)

CommentKind = Literal["issue_comment", "review_comment", "review"]
"""Where a command was written: an issue or PR comment, a diff line's comment, a review."""

STICKY_KINDS: frozenset[str] = frozenset(
    {"triage", "review", "fix", "help", "status", "stop", "pause", "resume", "decide"}
)
FOLLOW_UP_KIND = "follow-up"
"""The kind of a `decide` follow-up run's comment: never sticky, so each follow-up has its own
comment and the BLOCKED report it answers is not overwritten (`decide` replies are sticky)."""


def is_sticky(kind: str) -> bool:
    return kind in STICKY_KINDS


def _own(comments: Sequence[IssueComment], bot_login: str) -> list[IssueComment]:
    return [
        c
        for c in comments
        if c.user is not None and c.user.login.lower() == bot_login.lower() and c.body
    ]


def find_run_comment(
    comments: Sequence[IssueComment], *, bot_login: str, run_id: str
) -> IssueComment | None:
    """The app's comment that carries this run's marker, whatever its kind; no sticky fallback
    (a sticky comment of the kind may belong to a later run by now)."""
    for comment in _own(comments, bot_login):
        if parse_markers(comment.body).run_id == run_id:
            return comment
    return None


def find_own_comment(
    comments: Sequence[IssueComment], *, bot_login: str, run_id: str, kind: str
) -> IssueComment | None:
    """The app's comment for this run, else (for sticky kinds) its sticky comment of this kind."""
    own = _own(comments, bot_login)
    for comment in own:
        markers = parse_markers(comment.body)
        if markers.run_id == run_id and markers.kind == kind:
            return comment
    if is_sticky(kind):
        for comment in own:
            if parse_markers(comment.body).sticky == kind:
                return comment
    return None


class Publisher:
    """Publishes one run's comment (and check run for PRs) on one issue or pull request."""

    def __init__(
        self,
        client: InstallationClient,
        *,
        run_id: str,
        kind: str,
        number: int,
        bot_login: str,
        check_name: str | None = None,
        head_sha: str | None = None,
        command_comment_id: int | None = None,
        command_comment_kind: CommentKind = "issue_comment",
        known_comments: Sequence[IssueComment] | None = None,
        known_fresh_checks: bool = False,
        redactor: Callable[[str], str] = redact,
        interval: float = 3.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.run_id = run_id
        self.kind = kind
        self.number = number
        self.bot_login = bot_login
        self.check_name = check_name
        self.head_sha = head_sha
        self.command_comment_id = command_comment_id
        self.command_comment_kind = command_comment_kind
        self._known = list(known_comments) if known_comments is not None else None
        self._fresh_checks = known_fresh_checks
        self._redact = redactor
        self.interval = interval
        self._clock = clock
        self.comment_id: int | None = None
        self.comment_url: str | None = None
        self.check_run_id: int | None = None
        self._last_body: str | None = None
        self._last_edit = float("-inf")
        self._acknowledged = False
        self._check_done = False
        self._conclusion: str | None = None
        self.thread: ThreadReply | None = None
        """The run's reply in the review thread the command was written in, if it was."""
        if (
            command_comment_kind == "review_comment"
            and command_comment_id is not None
            and answers_in_thread(kind)
        ):
            self.thread = ThreadReply(
                client,
                number=number,
                comment_id=command_comment_id,
                bot_login=bot_login,
                run_id=run_id,
            )
        self.hold_comment = False
        """Progress goes to the check run only: the comment is written by `finish` alone, so a
        run that ends up posting nothing (a quiet review) leaves it as it was."""

    def know_comments(self, comments: Sequence[IssueComment]) -> None:
        """Use this freshly read list of the issue's comments instead of listing them again."""
        if self._known is None:
            self._known = list(comments)

    @property
    def sticky(self) -> bool:
        """One comment per issue and kind; never for an answer in a review thread."""
        return is_sticky(self.kind) and self.thread is None

    async def acknowledge(self) -> None:
        """React 👀 on the command's comment; a failure here is logged, not fatal.

        Issue comments and review comments take reactions at different endpoints; a review's
        own body takes none at all, so a command given there gets no reaction.
        """
        comment_id = self.command_comment_id
        if comment_id is None or self._acknowledged or self.command_comment_kind == "review":
            return
        self._acknowledged = True
        try:
            if self.command_comment_kind == "review_comment":
                await self.client.add_review_comment_reaction(comment_id, "eyes")
            else:
                await self.client.add_reaction(comment_id, "eyes")
        except Exception as exc:  # the run matters more than the reaction
            log.warning("could not add the reaction", extra={"error": self._redact(str(exc))})

    async def _existing(self) -> IssueComment | None:
        comments = self._known
        if comments is None:
            comments = await self.client.list_issue_comments(self.number)
        return find_own_comment(
            comments, bot_login=self.bot_login, run_id=self.run_id, kind=self.kind
        )

    async def _write(self, body: str) -> None:
        body = self._redact(body)
        thread = self.thread
        if thread is not None and thread.reason is None:
            if body == self._last_body:
                return
            reply = await thread.write(body)
            if reply is not None:
                self.comment_id, self.comment_url = reply.id, reply.html_url or None
                self._last_body = body
                self._last_edit = self._clock()
                return
        if thread is not None and thread.reason is not None:
            body = with_note(body, top_level_note(thread.reason, thread.link))
        if body == self._last_body:
            return
        if self.comment_id is None:
            existing = await self._existing()
            if existing is not None:
                self.comment_id, self.comment_url = existing.id, existing.html_url or None
                if existing.body == body:
                    self._last_body = body
                    return
        if self.comment_id is None:
            created = await self.client.create_issue_comment(self.number, body)
            self.comment_id, self.comment_url = created.id, created.html_url or None
        else:
            updated = await self.client.update_issue_comment(self.comment_id, body)
            self.comment_url = updated.html_url or self.comment_url
        self._last_body = body
        self._last_edit = self._clock()

    async def start(self, progress: Progress, *, defer: bool = False) -> None:
        """Create (or take over) the comment in its "working" state; start the check run.

        With `defer`, nothing is written yet: the first `progress` call after `interval`
        writes the "working" state, and a run that ends sooner is published by `finish`
        alone, in one write (GitHub asks for a second between writes).
        """
        if defer:
            self._last_edit = self._clock()
            return
        await self._write(render_progress(progress, sticky=self.sticky, kind=self.kind))
        if self.check_name and self.head_sha:
            await self._start_check()

    async def _start_check(self, outcome: Outcome | None = None) -> None:
        """Find this run's check run by external id, else create it (completed when `outcome`)."""
        assert self.check_name is not None and self.head_sha is not None
        if not self._fresh_checks:
            found = await self.client.find_check_run(self.head_sha, self.run_id)
            if found is not None:
                self.check_run_id = found.id
                return
        if outcome is None:
            created = await self.client.create_check_run(
                name=self.check_name,
                head_sha=self.head_sha,
                status="in_progress",
                external_id=self.run_id,
            )
        else:
            created = await self.client.create_check_run(
                name=self.check_name,
                head_sha=self.head_sha,
                status="completed",
                external_id=self.run_id,
                conclusion=self._conclusion_of(outcome),
                output=self._check_output(outcome),
            )
            self._check_done = True
        self.check_run_id = created.id

    def _check_output(self, outcome: Outcome) -> dict[str, str]:
        return {k: self._redact(v) for k, v in render_check_output(outcome).items()}

    def due(self) -> bool:
        """Whether a progress edit may be made now (at most one per `interval`)."""
        return self._clock() - self._last_edit >= self.interval

    async def progress(self, progress: Progress) -> bool:
        """Edit the comment with new progress if the interval allows; True when it wrote."""
        if not self.due():
            return False
        started = self.comment_id is not None
        if not self.hold_comment:
            await self._write(render_progress(progress, sticky=self.sticky, kind=self.kind))
        if not started and self.check_run_id is None and self.check_name and self.head_sha:
            await self._start_check()
        self._last_edit = self._clock()
        return True

    async def finish(
        self, outcome: Outcome, *, hidden: str = "", conclusion: str | None = None
    ) -> None:
        """The last edit: the summary or BLOCKED report; complete the check run.

        `hidden` (app-written, e.g. a review's memory marker) is appended to the comment;
        `conclusion` overrides the check run's conclusion derived from the outcome."""
        body = render_outcome(outcome, sticky=self.sticky, kind=self.kind)
        await self._write(f"{body}\n{hidden}" if hidden else body)
        await self.finish_check(outcome, conclusion=conclusion)

    async def finish_check(self, outcome: Outcome, *, conclusion: str | None = None) -> None:
        """Complete the check run with the outcome; the comment is left as it is (`finish`
        writes it first; a quiet review writes none)."""
        self._conclusion = conclusion
        if self.check_run_id is None and self.check_name and self.head_sha:
            await self._start_check(outcome)
        if self.check_run_id is not None and not self._check_done:
            await self.client.update_check_run(
                self.check_run_id,
                status="completed",
                conclusion=self._conclusion_of(outcome),
                output=self._check_output(outcome),
            )
            self._check_done = True

    def _conclusion_of(self, outcome: Outcome) -> str:
        return self._conclusion or check_conclusion(outcome.status)

    async def reply(self, body: str) -> None:
        """A model-free reply, rendered by `render_help`, `render_status` or `render_stop`."""
        await self._write(body)

    async def amend(
        self, outcome: Outcome, *, answered: str, hidden: str = "", in_threads: bool = False
    ) -> bool:
        """Edit this run's finished comment to show it was answered (`render_outcome`'s
        `answered`); False when the comment is gone. Only the comment with this run's marker
        is edited, never a sticky one of a later run, and none is ever created. `hidden` is
        appended as `finish` appends it (a review's memory line must stay the last line).
        With `in_threads` (a pull request), the run's reply in a review thread is looked for
        too, when the conversation has no comment of the run: a run asked in a thread
        answered there."""
        comments = self._known
        if comments is None:
            comments = await self.client.list_issue_comments(self.number)
        found = find_run_comment(comments, bot_login=self.bot_login, run_id=self.run_id)
        if found is None:
            return in_threads and await self._amend_reply(outcome, answered=answered)
        body = render_outcome(outcome, sticky=self.sticky, kind=self.kind, answered=answered)
        body = self._redact(f"{body}\n{hidden}" if hidden else body)
        if found.body != body:
            await self.client.update_issue_comment(found.id, body)
        self.comment_id, self.comment_url = found.id, found.html_url or None
        self._last_body = body
        return True

    async def _amend_reply(self, outcome: Outcome, *, answered: str) -> bool:
        listed = await self.client.list_review_comments(self.number)
        found = find_reply(listed, bot_login=self.bot_login, run_id=self.run_id, reply_to=None)
        if found is None:
            return False
        body = self._redact(
            render_outcome(outcome, sticky=False, kind=self.kind, answered=answered)
        )
        if found.body != body:
            await self.client.update_review_comment(found.id, body)
        self.comment_id, self.comment_url = found.id, found.html_url or None
        self._last_body = body
        return True
