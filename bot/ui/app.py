"""The operator's page under /ui/: Starlette routes over Jinja2 templates, read-only but for
"stop this run".

Every page but the sign-in needs the session cookie (`bot.ui.auth`); without it a page
redirects to the sign-in and the live endpoint answers 401. A parameter the page could not
have written (a number that is not ASCII digits, a control character in a filter or an id)
is answered 400 before it reaches the store (`policies.ui_pages`). Store reads run in worker
threads.
Every string a template prints passes through the redactor before Jinja2 escapes it (the
environment's `finalize`); HTML built here (Markdown, SVG, diffs) is redacted and escaped
where it is built.
"""

from __future__ import annotations

import functools
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio.to_thread
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from pydantic import SecretStr
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route, Router
from starlette.staticfiles import StaticFiles

from bot.github.client import GitHubApp
from bot.github.oauth import GitHubSignIn
from bot.log import get_logger
from bot.redact import Redactor
from bot.settings import Settings, SettingsError
from bot.store.contract import Storage
from bot.ui import queries
from bot.ui.access import AccessRoutes
from bot.ui.auth import (
    SHARED_TOKEN,
    AccessUnchecked,
    Gate,
    SecurityHeaders,
    Session,
    client_address,
)
from bot.ui.findings import findings_view
from bot.ui.learnings import learnings_view
from bot.ui.oauth import SignInRoutes
from bot.ui.retry import RetryRoutes, retry_facts
from bot.ui.runview import agent_view, run_view
from bot.ui.svg import cost_chart_svg
from bot.ui.text import Redact, capped, diff_html, markdown, pretty_json
from policies.outcome import OUTCOME_STATUSES
from policies.ui_allow import Rule, parse_allow
from policies.ui_costs import DAY, RunCost, Usage, day_of, per_day, per_key, stacks
from policies.ui_pages import BadParameter, count, decode_cursor, page_size, plain_text
from policies.ui_queue import SILENT_AFTER_S, STATES
from policies.ui_search import MAX_QUERY, parse_search

log = get_logger(__name__)
HERE = Path(__file__).parent
PREFIX = "/ui"
STOP_REASON = "stopped from the operator's page"
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


def _day_name(day: int) -> str:
    return datetime.fromtimestamp(day * DAY, UTC).strftime("%Y-%m-%d")


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

    # -- deliveries ----------------------------------------------------------------------

    async def deliveries(self, request: Request, session: Session) -> Response:
        q = request.query_params
        wanted = _delivery_filter(q)
        size = page_size(q.get("size"))
        page = await anyio.to_thread.run_sync(
            queries.deliveries_page, self.store, wanted, decode_cursor(q.get("before")), size
        )
        return await self.page(
            "deliveries.html",
            request,
            session,
            page=page,
            wanted=wanted,
            decisions=queries.DECISIONS,
            size=size,
            first=not q.get("before"),
            app_slug=self.settings.app_slug,
            refresh=_refresh_url("deliveries", request),
        )

    async def deliveries_live(self, request: Request, session: Session) -> Response:
        """The first page of the deliveries list, its rows only, for the page's poll."""
        q = request.query_params
        wanted = _delivery_filter(q)
        size = page_size(q.get("size"))
        page = await anyio.to_thread.run_sync(
            queries.deliveries_page, self.store, wanted, None, size
        )
        return await self._rows(
            "_delivery_rows.html", request, session, page=page, app_slug=self.settings.app_slug
        )

    async def _rows(
        self, name: str, request: Request, session: Session, **context: Any
    ) -> Response:
        html = await anyio.to_thread.run_sync(
            functools.partial(self.render, name, request, session, **context)
        )
        return JSONResponse({"html": html}, headers={"cache-control": "no-store"})

    async def delivery(self, request: Request, session: Session) -> Response:
        guid = request.path_params["guid"]
        row = await anyio.to_thread.run_sync(queries.delivery, self.store, guid)
        if row is None:
            return self.not_found(request, session, "No delivery has that id.")
        headers = {k: v for k, v in row.delivery.headers.items() if "signature" not in k.lower()}
        retry, retries = await anyio.to_thread.run_sync(retry_facts, self.store, guid)
        return await self.page(
            "delivery.html",
            request,
            session,
            row=row,
            headers=headers,
            retry=retry,
            retries=retries,
            retry_action=f"{PREFIX}/deliveries/{guid}/retry",
        )

    # -- runs ----------------------------------------------------------------------------

    async def runs(self, request: Request, session: Session) -> Response:
        q = request.query_params
        wanted = _run_filter(q)
        size, before = page_size(q.get("size")), decode_cursor(q.get("before"))

        def read() -> tuple[queries.Page[Any], tuple[list[str], list[str]], dict[str, Any]]:
            page = queries.runs_page(self.store, wanted, before, size)
            contexts = queries.runs_context(self.store, page.rows)
            return page, queries.run_choices(self.store), contexts

        page, (repos, workflows), contexts = await anyio.to_thread.run_sync(read)
        return await self.page(
            "runs.html",
            request,
            session,
            page=page,
            wanted=wanted,
            repos=repos,
            workflows=workflows,
            statuses=queries.RUN_STATUSES,
            ended=OUTCOME_STATUSES,
            now=time.time(),
            first=not q.get("before"),
            contexts=contexts,
            refresh=_refresh_url("runs", request),
        )

    async def runs_live(self, request: Request, session: Session) -> Response:
        """The first page of the runs list, its rows only, for the page's poll."""
        q = request.query_params
        wanted = _run_filter(q)
        size = page_size(q.get("size"))

        def read() -> tuple[queries.Page[Any], dict[str, Any]]:
            page = queries.runs_page(self.store, wanted, None, size)
            return page, queries.runs_context(self.store, page.rows)

        page, contexts = await anyio.to_thread.run_sync(read)
        return await self._rows(
            "_run_rows.html",
            request,
            session,
            page=page,
            contexts=contexts,
            ended=OUTCOME_STATUSES,
            now=time.time(),
        )

    # -- the queue and the workers -------------------------------------------------------

    async def queue(self, request: Request, session: Session) -> Response:
        """Jobs per workflow by state with the oldest wait, and the workers' heartbeats."""
        view = await anyio.to_thread.run_sync(queries.queue_view, self.store)
        return await self.page(
            "queue.html",
            request,
            session,
            view=view,
            states=STATES,
            silent_after=SILENT_AFTER_S,
            refresh=f"{PREFIX}/live/queue",
        )

    async def queue_live(self, request: Request, session: Session) -> Response:
        view = await anyio.to_thread.run_sync(queries.queue_view, self.store)
        return await self._rows(
            "_queue.html", request, session, view=view, states=STATES, silent_after=SILENT_AFTER_S
        )

    # -- search --------------------------------------------------------------------------

    async def search(self, request: Request, session: Session) -> Response:
        """One box for a GUID, a run id, `owner/repo#n` or an issue's URL: a delivery or a run
        found opens its page; a target lists its runs (`policies.ui_search`)."""
        text = request.query_params.get("q", "")[:MAX_QUERY]
        wanted = parse_search(text)

        found = await anyio.to_thread.run_sync(queries.search, self.store, wanted)
        if found.page is not None:
            return RedirectResponse(f"{PREFIX}{found.page}", status_code=303)
        return await self.page(
            "search.html",
            request,
            session,
            q=text,
            wanted=wanted,
            runs=found.runs,
            contexts=found.contexts,
            ended=OUTCOME_STATUSES,
            now=time.time(),
        )

    async def run(self, request: Request, session: Session) -> Response:
        run_id = request.path_params["run_id"]

        def read() -> Any:
            run = self.store.get_run(run_id)
            return None if run is None else run_view(self.store, run, self.redact)

        view = await anyio.to_thread.run_sync(read)
        if view is None:
            return self.not_found(request, session, "No run has that id.")
        retry, _ = await anyio.to_thread.run_sync(retry_facts, self.store, view.run.delivery_id)
        return await self.page(
            "run.html",
            request,
            session,
            view=view,
            now=time.time(),
            retry=retry,
            retries=[],
            retry_action=f"{PREFIX}/runs/{run_id}/retry",
        )

    async def run_live(self, request: Request, session: Session) -> Response:
        run_id = request.path_params["run_id"]

        def read() -> Any:
            run = self.store.get_run(run_id)
            return None if run is None else run_view(self.store, run, self.redact, live_only=True)

        view = await anyio.to_thread.run_sync(read)
        if view is None:
            return JSONResponse({"error": "no such run"}, status_code=404)
        html = await anyio.to_thread.run_sync(
            functools.partial(
                self.render, "_live.html", request, session, view=view, now=time.time()
            )
        )
        return JSONResponse({"status": view.run.status, "finished": view.ended, "html": html})

    async def agent(self, request: Request, session: Session) -> Response:
        run_id = request.path_params["run_id"]
        index = count(request.path_params["index"], name="index", default=0, low=0, high=10**9)

        def read() -> Any:
            run = self.store.get_run(run_id)
            return None if run is None else agent_view(self.store, run, index)

        view = await anyio.to_thread.run_sync(read)
        if view is None:
            return self.not_found(request, session, "That run has no such agent call.")
        return await self.page("agent.html", request, session, view=view)

    async def stop(self, request: Request, session: Session) -> Response:
        run_id = request.path_params["run_id"]
        if not self.gate.csrf_ok(session, (await _form(request)).get("csrf")):
            log.warning(
                "operator page: stop refused without its CSRF token", extra={"run_id": run_id}
            )
            return _forbidden()
        run = await anyio.to_thread.run_sync(self.store.get_run, run_id)
        if run is None:
            return self.not_found(request, session, "No run has that id.")
        if run.status not in OUTCOME_STATUSES:
            await anyio.to_thread.run_sync(self.store.request_stop, run_id, STOP_REASON)
            await self.audit(session, "stop", run_id, f"{run.workflow} on {run.repo}", request)
            log.info("operator page: stop requested", extra={"run_id": run_id})
        return RedirectResponse(f"{PREFIX}/runs/{run_id}", status_code=303)

    # -- costs ---------------------------------------------------------------------------

    async def costs(self, request: Request, session: Session) -> Response:
        days = count(request.query_params.get("days"), name="days", default=30, low=1, high=366)
        now = time.time()
        first = day_of(now) - days + 1
        start, end = float(first * DAY), float((first + days) * DAY)

        def read() -> tuple[list[Usage], list[RunCost]]:
            return (
                queries.usage_by_day(self.store, start, end),
                queries.costliest_runs(self.store, start, end, 10),
            )

        rows, top = await anyio.to_thread.run_sync(read)
        daily = [(_day_name(int(t.key)), t) for t in per_day(rows, first, days)]
        by = request.query_params.get("by", "")
        if by not in ("cost", "tokens"):
            by = "cost" if any(t.cost for _, t in daily) else "tokens"
        split = "repo" if request.query_params.get("split") == "repo" else "workflow"
        series, values = stacks(rows, first, days, key=split, measure=by)
        return await self.page(
            "costs.html",
            request,
            session,
            days=days,
            daily=daily,
            chart=cost_chart_svg(daily, series, values, by=by),
            by=by,
            split=split,
            workflows=per_key(rows, "workflow"),
            repos=per_key(rows, "repo"),
            top=top,
            total_cost=sum(r.cost for r in rows),
            total_tokens=sum(r.input_tokens + r.output_tokens for r in rows),
            total_runs=sum(r.runs for r in rows),
        )

    # -- review findings -----------------------------------------------------------------

    async def findings(self, request: Request, session: Session) -> Response:
        """What became of the findings posted (`bot.ui.findings`), of one repository or all."""
        repo = request.query_params.get("repo", "").strip()[:200]
        fates = await anyio.to_thread.run_sync(self.store.finding_fates, repo or None)
        return await self.page("findings.html", request, session, **findings_view(fates, repo))

    # -- learnings -----------------------------------------------------------------------

    async def learnings(self, request: Request, session: Session) -> Response:
        """The learnings each repository keeps (`bot.ui.learnings`), of one or all."""
        repo = request.query_params.get("repo", "").strip()[:200]
        kept = await anyio.to_thread.run_sync(self.store.learnings, repo or None)
        view = learnings_view(kept, repo, self.github)
        return await self.page("learnings.html", request, session, **view)

    # -- the routes ----------------------------------------------------------------------

    def routes(self) -> list[BaseRoute]:
        s = self.signed_in
        return [
            *AccessRoutes(self, prefix=PREFIX, form=_form, forbidden=_forbidden).routes(),
            *(self.github_sign_in.routes() if self.github_sign_in is not None else ()),
            Route("/", s(self.deliveries), methods=["GET"]),
            Route("/deliveries", s(self.deliveries), methods=["GET"]),
            Route("/live/deliveries", s(self.deliveries_live), methods=["GET"]),
            Route("/live/runs", s(self.runs_live), methods=["GET"]),
            Route("/search", s(self.search), methods=["GET"]),
            Route("/queue", s(self.queue), methods=["GET"]),
            Route("/live/queue", s(self.queue_live), methods=["GET"]),
            Route("/deliveries/{guid}", s(self.delivery), methods=["GET"]),
            Route("/runs", s(self.runs), methods=["GET"]),
            Route("/runs/{run_id}", s(self.run), methods=["GET"]),
            Route("/runs/{run_id}/live", s(self.run_live), methods=["GET"]),
            Route("/runs/{run_id}/agents/{index}", s(self.agent), methods=["GET"]),
            Route("/runs/{run_id}/stop", s(self.stop), methods=["POST"]),
            Route("/costs", s(self.costs), methods=["GET"]),
            Route("/findings", s(self.findings), methods=["GET"]),
            Route("/learnings", s(self.learnings), methods=["GET"]),
            *RetryRoutes(self, prefix=PREFIX, form=_form, forbidden=_forbidden).routes(),
            Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
        ]


MAX_FORM = 4096


def _delivery_filter(q: QueryParams) -> queries.DeliveryFilter:
    decision = q.get("decision", "")
    return queries.DeliveryFilter(
        event=q.get("event", "").strip()[:100],
        repo=q.get("repo", "").strip()[:200],
        decision=decision if decision in queries.DECISIONS else "",
    )


def _run_filter(q: QueryParams) -> queries.RunFilter:
    return queries.RunFilter(
        repo=q.get("repo", "")[:200],
        workflow=q.get("workflow", "")[:100],
        status=q.get("status", "")[:30],
    )


def _is_live(path: str) -> bool:
    """Whether `path` is one the page's script polls (answered 401, not redirected)."""
    return path.endswith("/live") or f"{PREFIX}/live/" in path


def _refresh_url(kind: str, request: Request) -> str | None:
    """The URL a list's first page polls for its rows (None past the first page: a page of
    older rows stays as it was read)."""
    if request.query_params.get("before"):
        return None
    keep = {k: v for k, v in request.query_params.items() if k != "before"}
    query = urllib.parse.urlencode(keep)
    return f"{PREFIX}/live/{kind}" + (f"?{query}" if query else "")


async def _form(request: Request) -> dict[str, str]:
    """An url-encoded form's fields (the first of each); the page's forms are small, so a
    longer body is read no further and counts as empty."""
    if not request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        return {}
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM:
            return {}
    try:
        fields = urllib.parse.parse_qs(body.decode("utf-8", "replace"), max_num_fields=10)
    except ValueError:  # more fields than any of the page's forms has
        return {}
    return {key: values[0] for key, values in fields.items() if values}


def _unconfirmed(request: Request) -> Response:
    if _is_live(request.url.path):
        return JSONResponse({"error": "access not confirmed by GitHub"}, status_code=503)
    return Response(
        "GitHub did not answer whether you still have access; try again in a moment.",
        status_code=503,
        media_type="text/plain",
        headers={"retry-after": "10"},
    )


def _forbidden() -> Response:
    return Response(
        "forbidden: this form needs its CSRF token", status_code=403, media_type="text/plain"
    )


def operator_page(settings: Settings, store: Storage, *, gate: Gate | None = None) -> Mount:
    """The page mounted at /ui, with its security headers on every answer."""
    return OperatorPage(settings, store, gate=gate).mount()


def _secret(value: SecretStr | None) -> str:
    return "" if value is None else value.get_secret_value()


__all__ = ["PREFIX", "OperatorPage", "operator_page"]
