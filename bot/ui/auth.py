"""Who may see the operator's page: the sign-in, its rate limit, the session and its CSRF token,
and the security headers every answer under /ui/ carries.

Signing in with BOT_UI_TOKEN starts a session in the store and sets its signed cookie
(`policies.ui_session`): HttpOnly, SameSite=Strict, path /ui/, Secure when the request came
over https. A cookie signs in only while its session is in the store, so signing out ends it
in every receiver process, and a copy of the cookie kept anywhere is worthless afterwards.
Signing in with GitHub (`bot.ui.oauth`) starts the same kind of session, with the login and
the rule of BOT_UI_ALLOW that let the person in; every `recheck_s` seconds a request asks
GitHub whether that rule still holds, and the session ends the first time it does not (a
person taken off the team is refused at their next request past the interval). Revoking a
session from `/ui/sessions` ends it the same way. The key signing cookies comes from the
shared token, else from the OAuth client's secret.

A client address (the socket's peer: the app reads no proxy headers) with `MAX_FAILURES`
failed sign-ins in the last `WINDOW` seconds gets 429 for every wrong token until the oldest
of them ages out. The right token signs in all the same: behind a proxy every browser shares
one address, and anyone's wrong guesses must not lock the operator out. What keeps guessing
from succeeding is the token's length (`bot doctor` warns under 16 characters); the limit
keeps a guesser from being served, and logged, like a mistyped sign-in.

Every form that changes anything (stop, retry, revoke, sign out) must carry the session's
CSRF token.
"""

from __future__ import annotations

import functools
import secrets
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio.to_thread
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bot.github.errors import GitHubError
from bot.log import get_logger
from bot.store.contract import Storage
from bot.store.ui_access import handle_of
from policies.ui_allow import Rule, parse_grant
from policies.ui_session import (
    SESSION_SECONDS,
    csrf_matches,
    csrf_token,
    make_cookie,
    read_cookie,
    session_key,
    token_matches,
)

if TYPE_CHECKING:
    from bot.github.oauth import GitHubSignIn

log = get_logger(__name__)

COOKIE = "bot_ui"
COOKIE_PATH = "/ui/"
MAX_FAILURES = 5
WINDOW = 60.0
RECHECK_S = 60.0
"""How often a GitHub sign-in's grant is asked of GitHub again (BOT_UI_RECHECK_SECONDS)."""
SHARED_TOKEN = "(shared token)"
_MAX_CLIENTS = 10_000  # addresses remembered at once; the oldest are forgotten past this

CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
)


class SignInLimiter:
    """Failed sign-ins per client address, over a sliding window: the last `max_failures` of
    each address, so one that keeps failing stays limited and costs a bounded deque."""

    def __init__(
        self,
        *,
        max_failures: int = MAX_FAILURES,
        window: float = WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_failures = max_failures
        self.window = window
        self.clock = clock
        self._failures: dict[str, deque[float]] = {}

    def _recent(self, client: str) -> deque[float]:
        now = self.clock()
        times = self._failures.get(client)
        if times is None:
            return deque()
        while times and now - times[0] >= self.window:
            times.popleft()
        if not times:
            del self._failures[client]
        return times

    def blocked_for(self, client: str) -> float:
        """Seconds until `client` may try again; 0 when it may now."""
        times = self._recent(client)
        if len(times) < self.max_failures:
            return 0.0
        return max(0.0, self.window - (self.clock() - times[0]))

    def failed(self, client: str) -> None:
        if client not in self._failures and len(self._failures) >= _MAX_CLIENTS:
            self._failures.pop(next(iter(self._failures)))
        times = self._failures.setdefault(client, deque(maxlen=self.max_failures))
        times.append(self.clock())


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    csrf: str
    login: str = ""
    """The GitHub login signed in; '' for the shared token."""

    @property
    def actor(self) -> str:
        """Who the audit says did it: the login, or the shared token (a name no GitHub
        login can have)."""
        return self.login or SHARED_TOKEN


class AccessUnchecked(Exception):
    """GitHub did not answer whether a signed-in person still has access (answered 503;
    the session stays, and the next request asks again)."""


class Gate:
    """The token, the key derived from it, the sessions in the store, the sign-in limiter of
    one process, and for GitHub sign-in the checks a session's grant is asked again by."""

    def __init__(
        self,
        token: str,
        sessions: Storage,
        *,
        sign_in: GitHubSignIn | None = None,
        rules: tuple[Rule, ...] = (),
        key_secret: str = "",
        recheck_s: float = RECHECK_S,
        limiter: SignInLimiter | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not token and sign_in is None:
            raise ValueError(
                "the operator's page needs BOT_UI_TOKEN, or signing in with GitHub "
                "(BOT_OAUTH_CLIENT_ID, BOT_OAUTH_CLIENT_SECRET, BOT_UI_ALLOW, BOT_UI_URL)"
            )
        self._token = token
        # The shared token, else the OAuth client's secret: every receiver derives the same.
        self.key = session_key(token or key_secret)
        self.sessions = sessions
        self.sign_in = sign_in
        self.rules = rules
        self.recheck_s = recheck_s
        self.limiter = limiter or SignInLimiter()
        self.clock = clock

    @property
    def takes_token(self) -> bool:
        return bool(self._token)

    def token_ok(self, given: str) -> bool:
        return token_matches(self._token, given)

    async def start(self, *, login: str = "", grant: str = "", client: str = "") -> str:
        """A new session, recorded in the store; the value of its cookie."""
        session_id, issued = secrets.token_hex(16), int(self.clock())
        await anyio.to_thread.run_sync(
            functools.partial(
                self.sessions.start_ui_session,
                session_id,
                float(issued + SESSION_SECONDS),
                login=login,
                grant=grant,
                client=client,
            )
        )
        return make_cookie(self.key, session_id, issued)

    async def session(self, request: Request) -> Session | None:
        """The request's session: a cookie the app signed, whose session is still on, and
        for a GitHub sign-in whose grant still holds (asked again every `recheck_s`)."""
        sid = read_cookie(self.key, request.cookies.get(COOKIE), self.clock())
        if sid is None:
            return None
        row = await anyio.to_thread.run_sync(self.sessions.ui_session, sid)
        if row is None:
            return None
        if row.login and not await self._still_allowed(
            row.id, row.login, row.grant, row.checked_at
        ):
            return None
        return Session(id=sid, csrf=csrf_token(self.key, sid), login=row.login)

    async def _still_allowed(self, sid: str, login: str, grant: str, checked_at: float) -> bool:
        parsed = parse_grant(grant)
        if self.sign_in is None or parsed is None or parsed[0] not in self.rules:
            # GitHub sign-in turned off, or the rule that let the person in taken out of
            # BOT_UI_ALLOW: the session ends.
            await self._withdraw(sid, login, "its rule is no longer in BOT_UI_ALLOW")
            return False
        now = self.clock()
        if now - checked_at < self.recheck_s:
            return True
        try:
            holds = await self.sign_in.holds(grant, login)
        except GitHubError as exc:
            log.warning(
                "operator page: access not confirmed", extra={"login": login, "error": str(exc)}
            )
            raise AccessUnchecked(login) from exc
        if not holds:
            await self._withdraw(sid, login, f"GitHub no longer confirms {grant}")
            return False
        await anyio.to_thread.run_sync(self.sessions.ui_session_checked, sid, now)
        return True

    async def _withdraw(self, sid: str, login: str, why: str) -> None:
        def end() -> None:
            if self.sessions.end_ui_session(sid):
                self.sessions.audit(login, "access withdrawn", handle_of(sid), why)

        await anyio.to_thread.run_sync(end)
        log.info("operator page: access withdrawn", extra={"login": login, "reason": why})

    async def end(self, session: Session) -> None:
        await anyio.to_thread.run_sync(self.sessions.end_ui_session, session.id)

    def csrf_ok(self, session: Session, given: str | None) -> bool:
        return csrf_matches(self.key, session.id, given)


def cookie_settings(request: Request) -> dict[str, object]:
    """The attributes of the session cookie for this request."""
    return {
        "key": COOKIE,
        "max_age": SESSION_SECONDS,
        "path": COOKIE_PATH,
        "httponly": True,
        "samesite": "strict",
        "secure": request.url.scheme == "https",
    }


def client_address(request: Request) -> str:
    return request.client.host if request.client is not None else "unknown"


class SecurityHeaders:
    """Adds SECURITY_HEADERS to every response of the wrapped app (replacing any it set)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._names = {name for name, _ in SECURITY_HEADERS}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k not in self._names]
                message = {**message, "headers": [*kept, *SECURITY_HEADERS]}
            await send(message)

        await self.app(scope, receive, send_with_headers)
