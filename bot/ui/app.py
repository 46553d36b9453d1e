"""The operator's page under /ui/: Starlette routes over Jinja2 templates, read-only but for
a few forms (stop or retry a run, sign out, revoke a session).

This module is the page's plumbing, which every group of routes is built on: the Jinja2
environment and its filters, rendering, the session check, the 400 and 404 answers, the
audit, and the GitHub sign-in wiring. The routes themselves live by what they do: the lists
(`bot.ui.lists`), a delivery's and a run's pages and Stop (`bot.ui.detail`), the costs,
findings and learnings (`bot.ui.reports`), Retry and the refusals (`bot.ui.retry`), signing in
with the token and out, the audit and the sessions (`bot.ui.access`), and signing in with
GitHub (`bot.ui.oauth`).

Every page but the sign-in needs the session cookie (`bot.ui.auth`); without it a page
redirects to the sign-in and the live endpoint answers 401. A parameter the page could not
have written (a number that is not ASCII digits, a control character in a filter or an id)
is answered 400 before it reaches the store (`policies.ui_pages`). Store reads run in worker
threads, and so does rendering a page.
Every string a template prints passes through the redactor before Jinja2 escapes it (the
environment's `finalize`); HTML built in this package (Markdown, SVG, diffs) is redacted and
escaped where it is built.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio.to_thread
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from pydantic import SecretStr
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Router
from starlette.staticfiles import StaticFiles

from bot.github.client import GitHubApp
from bot.github.oauth import GitHubSignIn
from bot.log import get_logger
from bot.redact import Redactor
from bot.settings import Settings, SettingsError
from bot.store.contract import Storage
from bot.ui.access import AccessRoutes
from bot.ui.auth import (
    SHARED_TOKEN,
    AccessUnchecked,
    Gate,
    SecurityHeaders,
    Session,
    client_address,
)
from bot.ui.detail import DetailRoutes
from bot.ui.lists import ListRoutes
from bot.ui.oauth import SignInRoutes
from bot.ui.reports import ReportRoutes
from bot.ui.retry import RetryRoutes
from bot.ui.text import Redact, capped, diff_html, markdown, pretty_json
from policies.ui_allow import Rule, parse_allow
from policies.ui_pages import BadParameter, plain_text

log = get_logger(__name__)
HERE = Path(__file__).parent
PREFIX = "/ui"
Handler = Callable[[Request], Awaitable[Response]]


def _when(ts: float | None) -> str:
    if ts is None:
        return ""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60)} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60)} min"


def environment(redact: Redact) -> Environment:
    def finalize(value: object) -> object:
        if value is None:
            return ""
        if isinstance(value, str) and not isinstance(value, Markup):
            return redact(value)
        return value

    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        finalize=finalize,
        auto_reload=False,
    )
    env.filters.update(
        when=_when,
        duration=_duration,
        num=lambda v: "" if v is None else f"{int(v):,}",
        money=lambda v: "" if v is None else f"${float(v):,.4f}",
        markdown=lambda text: markdown(str(text), redact),
        pretty=lambda value: pretty_json(value, redact),
        diff=lambda patch: diff_html(str(patch), redact),
        capped=capped,
    )
    return env


class OperatorPage:
    """The routes of the page for one store and one deployment's settings."""

    def __init__(self, settings: Settings, store: Storage, *, gate: Gate | None = None) -> None:
        token = settings.ui_token.get_secret_value() if settings.ui_token is not None else ""
        self.settings = settings
        self.store = store
        self.redact: Redact = Redactor(settings.secret_values())
        self.env = environment(self.redact)
        self.github = settings.github_web_url.rstrip("/")
        self._app: GitHubApp | None = None
        sign_in, rules = self._github_sign_in()
        self.gate = gate or Gate(
            token,
            store,
            sign_in=sign_in,
            rules=rules,
            key_secret=_secret(settings.oauth_client_secret),
            recheck_s=settings.ui_recheck_seconds,
        )
        self.github_sign_in = (
            None
            if sign_in is None or settings.ui_url is None
            else SignInRoutes(
                self, sign_in, rules, origin=settings.ui_url, web_url=settings.github_web_url
            )
        )

    def _github_sign_in(self) -> tuple[GitHubSignIn | None, tuple[Rule, ...]]:
        """GitHub sign-in when BOT_OAUTH_CLIENT_ID, its secret, BOT_UI_ALLOW and BOT_UI_URL
        are set and the App's credentials are there to ask GitHub with."""
        s = self.settings
        if not s.github_sign_in or s.oauth_client_id is None or s.ui_allow is None:
            return None, ()
        try:
            self._app = GitHubApp.from_settings(s)
        except (ValueError, SettingsError) as exc:
            log.error("operator page: no signing in with GitHub", extra={"error": str(exc)})
            return None, ()
        secret = _secret(s.oauth_client_secret)
        return GitHubSignIn(self._app, s.oauth_client_id, secret), parse_allow(s.ui_allow)

    async def aclose(self) -> None:
        if self._app is not None:
            await self._app.aclose()

    def mount(self) -> Mount:
        """The page mounted at /ui, with its security headers on every answer."""
        return Mount(PREFIX, app=SecurityHeaders(Router(routes=self.routes())))

    # -- plumbing ------------------------------------------------------------------------

    def render(self, name: str, request: Request, session: Session | None, **context: Any) -> str:
        template = self.env.get_template(name)
        return template.render(
            request=request, session=session, prefix=PREFIX, github=self.github, **context
        )

    async def page(
        self, name: str, request: Request, session: Session | None, **context: Any
    ) -> HTMLResponse:
        """The template rendered in a worker thread: a run page of a hundred calls takes tens
        of milliseconds, which the event loop (the webhook route's too) should not wait on."""
        body = await anyio.to_thread.run_sync(
            functools.partial(self.render, name, request, session, **context)
        )
        return HTMLResponse(body)

    def signed_in(self, handler: Callable[[Request, Session], Awaitable[Response]]) -> Handler:
        async def guarded(request: Request) -> Response:
            try:
                session = await self.gate.session(request)
            except AccessUnchecked:
                return _unconfirmed(request)
            if session is None:
                if _is_live(request.url.path):
                    return JSONResponse({"error": "sign in first"}, status_code=401)
                return RedirectResponse(f"{PREFIX}/sign-in", status_code=303)
            texts = [*request.path_params.values(), *request.query_params.values()]
            try:
                if not all(plain_text(str(text)) for text in texts):
                    raise BadParameter("a parameter holds a control character")
                return await handler(request, session)
            except BadParameter as exc:
                return self.bad_request(request, session, str(exc))

        return guarded

    def bad_request(self, request: Request, session: Session, why: str) -> HTMLResponse:
        body = self.render("error.html", request, session, title="Bad request", message=why)
        return HTMLResponse(body, status_code=400)

    def not_found(self, request: Request, session: Session, what: str) -> HTMLResponse:
        body = self.render("error.html", request, session, title="Not found", message=what)
        return HTMLResponse(body, status_code=404)

    # -- who did what --------------------------------------------------------------------

    def sign_in_context(self, error: str | None) -> dict[str, Any]:
        """What the sign-in page offers: the token's form, GitHub's button, or both."""
        return {
            "error": error,
            "token": self.gate.takes_token,
            "with_github": self.github_sign_in is not None,
        }

    async def audit(
        self, who: Session | str | None, action: str, target: str, detail: str, request: Request
    ) -> None:
        """Record an action in the audit: by a session, a GitHub login, or (None) the token."""
        actor = who.actor if isinstance(who, Session) else (who or SHARED_TOKEN)
        await anyio.to_thread.run_sync(
            self.store.audit, actor, action, target, detail, client_address(request)
        )

    # -- the routes ----------------------------------------------------------------------

    def routes(self) -> list[BaseRoute]:
        return [
            *AccessRoutes(self, prefix=PREFIX).routes(),
            *(self.github_sign_in.routes() if self.github_sign_in is not None else ()),
            *ListRoutes(self, prefix=PREFIX).routes(),
            *DetailRoutes(self, prefix=PREFIX).routes(),
            *ReportRoutes(self, prefix=PREFIX).routes(),
            *RetryRoutes(self, prefix=PREFIX).routes(),
            Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
        ]


def _is_live(path: str) -> bool:
    """Whether `path` is one the page's script polls (answered 401, not redirected)."""
    return path.endswith("/live") or f"{PREFIX}/live/" in path


def _unconfirmed(request: Request) -> Response:
    if _is_live(request.url.path):
        return JSONResponse({"error": "access not confirmed by GitHub"}, status_code=503)
    return Response(
        "GitHub did not answer whether you still have access; try again in a moment.",
        status_code=503,
        media_type="text/plain",
        headers={"retry-after": "10"},
    )


def operator_page(settings: Settings, store: Storage, *, gate: Gate | None = None) -> Mount:
    """The page mounted at /ui, with its security headers on every answer."""
    return OperatorPage(settings, store, gate=gate).mount()


def _secret(value: SecretStr | None) -> str:
    return "" if value is None else value.get_secret_value()


__all__ = ["PREFIX", "OperatorPage", "operator_page"]
