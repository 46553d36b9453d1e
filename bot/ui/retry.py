"""The operator page's Retry buttons and its list of refused delivery attempts.

A failed or dead delivery (and a failed run) gets a Retry button: a POST with the session's
CSRF token, like Stop, that runs it again where `policies.retry` allows (`bot.store.retry`:
one more job, its failed runs queued again, the retry recorded as the page's). One still
under way is refused (409, saying why). `/ui/refusals` lists the newest refused attempts
(`bot.store.refusals`), by status when asked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from bot.log import get_logger
from bot.store.backend import job_queue
from bot.store.contract import Storage
from bot.store.retry import Retried, RetryRecord
from bot.ui.forms import PageRoutes
from policies.retry import Verdict
from policies.ui_pages import count

if TYPE_CHECKING:
    from bot.ui.auth import Session

log = get_logger(__name__)

REFUSAL_STATUSES = (400, 401, 408, 413, 503)


def retry_facts(store: Storage, guid: str) -> tuple[Verdict, list[RetryRecord]]:
    """Whether the delivery may be retried now, and its recorded retries (blocking)."""
    [said] = job_queue(store).retry_sync([guid], source="ui", dry_run=True)
    return said.verdict, store.retries_of(guid)


class RetryRoutes(PageRoutes):
    """The routes of the Retry buttons and the refusals list, on the page's plumbing."""

    async def _retry(self, request: Request, session: Session, guid: str, back: str) -> Response:
        page = self.page
        if not page.gate.csrf_ok(session, (await self.form(request)).get("csrf")):
            log.warning("operator page: retry refused without its CSRF token", extra={"at": back})
            return self.forbidden()

        def run() -> Retried | None:
            if not page.store.seen_guids([guid]):
                return None
            [done] = job_queue(page.store).retry_sync([guid], source="ui")
            return done

        done = await anyio.to_thread.run_sync(run)
        if done is None:
            return page.not_found(request, session, "No delivery has that id.")
        if done.kind is None:
            log.info(
                "operator page: retry refused",
                extra={"delivery_id": guid, "reason": done.verdict.reason},
            )
            body = page.render(
                "error.html",
                request,
                session,
                title="Not retried",
                message=f"Not retried: {done.verdict.reason}.",
            )
            return HTMLResponse(body, status_code=409)
        await page.audit(session, "retry", guid, f"{done.kind}: {', '.join(done.runs)}", request)
        log.info(
            "operator page: retry",
            extra={"delivery_id": guid, "job": done.kind, "run_id": ",".join(done.runs)},
        )
        return RedirectResponse(f"{self.prefix}{back}", status_code=303)

    async def retry_delivery(self, request: Request, session: Session) -> Response:
        guid = request.path_params["guid"]
        return await self._retry(request, session, guid, f"/deliveries/{guid}")

    async def retry_run(self, request: Request, session: Session) -> Response:
        run_id = request.path_params["run_id"]
        run = await anyio.to_thread.run_sync(self.page.store.get_run, run_id)
        if run is None:
            return self.page.not_found(request, session, "No run has that id.")
        return await self._retry(request, session, run.delivery_id, f"/runs/{run_id}")

    async def refusals(self, request: Request, session: Session) -> Response:
        raw = request.query_params.get("status", "")
        status = count(raw, name="status", default=0, low=0, high=599) if raw else 0
        wanted = status if status in REFUSAL_STATUSES else None
        rows = await anyio.to_thread.run_sync(
            lambda: self.page.store.recent_refusals(limit=200, status=wanted)
        )
        return await self.page.page(
            "refusals.html",
            request,
            session,
            rows=rows,
            status=wanted,
            statuses=REFUSAL_STATUSES,
        )

    def routes(self) -> list[BaseRoute]:
        s = self.page.signed_in
        return [
            Route("/refusals", s(self.refusals), methods=["GET"]),
            Route("/deliveries/{guid}/retry", s(self.retry_delivery), methods=["POST"]),
            Route("/runs/{run_id}/retry", s(self.retry_run), methods=["POST"]),
        ]
