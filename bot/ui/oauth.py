"""Signing in to the operator's page with GitHub: `/ui/oauth/start` and `/ui/oauth/callback`.

Start hands out a random `state`, keeps it in the store (`bot.store.ui_access`) and in a
signed cookie of this browser, and sends the browser to GitHub's authorize page with the
App's client id and the callback on BOT_UI_URL. The callback is refused unless it came back
to BOT_UI_URL's host, carries a state of this browser's cookie that the store still holds
(taken there at once: a replayed callback finds nothing), and a code GitHub trades for a
person whom a rule of BOT_UI_ALLOW lets in. The state cookie is SameSite=Lax, because the
callback is a navigation from github.com: a Strict cookie would not come back with it. The
session cookie it sets is Strict, as the token's is, so the callback answers with a page of
its own that moves on to /ui/ (a meta refresh): a redirect would still be part of the
navigation github.com started, and carry no Strict cookie.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import urllib.parse
from typing import TYPE_CHECKING

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from bot.github.errors import GitHubError
from bot.github.oauth import GitHubSignIn, SignInRefused
from bot.log import get_logger
from bot.ui.auth import client_address, cookie_settings
from policies.ui_allow import STATE_SECONDS, Rule, callback_url, state_shape
from policies.ui_session import make_cookie, read_cookie

if TYPE_CHECKING:
    from bot.ui.app import OperatorPage

__all__ = ["SignInRoutes"]

log = get_logger(__name__)

STATE_COOKIE = "bot_ui_state"
STATE_PATH = "/ui/oauth/"
_CODE = re.compile(r"[A-Za-z0-9_-]{1,100}")


class SignInRoutes:
    """The GitHub sign-in of one page: its client, rules and public origin."""

    def __init__(
        self,
        page: OperatorPage,
        sign_in: GitHubSignIn,
        rules: tuple[Rule, ...],
        *,
        origin: str,
        web_url: str,
    ) -> None:
        self.page = page
        self.sign_in = sign_in
        self.rules = rules
        self.origin = origin
        self.web_url = web_url.rstrip("/")
        # The state cookie's own key: a state cookie is never a session cookie.
        self._key = hmac.new(page.gate.key, b"sign-in state", hashlib.sha256).digest()

    def _here(self, request: Request) -> bool:
        """Whether the request reached the app under BOT_UI_URL's host (and port)."""
        wanted = urllib.parse.urlsplit(self.origin).netloc
        return request.headers.get("host", "").lower() == wanted

    async def start(self, request: Request) -> Response:
        if not self._here(request):  # the state cookie must live where the callback lands
            return RedirectResponse(f"{self.origin}{STATE_PATH}start", status_code=303)
        state = secrets.token_hex(16)
        now = self.page.gate.clock()
        await anyio.to_thread.run_sync(
            self.page.store.add_sign_in_state, state, float(now + STATE_SECONDS)
        )
        query = urllib.parse.urlencode(
            {
                "client_id": self.sign_in.client_id,
                "redirect_uri": callback_url(self.origin),
                "state": state,
                "allow_signup": "false",
            }
        )
        response = RedirectResponse(
            f"{self.web_url}/login/oauth/authorize?{query}", status_code=303
        )
        response.set_cookie(
            key=STATE_COOKIE,
            value=make_cookie(self._key, state, int(now)),
            max_age=STATE_SECONDS,
            path=STATE_PATH,
            httponly=True,
            samesite="lax",
            secure=self.origin.startswith("https://"),
        )
        return response

    def _refused(self, request: Request, status: int, why: str) -> Response:
        body = self.page.render("sign_in.html", request, None, **self.page.sign_in_context(why))
        response = HTMLResponse(body, status_code=status)
        response.delete_cookie(STATE_COOKIE, path=STATE_PATH)
        return response

    async def callback(self, request: Request) -> Response:
        client = client_address(request)
        if not self._here(request):
            log.warning(
                "operator page: sign-in callback for another host", extra={"client": client}
            )
            return self._refused(request, 400, f"Sign in at {self.origin}/ui/, not on this host.")
        q = request.query_params
        if q.get("error"):
            said = re.sub(r"[^a-z_]", "", q["error"])[:40]
            return self._refused(request, 400, f"GitHub did not sign you in ({said}).")
        state = q.get("state")
        mine = read_cookie(self._key, request.cookies.get(STATE_COOKIE), self.page.gate.clock())
        if not state_shape(state) or mine is None or not hmac.compare_digest(mine, str(state)):
            log.warning("operator page: sign-in state refused", extra={"client": client})
            return self._refused(
                request, 400, "That sign-in was not started in this browser; start again."
            )
        if not await anyio.to_thread.run_sync(self.page.store.take_sign_in_state, str(state)):
            log.warning("operator page: sign-in state used or expired", extra={"client": client})
            return self._refused(request, 400, "That sign-in was used or expired; start again.")
        code = q.get("code", "")
        if not _CODE.fullmatch(code):
            return self._refused(request, 400, "GitHub sent no usable code; start again.")
        try:
            person = await self.sign_in.person(code, callback_url(self.origin))
            grant = await self.sign_in.first_grant(self.rules, person)
        except SignInRefused as exc:
            return self._refused(request, 400, str(exc))
        except GitHubError as exc:
            log.warning("operator page: sign-in check failed", extra={"error": str(exc)})
            return self._refused(request, 502, "GitHub did not answer the sign-in; try again.")
        if grant is None:
            await self.page.audit(
                person.login, "sign-in refused", "", "no rule of BOT_UI_ALLOW", request
            )
            log.warning("operator page: sign-in refused", extra={"login": person.login})
            allowed = ", ".join(str(rule) for rule in self.rules)
            return self._refused(
                request, 403, f"{person.login} may not sign in here (allowed: {allowed})."
            )
        cookie = await self.page.gate.start(login=person.login, grant=grant, client=client)
        await self.page.audit(person.login, "sign-in", "", f"GitHub, as {grant}", request)
        log.info("operator page: signed in with GitHub", extra={"login": person.login})
        # A page of the app's own that moves on by itself, not a redirect: the way back
        # started on github.com, and a browser sends no SameSite=Strict cookie on a
        # navigation another site started, redirects included; this page's is the app's.
        body = self.page.render("signed_in.html", request, None, login=person.login)
        response = HTMLResponse(body)
        settings = cookie_settings(request)
        settings["secure"] = self.origin.startswith("https://")
        response.set_cookie(value=cookie, **settings)  # type: ignore[arg-type]
        response.delete_cookie(STATE_COOKIE, path=STATE_PATH)
        return response

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/oauth/start", self.start, methods=["GET"]),
            Route("/oauth/callback", self.callback, methods=["GET"]),
        ]
