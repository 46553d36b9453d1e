"""Reading GitHub's answers: JSON, lenient models, and `Link: rel="next"` pagination.

A body that is not JSON, or JSON that does not fit even the lenient models, becomes a
`GitHubError` naming what arrived, never a bare decoding or validation traceback.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from bot.github.errors import GitHubError
from bot.log import get_logger

log = get_logger(__name__)
M = TypeVar("M", bound=BaseModel)

MAX_PAGES = 30
"""At most this many pages (of 100) are read from one list; the rest is logged as truncated."""
_NEXT_LINK = re.compile(r'<([^>]+)>;\s*rel="next"')


def json_of(response: httpx.Response) -> Any:
    """The answer's JSON; a GitHubError when it is not JSON (a proxy's HTML page, say)."""
    try:
        return response.json()
    except ValueError:
        kind = response.headers.get("content-type", "no content type")
        raise GitHubError(
            response.status_code,
            f"{response.request.method} {response.request.url.path} answered with {kind}, not JSON",
        ) from None


def model_of(model: type[M], data: object) -> M:
    """Validate one object (a response or its JSON) into `model`, or raise GitHubError."""
    status = 200
    if isinstance(data, httpx.Response):
        status, data = data.status_code, json_of(data)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the body"
        raise GitHubError(
            status, f"unexpected {model.__name__} from GitHub: {where}: {first['msg']}"
        ) from None


def models_of(model: type[M], items: object) -> list[M]:
    """Validate a JSON list into models; anything but a list is a GitHubError."""
    if not isinstance(items, list):
        raise GitHubError(200, f"expected a list of {model.__name__}, got {type(items).__name__}")
    return [model_of(model, item) for item in items]


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
