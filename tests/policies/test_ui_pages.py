"""policies/ui_pages.py: cursors and page sizes."""

from __future__ import annotations

import pytest

from policies.ui_pages import (
    MAX_PAGE_SIZE,
    PAGE_SIZE,
    BadParameter,
    Cursor,
    count,
    decode_cursor,
    encode_cursor,
    page_size,
    plain_text,
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


@pytest.mark.parametrize("text", [pytest.param(None, id="none"), pytest.param("", id="empty")])
def test_no_cursor_is_the_first_page(text: str | None) -> None:
    assert decode_cursor(text) is None


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("12~", id="no-key"),
        pytest.param("x~abc", id="not-a-number"),
        pytest.param("1~a b", id="space-in-key"),
        pytest.param("1~' OR 1=1 --", id="sql"),
        pytest.param("\u0661\u0662~abc", id="arabic-digits"),
        pytest.param("1.\u00b2~abc", id="superscript"),
    ],
)
def test_a_foreign_cursor_is_a_bad_parameter(text: str) -> None:
    with pytest.raises(BadParameter):
        decode_cursor(text)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        pytest.param(None, PAGE_SIZE, id="default"),
        pytest.param("10", 10, id="asked"),
        pytest.param("0", 1, id="at-least-one"),
        pytest.param("", PAGE_SIZE, id="empty"),
        pytest.param("99999", MAX_PAGE_SIZE, id="at-most-the-max"),
    ],
)
def test_page_size(text: str | None, size: int) -> None:
    assert page_size(text) == size


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("-5", id="negative"),
        pytest.param("\u00b2", id="superscript"),
        pytest.param("\u0663", id="arabic-digit"),
        pytest.param("1_000", id="underscore"),
        pytest.param(" 7", id="space"),
        pytest.param("7.0", id="fraction"),
        pytest.param("1" * 10, id="ten-digits"),
        pytest.param("9" * 5000, id="past-int-limit"),
    ],
)
def test_anything_but_a_few_ascii_digits_is_a_bad_count(text: str) -> None:
    with pytest.raises(BadParameter, match="`days`"):
        count(text, name="days", default=30, low=1, high=366)
    with pytest.raises(BadParameter, match="`size`"):
        page_size(text)


def test_a_count_is_clamped() -> None:
    assert count("0", name="days", default=30, low=1, high=366) == 1
    assert count("999999999", name="days", default=30, low=1, high=366) == 366
    assert count(None, name="days", default=30, low=1, high=366) == 30


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        pytest.param("octo/app", True, id="name"),
        pytest.param("caf\u00e9 \u00b2", True, id="non-ascii"),
        pytest.param("\x00", False, id="nul"),
        pytest.param("a\nb", False, id="newline"),
        pytest.param("a\x7f", False, id="del"),
    ],
)
def test_plain_text(text: str, ok: bool) -> None:
    assert plain_text(text) is ok
