"""Where a pull request's review memory is kept, and what GitHub's threads say about it.

The state is read from the store; when the store has none (a new database), it is recovered
from the last line of the app's own sticky review summary, signed with a key only the app
holds (`review_state_key`): a marker anywhere else (in a file name the summary lists, an
`ask` answer quoting one, somebody else's comment) or one that does not verify is ignored,
and logged. `apply_threads` reads what people did on GitHub since the last review: a finding
whose thread a person with write permission resolved, answered "won't fix" in, or reacted 👎
to is dismissed for the life of the pull request. Everyone else's acts change nothing.
"""

from __future__ import annotations

import secrets
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

import anyio.to_thread
from cryptography.hazmat.primitives import serialization
from pydantic import ValidationError

from bot.github.errors import GitHubError
from bot.github.models import IssueComment, ReviewThread
from bot.log import get_logger
from bot.publish.render import parse_markers
from bot.store.contract import Storage
from policies.review_state import (
    ReviewState,
    StoredFinding,
    ThreadFacts,
    decode_marker,
    dismissal_reason,
    dismissers,
    encode_marker,
    mentions_marker,
    state_key,
    writers_of,
)

if TYPE_CHECKING:
    from bot.github.installation import InstallationClient
    from bot.settings import Settings

log = get_logger(__name__)

MAX_PERMISSION_LOOKUPS = 30
"""People whose permission one review reads for dismissals; past it, the rest count as none
(a thread full of reactions must not cost a request each)."""


def review_state_key(settings: Settings) -> bytes:
    """The key of the mirrored review state: from BOT_STATE_KEY, else derived from the App's
    private key (its bytes, however the PEM was written), else from the first webhook secret.
    Without any, a key of this process only: the state is then kept in the store alone, as
    nothing else could tell the app's own marker from a copy."""
    if settings.state_key is not None:
        return state_key(settings.state_key.get_secret_value().encode())
    try:
        pem = settings.private_key_pem()
    except ValueError:
        pem = None
    if pem and pem.strip():
        try:
            key = serialization.load_pem_private_key(pem.encode(), password=None)
            material = key.private_bytes(
                serialization.Encoding.DER,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
            return state_key(material)
        except (ValueError, TypeError):
            log.warning("the App private key does not load; the review state key falls back")
    webhook = settings.webhook_secrets
    if webhook:
        return state_key(webhook[0])
    return secrets.token_bytes(32)


def _is_summary(comment: IssueComment, bot_login: str) -> bool:
    """The app's own sticky review summary: its author is the app, and its body starts with a
    review run's marker and the review's sticky marker."""
    if comment.user is None or comment.user.login.lower() != bot_login.lower():
        return False
    markers = parse_markers(comment.body)
    return markers.run_id is not None and markers.kind == "review" and markers.sticky == "review"


def recover_state(
    comments: Sequence[IssueComment], *, bot_login: str, key: bytes, repo: str, number: int
) -> ReviewState | None:
    """The state on the last line of the newest sticky review summary that verifies."""
    found: ReviewState | None = None
    ignored = 0
    for comment in reversed(comments):
        if not mentions_marker(comment.body):
            continue
        state = None
        if found is None and _is_summary(comment, bot_login):
            state = decode_marker(comment.body, key=key, repo=repo, number=number)
        if state is not None:
            found = state
        else:
            ignored += 1
    if ignored:
        log.warning(
            "review-state markers that are not the app's signed summary line were ignored",
            extra={"repo": repo, "number": number, "ignored": ignored},
        )
    return found


async def load_state(
    store: Storage,
    repo: str,
    number: int,
    *,
    comments: Sequence[IssueComment] = (),
    bot_login: str,
    key: bytes | None = None,
) -> ReviewState:
    """The stored state, else the one mirrored in the app's own sticky summary (when `key`
    is given to check it), else empty."""
    raw = await anyio.to_thread.run_sync(store.get_review_state, repo, number)
    if raw is not None:
        try:
            return ReviewState.model_validate_json(raw)
        except ValidationError:
            log.warning("the stored review state is unreadable; recovering from GitHub")
    if key is not None and comments:
        state = await anyio.to_thread.run_sync(
            lambda: recover_state(comments, bot_login=bot_login, key=key, repo=repo, number=number)
        )
        if state is not None:
            log.info("review state recovered from the summary comment")
            return state
    return ReviewState()


async def save_state(store: Storage, repo: str, number: int, state: ReviewState) -> None:
    await anyio.to_thread.run_sync(
        store.put_review_state, repo, number, state.model_dump_json(exclude_defaults=True)
    )


async def mirror_line(state: ReviewState, *, key: bytes, repo: str, number: int) -> str:
    """The signed marker line for the sticky summary, encoded in a worker thread: a big state
    takes a while to pack, and the event loop keeps answering (`/healthz`, webhooks) meanwhile."""
    return await anyio.to_thread.run_sync(
        lambda: encode_marker(state, key=key, repo=repo, number=number)
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


def _threads_of_open(
    state: ReviewState, threads: Sequence[ReviewThread]
) -> list[tuple[StoredFinding, ReviewThread | None]]:
    by_comment = {t.first_comment_id: t for t in threads if t.first_comment_id is not None}
    return [(f, by_comment.get(f.comment_id) if f.comment_id else None) for f in state.findings]


async def writers_among(
    client: InstallationClient,
    state: ReviewState,
    threads: Sequence[ReviewThread],
    *,
    bot_login: str,
) -> frozenset[str]:
    """Of the people who resolved, declined or 👎'd a finding still standing, those with write,
    maintain or admin permission (lower-case logins). A permission GitHub does not tell (an
    error, a rate limit, past `MAX_PERMISSION_LOOKUPS`) counts as none: the finding stays
    open, and the next review asks again."""
    logins: dict[str, str] = {}
    for finding, thread in _threads_of_open(state, threads):
        if thread is None or finding.status == "dismissed":
            continue
        for login in dismissers(_facts(thread), bot_login):
            logins.setdefault(login.lower(), login)
    permissions: dict[str, str | None] = {}
    for n, login in enumerate(logins.values()):
        if n >= MAX_PERMISSION_LOOKUPS:
            log.info("too many people on the threads; the rest cannot dismiss findings")
            break
        try:
            permissions[login] = await client.get_collaborator_permission(login)
        except GitHubError:
            permissions[login] = None  # unreadable counts as none
    return writers_of(permissions)


def apply_threads(
    state: ReviewState,
    threads: Sequence[ReviewThread],
    *,
    bot_login: str,
    writers: Collection[str],
) -> tuple[ReviewState, list[str]]:
    """Thread ids filled in for the app's findings, and the dismissals `writers` made; returns
    the new state and a line for each finding dismissed now."""
    dismissed_now: list[str] = []
    findings: list[StoredFinding] = []
    for finding, thread in _threads_of_open(state, threads):
        if thread is None:
            findings.append(finding)
            continue
        update: dict[str, object] = {"thread_id": thread.id}
        if finding.status != "dismissed":
            reason = dismissal_reason(_facts(thread), bot_login, writers)
            if reason is not None:
                update.update(status="dismissed", resolution=reason)
                dismissed_now.append(f"{finding.title} ({reason})")
        findings.append(finding.model_copy(update=update))
    return state.model_copy(update={"findings": findings}), dismissed_now
