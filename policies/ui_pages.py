"""The operator page's parameters: pagination of its lists, newest first, by a cursor rather
than an offset, and the numbers and text its links and forms carry.

A cursor is the sort key of the last row shown, (timestamp, id): the next page is the rows
strictly before it, which costs the same on the thousandth page as on the first.

A parameter is either absent (the default applies) or one the page could have written; any
other value is a `BadParameter`, which the page answers 400. Numbers are ASCII digits only:
`str.isdigit` also accepts `²` and `٣`, which `int` then refuses or reads as another number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
_CURSOR = re.compile(r"([0-9]{1,12}(?:\.[0-9]{1,17})?)~([A-Za-z0-9._:-]{1,100})")
_COUNT = re.compile(r"[0-9]{1,9}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class BadParameter(ValueError):
    """A parameter the page did not write; the message names it (never its value)."""


@dataclass(frozen=True, slots=True)
class Cursor:
    at: float
    key: str


def encode_cursor(at: float, key: str) -> str:
    return f"{at!r}~{key}"


def decode_cursor(text: str | None) -> Cursor | None:
    """The cursor in `text`, or None when it is absent; BadParameter when it is not one this
    page wrote."""
    if not text:
        return None
    match = _CURSOR.fullmatch(text)
    if match is None:
        raise BadParameter("`before` is not a cursor this page wrote")
    return Cursor(at=float(match.group(1)), key=match.group(2))


def count(text: str | None, *, name: str, default: int, low: int, high: int) -> int:
    """The whole number in `text` within low..high (a larger one is `high`), `default` when
    it is absent or empty; BadParameter when it is anything but ASCII digits (at most nine,
    so `int` never meets a number too long to read)."""
    if not text:
        return default
    if _COUNT.fullmatch(text) is None:
        raise BadParameter(f"`{name}` must be a whole number")
    return max(low, min(high, int(text)))


def page_size(text: str | None) -> int:
    """The rows per page asked for, within 1..MAX_PAGE_SIZE; PAGE_SIZE when absent."""
    return count(text, name="size", default=PAGE_SIZE, low=1, high=MAX_PAGE_SIZE)


def plain_text(value: str) -> bool:
    """Whether a text parameter (a filter, an id in the path) may reach the store: no control
    characters, which no name the app stores has and Postgres refuses in text (NUL)."""
    return _CONTROL.search(value) is None
