"""Reading GitHub's answers from githubkit: its exceptions as ours, JSON into lenient models,
and its `Link: rel="next"` pagination kept on the API's origin.

Why our lenient models (`bot.github.models`) and not githubkit's: the callers take them, and
githubkit's strict models refuse real answers that drifted from the published description
(the recorded pull request, repository and installation in `fixtures/api` all fail them:
`labels[].archived_by`, `has_discussions`, `app_slug` required). So answers are read as raw
JSON (`response.json()`) into the lenient models; githubkit's model is read only where it
parses both the recording and the fake's answer and no model of ours stands (the installation
token, `bot.github.client`).

A body that is not JSON, or JSON that does not fit even the lenient models, becomes a
`GitHubError` naming what arrived, never a bare decoding or validation traceback.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx
from githubkit import Response
from githubkit.exception import RateLimitExceeded, RequestError, RequestFailed
from githubkit.rest import Paginator
from pydantic import BaseModel, ValidationError

from bot.github._retry import error_for
from bot.github.errors import GitHubError, RateLimited, RetryableError
from bot.log import get_logger

log = get_logger(__name__)
M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

MAX_PAGES = 30
"""At most this many pages (of 100) are read from one list; the rest is logged as truncated."""


def translated(exc: Exception) -> Exception:
    """githubkit's exception (or a body it refused to send) as the one our callers handle."""
    if isinstance(exc, RateLimitExceeded):  # a GraphQL `RATE_LIMITED` error, say
        wait = exc.retry_after.total_seconds()
        return RateLimited(time.time() + wait, f"{exc.request.method} {exc.request.url.path}")
    if isinstance(exc, RequestFailed):
        return error_for(exc.response.raw_response)
    if isinstance(exc, RequestError):
        inner = exc.exc  # what our transport or auth flow raised, or httpx's own error
        if isinstance(inner, httpx.HTTPError):
            return RetryableError(0, f"{type(inner).__name__}")
        return inner if isinstance(inner, Exception) else exc
    if isinstance(exc, ValidationError):  # githubkit checks request bodies against the schema
        errors = exc.errors()
        # A field left out says most; the schema's union branches only name themselves.
        first = next((e for e in errors if e["type"] == "missing"), errors[0])
        where = ".".join(str(p) for p in first["loc"] if str(p)[:1].islower()) or "the body"
        return GitHubError(422, f"request refused before sending: {where}: {first['msg']}")
    return exc


async def answer(call: Awaitable[Response[T, Any]]) -> Response[T, Any]:
    """The answer of one githubkit call; its failure as a `GitHubError`."""
    try:
        return await call
    except (RequestError, ValidationError) as exc:
        raise translated(exc) from None


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
    """Validate one object (githubkit's response or JSON) into `model`, or raise GitHubError."""
    status = 200
    if isinstance(data, Response):
        status, data = data.status_code, json_of(data.raw_response)
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


def items_of(model: type[M], key: str | None = None) -> Callable[[Response[Any]], list[M]]:
    """githubkit's `map_func` for a page read as raw JSON into `model`: the list, or the list
    under `key` (`check_runs`)."""

    def items(response: Response[Any]) -> list[M]:
        data = json_of(response.raw_response)
        page = data.get(key) if key is not None and isinstance(data, dict) else data
        if not isinstance(page, list):
            path = response.raw_request.url.path
            raise GitHubError(200, f"GET {path}: expected a list")
        return models_of(model, page)

    return items


class Pages(Paginator[T]):
    """githubkit's paginator, following `rel="next"` only on the origin that answered (the
    token goes with it) and for at most `MAX_PAGES` pages."""

    pages = 0

    def _find_next_link(self, response: Response[Any]) -> httpx.URL | None:
        self.pages += 1
        nxt = super()._find_next_link(response)
        if nxt is None:
            return None
        here = response.raw_request.url
        if (nxt.scheme, nxt.host, nxt.port) != (here.scheme, here.host, here.port):
            log.warning("pagination link to another origin ignored", extra={"host": nxt.host})
            return None
        if self.pages >= MAX_PAGES:
            log.warning("list truncated", extra={"path": here.path, "pages": MAX_PAGES})
            return None
        return nxt

    async def collect(
        self, keep: Callable[[T], bool] | None = None, *, limit: int | None = None
    ) -> list[T]:
        """Every item, in order; with `keep`, up to (not including) the first it refuses; at
        most `limit` of them."""
        items: list[T] = []
        try:
            async for item in self:
                if (keep is not None and not keep(item)) or len(items) == limit:
                    break
                items.append(item)
        except (RequestError, ValidationError) as exc:
            raise translated(exc) from None
        return items


async def listed(
    rest: Any,
    request: Callable[..., Awaitable[Response[Any, Any]]],
    model: type[M],
    *args: Any,
    key: str | None = None,
    keep: Callable[[M], bool] | None = None,
    limit: int | None = None,
    **kwargs: Any,
) -> list[M]:
    """The items of every page of `request(*args, per_page=100, **kwargs)` as `model` (the
    list under `key` when given), as `Pages.collect(keep, limit=limit)` reads them."""
    pages: Pages[M] = Pages(rest, request, items_of(model, key), *args, per_page=100, **kwargs)
    return await pages.collect(keep, limit=limit)
