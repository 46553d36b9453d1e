"""The app's answer in a pull request review thread: one reply per run and thread, edited in place.

`policies.thread_target` decides where the answer goes (under the thread's first comment, or
the pull request's conversation when the thread can take no reply); this module writes it.

Idempotency, as for every other write: the reply's body starts with the run's marker
(`<!-- bot:run=<run id> kind=<kind> -->`), and a write looks among the pull request's review
comments for the app's own reply under the same first comment carrying that run id, and edits
it instead of replying again. A retried or resumed run therefore never replies twice, however
its answer's text changed; a reply lost between GitHub and the app is found by
`InstallationClient.reply_to_review_comment` itself. Comments by anyone else are never edited.

When GitHub refuses the reply after all (the thread's first comment was deleted meanwhile:
404; a refusal: 422), the writer says so (`ThreadReply.write` returns None and `reason`
tells why): the caller answers in the conversation instead, opening with `top_level_note`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bot.github.errors import GitHubError, NotFound, RateLimited
from bot.github.models import ReviewComment
from bot.log import get_logger
from bot.publish.render import parse_markers
from policies.thread_target import (
    ASKING_COMMENT_GONE,
    FIRST_COMMENT_GONE,
    InThread,
    ThreadTarget,
    TopLevel,
    thread_target,
)

if TYPE_CHECKING:
    from bot.github.installation import InstallationClient

log = get_logger(__name__)

_HEAD_MARKERS = re.compile(r"\A(?:<!-- bot:[^\n]*-->\n)+")


def find_reply(
    comments: Sequence[ReviewComment], *, bot_login: str, run_id: str, reply_to: int | None
) -> ReviewComment | None:
    """The app's own reply that carries `run_id`'s marker: under review comment `reply_to`,
    or in any thread when `reply_to` is None."""
    for comment in comments:
        mine = comment.user is not None and comment.user.login.lower() == bot_login.lower()
        under = comment.in_reply_to_id is not None and reply_to in (None, comment.in_reply_to_id)
        if mine and under and parse_markers(comment.body).run_id == run_id:
            return comment
    return None


async def reply_in_thread(
    client: InstallationClient,
    number: int,
    reply_to: int,
    body: str,
    *,
    bot_login: str,
    run_id: str,
    comments: Sequence[ReviewComment] | None = None,
) -> ReviewComment:
    """Update-or-create the run's reply under `reply_to` (a thread's first comment) on pull
    request `number`; `comments` is the pull request's review comments when the caller just
    read them. `body` must open with the run's marker (`render_reply` and the others do)."""
    if parse_markers(body).run_id != run_id:
        raise ValueError("a thread reply must open with its run's marker")
    listed = comments if comments is not None else await client.list_review_comments(number)
    found = find_reply(listed, bot_login=bot_login, run_id=run_id, reply_to=reply_to)
    if found is None:
        return await client.reply_to_review_comment(number, reply_to, body)
    if found.body == body:
        return found
    try:
        return await client.update_review_comment(found.id, body)
    except NotFound:  # someone deleted the reply meanwhile: reply again
        return await client.reply_to_review_comment(number, reply_to, body)


def with_note(body: str, note: str) -> str:
    """`body` with `note` as its first visible line, after the markers it opens with."""
    head = _HEAD_MARKERS.match(body)
    cut = head.end() if head else 0
    return f"{body[:cut]}> {note}\n\n{body[cut:]}"


class ThreadReply:
    """One run's answer in the review thread that review comment `comment_id` is part of.

    The target is decided on the first write, from the pull request's review comments as
    GitHub lists them then; `write` keeps editing the same reply afterwards."""

    def __init__(
        self,
        client: InstallationClient,
        *,
        number: int,
        comment_id: int,
        bot_login: str,
        run_id: str,
    ) -> None:
        self.client = client
        self.number = number
        self.comment_id = comment_id
        self.bot_login = bot_login
        self.run_id = run_id
        self.reply: ReviewComment | None = None
        self.reason: str | None = None
        """Why the answer cannot go into the thread (None while it can)."""
        self.link: str | None = None
        """The asking comment's address on GitHub, once read."""
        self._target: ThreadTarget | None = None
        self._listed: list[ReviewComment] | None = None

    async def target(self) -> ThreadTarget:
        """Where the answer goes (`policies.thread_target`), read once."""
        if self._target is None:
            self._listed = await self.client.list_review_comments(self.number)
            by_id = {c.id: c for c in self._listed}
            asking = by_id.get(self.comment_id)
            self.link = (asking.html_url or None) if asking is not None else None
            self._target = thread_target(
                self.comment_id, {c.id: c.in_reply_to_id for c in self._listed}
            )
            if isinstance(self._target, TopLevel):
                self._fall_back(self._target.reason)
        return self._target

    def _fall_back(self, reason: str) -> None:
        self._target = TopLevel(reason)
        self.reason = reason
        log.info("the answer goes to the conversation, not the thread", extra={"why": reason})

    async def write(self, body: str) -> ReviewComment | None:
        """Write `body` as the run's reply in the thread; None when the thread takes no reply
        (`reason` says why, and every later write returns None too)."""
        target = await self.target()
        if not isinstance(target, InThread):
            return None
        if self.reply is not None:
            if self.reply.body != body:
                self.reply = await self.client.update_review_comment(self.reply.id, body)
            return self.reply
        try:
            self.reply = await reply_in_thread(
                self.client,
                self.number,
                target.reply_to,
                body,
                bot_login=self.bot_login,
                run_id=self.run_id,
                comments=self._listed,
            )
        except RateLimited:
            raise
        except NotFound:
            gone = target.reply_to == self.comment_id
            self._fall_back(ASKING_COMMENT_GONE if gone else FIRST_COMMENT_GONE)
            return None
        except GitHubError as exc:
            if exc.status != 422:
                raise
            self._fall_back(f"GitHub refused a reply in it ({str(exc)[:200]})")
            return None
        finally:
            self._listed = None  # a later write edits `reply`; a retry lists afresh
        return self.reply
