"""The operator page's pages of one thing: a delivery (`/ui/deliveries/{guid}`), a run
(`/ui/runs/{run_id}`, its live part for the page's poll, one agent call of it) and the run's
Stop button.

A delivery's page shows its headers but the signatures. Stop is a POST with the session's
CSRF token (403 without it): a run not yet ended is asked to stop (`Storage.request_stop`),
and the stop is written to the audit; either way the browser goes back to the run's page.
The run's and the agent call's views are built, redacted, by `bot.ui.runview`.
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from bot.log import get_logger
from bot.ui import queries
from bot.ui.forms import PageRoutes
from bot.ui.retry import retry_facts
from bot.ui.runview import agent_view, run_view
from policies.outcome import OUTCOME_STATUSES
from policies.ui_pages import count

if TYPE_CHECKING:
    from bot.ui.auth import Session

__all__ = ["DetailRoutes"]

log = get_logger(__name__)

STOP_REASON = "stopped from the operator's page"


class DetailRoutes(PageRoutes):
    """The routes of a delivery's page and a run's pages, on the page's plumbing."""

    async def delivery(self, request: Request, session: Session) -> Response:
        store = self.page.store
        guid = request.path_params["guid"]
        row = await anyio.to_thread.run_sync(queries.delivery, store, guid)
        if row is None:
            return self.page.not_found(request, session, "No delivery has that id.")
        headers = {k: v for k, v in row.delivery.headers.items() if "signature" not in k.lower()}
        retry, retries = await anyio.to_thread.run_sync(retry_facts, store, guid)
        return await self.page.page(
            "delivery.html",
            request,
            session,
            row=row,
            headers=headers,
            retry=retry,
            retries=retries,
            retry_action=f"{self.prefix}/deliveries/{guid}/retry",
        )

    async def _view(self, run_id: str, *, live_only: bool) -> Any:
        """The run's view (`bot.ui.runview.run_view`), read in a worker thread; None when
        no run has that id."""
        store, redact = self.page.store, self.page.redact

        def read() -> Any:
            run = store.get_run(run_id)
            return None if run is None else run_view(store, run, redact, live_only=live_only)

        return await anyio.to_thread.run_sync(read)

    async def run(self, request: Request, session: Session) -> Response:
        store = self.page.store
        run_id = request.path_params["run_id"]
        view = await self._view(run_id, live_only=False)
        if view is None:
            return self.page.not_found(request, session, "No run has that id.")
        retry, _ = await anyio.to_thread.run_sync(retry_facts, store, view.run.delivery_id)
        return await self.page.page(
            "run.html",
            request,
            session,
            view=view,
            now=time.time(),
            retry=retry,
            retries=[],
            retry_action=f"{self.prefix}/runs/{run_id}/retry",
        )

    async def run_live(self, request: Request, session: Session) -> Response:
        run_id = request.path_params["run_id"]
        view = await self._view(run_id, live_only=True)
        if view is None:
            return JSONResponse({"error": "no such run"}, status_code=404)
        html = await anyio.to_thread.run_sync(
            functools.partial(
                self.page.render, "_live.html", request, session, view=view, now=time.time()
            )
        )
        return JSONResponse({"status": view.run.status, "finished": view.ended, "html": html})

    async def agent(self, request: Request, session: Session) -> Response:
        store = self.page.store
        run_id = request.path_params["run_id"]
        index = count(request.path_params["index"], name="index", default=0, low=0, high=10**9)

        def read() -> Any:
            run = store.get_run(run_id)
            return None if run is None else agent_view(store, run, index)

        view = await anyio.to_thread.run_sync(read)
        if view is None:
            return self.page.not_found(request, session, "That run has no such agent call.")
        return await self.page.page("agent.html", request, session, view=view)

    async def stop(self, request: Request, session: Session) -> Response:
        page = self.page
        run_id = request.path_params["run_id"]
        if not page.gate.csrf_ok(session, (await self.form(request)).get("csrf")):
            log.warning(
                "operator page: stop refused without its CSRF token", extra={"run_id": run_id}
            )
            return self.forbidden()
        run = await anyio.to_thread.run_sync(page.store.get_run, run_id)
        if run is None:
            return page.not_found(request, session, "No run has that id.")
        if run.status not in OUTCOME_STATUSES:
            await anyio.to_thread.run_sync(page.store.request_stop, run_id, STOP_REASON)
            await page.audit(session, "stop", run_id, f"{run.workflow} on {run.repo}", request)
            log.info("operator page: stop requested", extra={"run_id": run_id})
        return RedirectResponse(f"{self.prefix}/runs/{run_id}", status_code=303)

    def routes(self) -> list[BaseRoute]:
        s = self.page.signed_in
        return [
            Route("/deliveries/{guid}", s(self.delivery), methods=["GET"]),
            Route("/runs/{run_id}", s(self.run), methods=["GET"]),
            Route("/runs/{run_id}/live", s(self.run_live), methods=["GET"]),
            Route("/runs/{run_id}/agents/{index}", s(self.agent), methods=["GET"]),
            Route("/runs/{run_id}/stop", s(self.stop), methods=["POST"]),
        ]
