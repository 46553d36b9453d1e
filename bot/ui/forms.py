"""What every group of the operator page's routes shares: the page, its URL prefix, reading
the page's small forms, and the answer to a form without its CSRF token.

The route groups (`bot.ui.access`, `bot.ui.lists`, `bot.ui.detail`, `bot.ui.reports`,
`bot.ui.retry`) are `PageRoutes` built on `bot.ui.app.OperatorPage`'s plumbing (render, page,
signed_in, not_found, audit), each with its `routes()`.
"""

from __future__ import annotations

import urllib.parse
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response

if TYPE_CHECKING:
    from bot.ui.app import OperatorPage

__all__ = ["MAX_FORM", "PageRoutes", "forbidden", "read_form"]

MAX_FORM = 4096


async def read_form(request: Request) -> dict[str, str]:
    """An url-encoded form's fields (the first of each); the page's forms are small, so a
    longer body is read no further and counts as empty."""
    if not request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        return {}
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM:
            return {}
    try:
        fields = urllib.parse.parse_qs(body.decode("utf-8", "replace"), max_num_fields=10)
    except ValueError:  # more fields than any of the page's forms has
        return {}
    return {key: values[0] for key, values in fields.items() if values}


def forbidden() -> Response:
    return Response(
        "forbidden: this form needs its CSRF token", status_code=403, media_type="text/plain"
    )


class PageRoutes:
    """A group of the page's routes, on the page's plumbing."""

    def __init__(self, page: OperatorPage, *, prefix: str) -> None:
        self.page = page
        self.prefix = prefix
        self.form = read_form
        self.forbidden = forbidden
