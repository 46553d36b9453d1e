"""What the operator page's lists say of a delivery or run beside its ids, read from the
delivery's payload: who sent it, the command a comment gave, the title of its issue or pull
request. The payload is untrusted JSON: anything of the wrong shape is simply not shown.
"""

from __future__ import annotations

from dataclasses import dataclass

COMMAND_CHARS = 160
"""The most characters of a command line a list shows."""
TITLE_CHARS = 120

_COMMENTED = ("issue_comment", "pull_request_review_comment", "discussion_comment")


@dataclass(frozen=True, slots=True)
class Context:
    sender: str | None = None
    command: str | None = None
    """The line of a comment that addresses the app (or its first line), for comment events."""
    title: str | None = None


def _get(value: object, *keys: str) -> object:
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def command_line(body: str, app_slug: str | None) -> str | None:
    """The first line of a comment that mentions `@app_slug` (or, without a slug, any
    mention) or starts with `/`; else its first line that is not blank."""
    lines = [line.strip() for line in body.splitlines() if line.strip()]
    if not lines:
        return None
    mention = f"@{app_slug.lower()}" if app_slug else "@"
    for line in lines:
        if mention in line.lower() or line.startswith("/"):
            return _cut(line, COMMAND_CHARS)
    return _cut(lines[0], COMMAND_CHARS)


def context_of(event: str, payload: object, app_slug: str | None = None) -> Context:
    """The context of one delivery of `event` (its parsed body, any JSON)."""
    sender = _text(_get(payload, "sender", "login"))
    title = _text(_get(payload, "pull_request", "title")) or _text(_get(payload, "issue", "title"))
    command = None
    body = _text(_get(payload, "comment", "body"))
    if event in _COMMENTED and body is not None:
        command = command_line(body, app_slug)
    return Context(
        sender=sender,
        command=command,
        title=None if title is None else _cut(title, TITLE_CHARS),
    )
