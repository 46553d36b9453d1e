"""The operator page's lists: the deliveries (`/ui/`, `/ui/deliveries`), the runs
(`/ui/runs`), the search box (`/ui/search`) and the queue with its workers (`/ui/queue`).

The deliveries and the runs are read a page at a time, newest first, filtered by what the
query asks (`bot.ui.queries`); a list's first page polls `/ui/live/...` for its rows, a page
of older rows stays as it was read. The queue polls `/ui/live/queue`.
"""

from __future__ import annotations

import functools
import time
import urllib.parse
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from bot.ui import queries
from bot.ui.forms import PageRoutes
from policies.outcome import OUTCOME_STATUSES
from policies.ui_pages import decode_cursor, page_size
from policies.ui_queue import SILENT_AFTER_S, STATES
from policies.ui_search import MAX_QUERY, parse_search

if TYPE_CHECKING:
    from bot.ui.auth import Session

__all__ = ["ListRoutes"]


class ListRoutes(PageRoutes):
    """The routes of the deliveries, runs, search and queue pages, on the page's plumbing."""

    # -- deliveries ----------------------------------------------------------------------

    async def deliveries(self, request: Request, session: Session) -> Response:
        q = request.query_params
        wanted = _delivery_filter(q)
        size = page_size(q.get("size"))
        page = await anyio.to_thread.run_sync(
            queries.deliveries_page, self.page.store, wanted, decode_cursor(q.get("before")), size
        )
        return await self.page.page(
            "deliveries.html",
            request,
            session,
            page=page,
            wanted=wanted,
            decisions=queries.DECISIONS,
            size=size,
            first=not q.get("before"),
            app_slug=self.page.settings.app_slug,
            refresh=self._refresh_url("deliveries", request),
        )

    async def deliveries_live(self, request: Request, session: Session) -> Response:
        """The first page of the deliveries list, its rows only, for the page's poll."""
        q = request.query_params
        wanted = _delivery_filter(q)
        size = page_size(q.get("size"))
        page = await anyio.to_thread.run_sync(
            queries.deliveries_page, self.page.store, wanted, None, size
        )
        return await self._rows(
            "_delivery_rows.html", request, session, page=page, app_slug=self.page.settings.app_slug
        )

    # -- runs ----------------------------------------------------------------------------

    async def runs(self, request: Request, session: Session) -> Response:
        store = self.page.store
        q = request.query_params
        wanted = _run_filter(q)
        size, before = page_size(q.get("size")), decode_cursor(q.get("before"))

        def read() -> tuple[queries.Page[Any], tuple[list[str], list[str]], dict[str, Any]]:
            page = queries.runs_page(store, wanted, before, size)
            contexts = queries.runs_context(store, page.rows)
            return page, queries.run_choices(store), contexts

        page, (repos, workflows), contexts = await anyio.to_thread.run_sync(read)
        return await self.page.page(
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
            refresh=self._refresh_url("runs", request),
        )

    async def runs_live(self, request: Request, session: Session) -> Response:
        """The first page of the runs list, its rows only, for the page's poll."""
        store = self.page.store
        q = request.query_params
        wanted = _run_filter(q)
        size = page_size(q.get("size"))

        def read() -> tuple[queries.Page[Any], dict[str, Any]]:
            page = queries.runs_page(store, wanted, None, size)
            return page, queries.runs_context(store, page.rows)

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
        view = await anyio.to_thread.run_sync(queries.queue_view, self.page.store)
        return await self.page.page(
            "queue.html",
            request,
            session,
            view=view,
            states=STATES,
            silent_after=SILENT_AFTER_S,
            refresh=f"{self.prefix}/live/queue",
        )

    async def queue_live(self, request: Request, session: Session) -> Response:
        view = await anyio.to_thread.run_sync(queries.queue_view, self.page.store)
        return await self._rows(
            "_queue.html", request, session, view=view, states=STATES, silent_after=SILENT_AFTER_S
        )

    # -- search --------------------------------------------------------------------------

    async def search(self, request: Request, session: Session) -> Response:
        """One box for a GUID, a run id, `owner/repo#n` or an issue's URL: a delivery or a run
        found opens its page; a target lists its runs (`policies.ui_search`)."""
        text = request.query_params.get("q", "")[:MAX_QUERY]
        wanted = parse_search(text)

        found = await anyio.to_thread.run_sync(queries.search, self.page.store, wanted)
        if found.page is not None:
            return RedirectResponse(f"{self.prefix}{found.page}", status_code=303)
        return await self.page.page(
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

    # -- the polls -----------------------------------------------------------------------

    async def _rows(
        self, name: str, request: Request, session: Session, **context: Any
    ) -> Response:
        """A list's rows rendered in a worker thread, as JSON the page's script swaps in."""
        html = await anyio.to_thread.run_sync(
            functools.partial(self.page.render, name, request, session, **context)
        )
        return JSONResponse({"html": html}, headers={"cache-control": "no-store"})

    def _refresh_url(self, kind: str, request: Request) -> str | None:
        """The URL a list's first page polls for its rows (None past the first page: a page
        of older rows stays as it was read)."""
        if request.query_params.get("before"):
            return None
        keep = {k: v for k, v in request.query_params.items() if k != "before"}
        query = urllib.parse.urlencode(keep)
        return f"{self.prefix}/live/{kind}" + (f"?{query}" if query else "")

    def routes(self) -> list[BaseRoute]:
        s = self.page.signed_in
        return [
            Route("/", s(self.deliveries), methods=["GET"]),
            Route("/deliveries", s(self.deliveries), methods=["GET"]),
            Route("/live/deliveries", s(self.deliveries_live), methods=["GET"]),
            Route("/live/runs", s(self.runs_live), methods=["GET"]),
            Route("/search", s(self.search), methods=["GET"]),
            Route("/queue", s(self.queue), methods=["GET"]),
            Route("/live/queue", s(self.queue_live), methods=["GET"]),
            Route("/runs", s(self.runs), methods=["GET"]),
        ]


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
