"""policies/ui_pages.py: cursors and page sizes."""

from __future__ import annotations

import pytest

from policies.ui_pages import (
    MAX_PAGE_SIZE,
    PAGE_SIZE,
    Cursor,
    decode_cursor,
    encode_cursor,
    page_size,
)


@pytest.mark.parametrize(
    ("at", "key"),
    [
        pytest.param(1764547200.123456, "72d3a1b0-1c2d-11f0-8a3b-0123456789ab", id="guid"),
        pytest.param(1.0, "wf_0123456789ab", id="run-id"),
    ],
)
def test_a_cursor_reads_back(at: float, key: str) -> None:
    assert decode_cursor(encode_cursor(at, key)) == Cursor(at=at, key=key)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(None, id="none"),
        pytest.param("", id="empty"),
        pytest.param("12~", id="no-key"),
        pytest.param("x~abc", id="not-a-number"),
        pytest.param("1~a b", id="space-in-key"),
        pytest.param("1~' OR 1=1 --", id="sql"),
    ],
)
def test_a_foreign_cursor_is_none(text: str | None) -> None:
    assert decode_cursor(text) is None


@pytest.mark.parametrize(
    ("text", "size"),
    [
        pytest.param(None, PAGE_SIZE, id="default"),
        pytest.param("10", 10, id="asked"),
        pytest.param("0", 1, id="at-least-one"),
        pytest.param("99999", MAX_PAGE_SIZE, id="at-most-the-max"),
        pytest.param("-5", PAGE_SIZE, id="not-a-count"),
    ],
)
def test_page_size(text: str | None, size: int) -> None:
    assert page_size(text) == size
