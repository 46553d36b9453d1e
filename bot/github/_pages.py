"""Reading GitHub's list answers: model validation and `Link: rel="next"` pagination."""

from __future__ import annotations

import re
from typing import TypeVar

import httpx
from pydantic import BaseModel

from bot.github.errors import GitHubError
from bot.log import get_logger

log = get_logger(__name__)
M = TypeVar("M", bound=BaseModel)

MAX_PAGES = 30
"""At most this many pages (of 100) are read from one list; the rest is logged as truncated."""
_NEXT_LINK = re.compile(r'<([^>]+)>;\s*rel="next"')


def models_of(model: type[M], items: object) -> list[M]:
    """Validate a JSON list into models; anything but a list is a GitHubError."""
    if not isinstance(items, list):
        raise GitHubError(200, f"expected a list of {model.__name__}, got {type(items).__name__}")
    return [model.model_validate(item) for item in items]


def next_link(response: httpx.Response) -> str | None:
    """The `rel="next"` page, only on the origin that answered (the token goes with it)."""
    match = _NEXT_LINK.search(response.headers.get("link", ""))
    if match is None:
        return None
    nxt, here = httpx.URL(match.group(1)), response.request.url
    if (nxt.scheme, nxt.host, nxt.port) != (here.scheme, here.host, here.port):
        log.warning("pagination link to another origin ignored", extra={"host": nxt.host})
        return None
    return match.group(1)
