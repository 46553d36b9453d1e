"""Posting a review: one request, anchors checked first, one fallback, never per-comment probing.

`post_review` sends one `POST /pulls/{n}/reviews` with `commit_id` pinned to the reviewed head
and event `COMMENT`. Every inline comment's anchor was checked against the hunks before (see
`policies.diff`), so GitHub accepts it; should GitHub still answer 422, the review is sent once
more with every comment moved into its body. Sending comments one by one to find the bad one
would multiply writes and spread one review over many notifications.

`close_fixed` answers on the app's own thread of a finding the new head fixed ("Fixed in
<sha>") and resolves it; threads of anyone else are never touched.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.github.errors import GitHubError, NotFound, RateLimited
from bot.github.installation import InstallationClient
from bot.log import get_logger
from bot.workflows.review.render import Shown, comment_body, fallback_body, finding_of
from policies.diff import Anchor

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Posted:
    review_id: int | None
    inline: bool  # False when GitHub refused the inline comments and they went into the body
    comment_ids: dict[str, int]  # fingerprint -> review comment id


async def post_review(
    client: InstallationClient,
    number: int,
    *,
    head: str,
    body: str,
    inline: Sequence[tuple[Shown, Anchor]],
    bot_login: str,
    redact: Callable[[str], str],
) -> Posted:
    """One review with `inline` comments at checked anchors; see the module docstring."""
    comments: list[Mapping[str, Any]] = []
    for shown, anchor in inline:
        c: dict[str, Any] = {
            "path": anchor.path,
            "line": anchor.line,
            "side": "RIGHT",
            "body": redact(comment_body(shown)),
        }
        if anchor.start_line is not None:
            c["start_line"] = anchor.start_line
            c["start_side"] = "RIGHT"
        comments.append(c)
    try:
        review = await client.create_review(
            number, body=redact(body), event="COMMENT", commit_id=head, comments=comments or None
        )
    except RateLimited:
        raise
    except GitHubError as exc:
        if exc.status != 422 or not comments:
            raise
        log.warning(
            "GitHub refused the review's inline comments; sending them in the body instead",
            extra={"error": redact(str(exc))[:300]},
        )
        text = fallback_body(body, [shown for shown, _ in inline])
        review = await client.create_review(
            number, body=redact(text), event="COMMENT", commit_id=head
        )
        return Posted(review.id, False, {})
    ids: dict[str, int] = {}
    if comments:
        for comment in await client.list_review_comments(number):
            mine = comment.user is not None and comment.user.login.lower() == bot_login.lower()
            fingerprint = finding_of(comment.body)
            if mine and fingerprint and comment.raw.get("pull_request_review_id") == review.id:
                ids[fingerprint] = comment.id
    return Posted(review.id, True, ids)


async def close_fixed(
    client: InstallationClient,
    number: int,
    *,
    comment_id: int | None,
    thread_id: str | None,
    sha: str,
    answered: Collection[int] = (),
) -> None:
    """Say on the app's own thread that `sha` fixed it, and resolve the thread.

    `answered` holds the comments the app already replied "Fixed in" to (see
    `fixed_replies`): a retried run resolves such a thread without a second reply."""
    if comment_id is None:
        return
    if comment_id not in answered:
        await client.reply_to_review_comment(number, comment_id, f"Fixed in {sha}.")
    if thread_id is None:
        return
    try:
        await client.resolve_review_thread(thread_id)
    except NotFound:
        log.warning("the thread to resolve is gone", extra={"thread": thread_id})


async def fixed_replies(client: InstallationClient, number: int, *, bot_login: str) -> set[int]:
    """The review comments the app has already answered with "Fixed in"."""
    return {
        c.in_reply_to_id
        for c in await client.list_review_comments(number)
        if c.in_reply_to_id is not None
        and c.user is not None
        and c.user.login.lower() == bot_login.lower()
        and c.body.startswith("Fixed in ")
    }
