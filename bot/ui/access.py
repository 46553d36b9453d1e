"""The page's own doors and its record of who did what: signing in with the shared token and
out, the audit (`/ui/audit`), and the sessions signed in now (`/ui/sessions`), each with a
Revoke button.

Every action on the page (sign-in, a refused GitHub sign-in, sign-out, revoke, stop, retry)
is written to the store's audit (`bot.store.ui_access`) with who did it (the GitHub login,
or the shared token), when, on what and from which address. A wrong shared token is logged
and rate-limited (`bot.ui.auth`), not audited: a guesser must not fill the table. Revoking a
session deletes it from the store, so its cookie signs no one in, in any receiver process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from bot.log import get_logger
from bot.ui.auth import Session, client_address, cookie_settings
from bot.ui.forms import PageRoutes
from policies.ui_pages import count

if TYPE_CHECKING:
    pass

__all__ = ["AccessRoutes"]

log = get_logger(__name__)

AUDIT_PAGE = 100


class AccessRoutes(PageRoutes):
    """The sign-in, sign-out, audit and sessions routes, on the page's plumbing."""

    async def sign_in_form(self, request: Request) -> Response:
        context = self.page.sign_in_context(None)
        return await self.page.page("sign_in.html", request, None, **context)

    async def sign_in(self, request: Request) -> Response:
        """The right token always signs in; a wrong one is 401, or 429 from an address with
        too many recent failures (`bot.ui.auth` says why the limit never refuses the token)."""
        gate = self.page.gate
        client = client_address(request)
        given = (await self.form(request)).get("token")
        if given is not None and gate.token_ok(given):
            response = RedirectResponse(f"{self.prefix}/", status_code=303)
            cookie = await gate.start(client=client)
            response.set_cookie(value=cookie, **cookie_settings(request))  # type: ignore[arg-type]
            await self.page.audit(None, "sign-in", "", "shared token", request)
            log.info("operator page: signed in", extra={"client": client})
            return response
        wait = gate.limiter.blocked_for(client)
        gate.limiter.failed(client)
        if wait > 0:
            context = self.page.sign_in_context("Too many failed sign-ins; wait a minute.")
            body = self.page.render("sign_in.html", request, None, **context)
            return HTMLResponse(body, status_code=429, headers={"retry-after": str(int(wait) + 1)})
        log.warning("operator page: failed sign-in", extra={"client": client})
        body = self.page.render(
            "sign_in.html", request, None, **self.page.sign_in_context("That is not the token.")
        )
        return HTMLResponse(body, status_code=401)

    async def sign_out(self, request: Request, session: Session) -> Response:
        if not self.page.gate.csrf_ok(session, (await self.form(request)).get("csrf")):
            return self.forbidden()
        await self.page.gate.end(session)
        await self.page.audit(session, "sign-out", "", "", request)
        log.info("operator page: signed out")
        response = RedirectResponse(f"{self.prefix}/sign-in", status_code=303)
        settings = cookie_settings(request)
        response.delete_cookie(
            key=str(settings["key"]), path=str(settings["path"]), httponly=True, samesite="strict"
        )
        return response

    async def audit(self, request: Request, session: Session) -> Response:
        raw = request.query_params.get("before")
        older = count(raw, name="before", default=0, low=1, high=10**15) if raw else None
        entries = await anyio.to_thread.run_sync(
            lambda: self.page.store.audit_entries(before=older, limit=AUDIT_PAGE + 1)
        )
        more = len(entries) > AUDIT_PAGE
        entries = entries[:AUDIT_PAGE]
        return await self.page.page(
            "audit.html",
            request,
            session,
            entries=entries,
            next_before=entries[-1].id if more and entries else None,
        )

    async def sessions(self, request: Request, session: Session) -> Response:
        rows = await anyio.to_thread.run_sync(self.page.store.ui_sessions)
        return await self.page.page("sessions.html", request, session, rows=rows, mine=session.id)

    async def revoke(self, request: Request, session: Session) -> Response:
        handle = request.path_params["handle"]
        if not self.page.gate.csrf_ok(session, (await self.form(request)).get("csrf")):
            return self.forbidden()

        def revoke() -> str | None:
            for row in self.page.store.ui_sessions():
                if row.handle == handle and self.page.store.end_ui_session(row.id):
                    return row.login or "the shared token"
            return None

        whose = await anyio.to_thread.run_sync(revoke)
        if whose is None:
            return self.page.not_found(request, session, "No session on now has that name.")
        await self.page.audit(session, "revoke", handle, f"a session of {whose}", request)
        log.info("operator page: session revoked", extra={"session": handle})
        return RedirectResponse(f"{self.prefix}/sessions", status_code=303)

    def routes(self) -> list[BaseRoute]:
        s = self.page.signed_in
        return [
            Route("/sign-in", self.sign_in_form, methods=["GET"]),
            Route("/sign-in", self.sign_in, methods=["POST"]),
            Route("/sign-out", s(self.sign_out), methods=["POST"]),
            Route("/audit", s(self.audit), methods=["GET"]),
            Route("/sessions", s(self.sessions), methods=["GET"]),
            Route("/sessions/{handle}/revoke", s(self.revoke), methods=["POST"]),
        ]
