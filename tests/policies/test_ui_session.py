"""policies/ui_session.py: the token check, signed session cookies, CSRF tokens."""

from __future__ import annotations

import pytest

from policies.ui_session import (
    SESSION_SECONDS,
    csrf_matches,
    csrf_token,
    make_cookie,
    read_cookie,
    session_key,
    token_matches,
)

KEY = session_key("the-token")
SID = "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize(
    ("expected", "given", "ok"),
    [
        pytest.param("the-token", "the-token", True, id="same"),
        pytest.param("the-token", "the-tokem", False, id="one-letter-off"),
        pytest.param("the-token", "the-token ", False, id="longer"),
        pytest.param("the-token", "", False, id="empty-given"),
        pytest.param("", "", False, id="no-token-configured"),
        pytest.param("the-token", "\udcff", False, id="lone-surrogate"),
    ],
)
def test_token_matches(expected: str, given: str, ok: bool) -> None:
    assert token_matches(expected, given) is ok


def test_a_cookie_reads_back_its_session_until_it_expires() -> None:
    cookie = make_cookie(KEY, SID, 1000)
    assert read_cookie(KEY, cookie, 1000.0) == SID
    assert read_cookie(KEY, cookie, 1000.0 + SESSION_SECONDS) == SID
    assert read_cookie(KEY, cookie, 1001.0 + SESSION_SECONDS) is None


@pytest.mark.parametrize(
    "mangle",
    [
        pytest.param(lambda c: c[:-1] + ("0" if c[-1] != "0" else "1"), id="signature"),
        pytest.param(lambda c: c.replace(".1000.", ".1001."), id="issued-at"),
        pytest.param(lambda c: "f" + c[1:], id="session-id"),
        pytest.param(lambda c: c + ".x", id="extra-part"),
        pytest.param(lambda c: "", id="empty"),
        pytest.param(lambda c: c[:-1] + "\u00e9", id="non-ascii-signature"),
        pytest.param(lambda c: c.replace(".1000.", ".1\u00b200."), id="superscript-time"),
        pytest.param(lambda c: c.replace(".1000.", f".{'9' * 5000}."), id="long-time"),
        pytest.param(lambda c: c.upper(), id="upper-case"),
        pytest.param(lambda c: c + "\n", id="trailing-newline"),
    ],
)
def test_a_changed_cookie_is_refused(mangle: object) -> None:
    cookie = make_cookie(KEY, SID, 1000)
    assert callable(mangle)
    assert read_cookie(KEY, mangle(cookie), 1000.0) is None


def test_a_cookie_under_another_token_or_from_the_future_is_refused() -> None:
    cookie = make_cookie(KEY, SID, 1000)
    assert read_cookie(session_key("other-token"), cookie, 1000.0) is None
    assert read_cookie(KEY, make_cookie(KEY, SID, 5000), 1000.0) is None


def test_a_session_id_must_be_32_hex() -> None:
    with pytest.raises(ValueError):
        make_cookie(KEY, "not-hex", 1)


def test_csrf_token_is_per_session_and_per_key() -> None:
    token = csrf_token(KEY, SID)
    assert csrf_matches(KEY, SID, token)
    assert not csrf_matches(KEY, "f" * 32, token)
    assert not csrf_matches(session_key("other"), SID, token)
    assert not csrf_matches(KEY, SID, None)
    assert not csrf_matches(KEY, SID, "")
    assert not csrf_matches(KEY, SID, token[:-1] + "\u00e9")
    assert not csrf_matches(KEY, SID, "\u00b2")
    assert not csrf_matches(KEY, SID, token.upper())
    assert "the-token" not in token
