"""The operator page's sign-in, decided without I/O: the token check, signed session cookies
and CSRF tokens.

A session is a random id the server hands out at sign-in. The cookie carries the id, when it
was issued and an HMAC of both under a key derived from BOT_UI_TOKEN, so every receiver
process (`bot serve --receivers N`) accepts it without shared memory; changing the token
signs everyone out. The CSRF token is an HMAC of the session id under the same key: a page of
this session can show it, another site cannot compute it.

The signature says the app issued a cookie, not that its session is still on: the store keeps
the sessions signed in (`bot.ui.auth.Gate`), and signing out ends one there, so a copy of its
cookie signs no one in afterwards, in any process.

Cookies and CSRF values come from the browser, or from anyone: each is checked for the exact
shape the app writes before any comparison, and compared as bytes, so no value (non-ASCII
text, `²`, a number too long for `int`) is more than a refusal.
"""

from __future__ import annotations

import hashlib
import hmac
import re

SESSION_SECONDS = 12 * 3600
"""How long a sign-in lasts."""
_SESSION_ID = re.compile(r"[0-9a-f]{32}")
_COOKIE = re.compile(r"([0-9a-f]{32})\.([0-9]{1,12})\.([0-9a-f]{64})")
_MAC = re.compile(r"[0-9a-f]{64}")


def session_key(ui_token: str) -> bytes:
    """The key that signs cookies and CSRF tokens, derived from (never equal to) the token."""
    return hmac.new(ui_token.encode(), b"bot ui session key v1", hashlib.sha256).digest()


def token_matches(expected: str, given: str) -> bool:
    """Whether `given` is the configured token, in time that does not depend on where the two
    differ or on their lengths (both are hashed first)."""
    if not expected:
        return False
    want = hashlib.sha256(expected.encode()).digest()
    got = hashlib.sha256(given.encode("utf-8", "surrogatepass")).digest()
    return hmac.compare_digest(want, got)


def _mac(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def _same_mac(want: str, given: str) -> bool:
    """`given` is the hex MAC `want`, compared in constant time; False for any other shape."""
    return _MAC.fullmatch(given) is not None and hmac.compare_digest(want.encode(), given.encode())


def make_cookie(key: bytes, session_id: str, issued_at: int) -> str:
    """The cookie's value for `session_id` issued at `issued_at` (seconds since the epoch)."""
    if not _SESSION_ID.fullmatch(session_id):
        raise ValueError("a session id is 32 lower-case hex digits")
    body = f"{session_id}.{issued_at}"
    return f"{body}.{_mac(key, 'cookie:' + body)}"


def read_cookie(key: bytes, value: str | None, now: float) -> str | None:
    """The session id of a well-formed, correctly signed and unexpired cookie, else None."""
    match = _COOKIE.fullmatch(value or "")
    if match is None:
        return None
    session_id, issued_at, mac = match.groups()
    if not _same_mac(_mac(key, f"cookie:{session_id}.{issued_at}"), mac):
        return None
    issued = int(issued_at)
    if issued > now + 60 or now - issued > SESSION_SECONDS:
        return None
    return session_id


def csrf_token(key: bytes, session_id: str) -> str:
    """The CSRF token every form of `session_id`'s pages carries."""
    return _mac(key, "csrf:" + session_id)


def csrf_matches(key: bytes, session_id: str, given: str | None) -> bool:
    """Whether `given` is the session's CSRF token; False for None and any other shape."""
    return given is not None and _same_mac(csrf_token(key, session_id), given)
