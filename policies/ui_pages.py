"""Pagination of the operator page's lists, newest first, by a cursor rather than an offset.

A cursor is the sort key of the last row shown, (timestamp, id): the next page is the rows
strictly before it, which costs the same on the thousandth page as on the first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
_CURSOR = re.compile(r"(\d{1,12}(?:\.\d{1,17})?)~([A-Za-z0-9._:-]{1,100})")


@dataclass(frozen=True, slots=True)
class Cursor:
    at: float
    key: str


def encode_cursor(at: float, key: str) -> str:
    return f"{at!r}~{key}"


def decode_cursor(text: str | None) -> Cursor | None:
    """The cursor in `text`, or None when it is absent or not one this page wrote."""
    if not text:
        return None
    match = _CURSOR.fullmatch(text)
    if match is None:
        return None
    return Cursor(at=float(match.group(1)), key=match.group(2))


def page_size(text: str | None) -> int:
    """The rows per page asked for, within 1..MAX_PAGE_SIZE; PAGE_SIZE when not a number."""
    if not text or not text.isdigit():
        return PAGE_SIZE
    return max(1, min(MAX_PAGE_SIZE, int(text)))
