"""The operator page's reports: what the runs cost (`/ui/costs`), what became of the review
findings posted (`/ui/findings`) and the learnings each repository keeps (`/ui/learnings`).

Costs cover the last `days` days (30 unless asked, 1 to 366) by day, workflow and repository
(`policies.ui_costs`), with the costliest runs; the chart stacks them by workflow (or by
repository when asked) and measures cost, or tokens when nothing was priced or when asked. Findings and learnings are of one repository (`repo`) or all
(`bot.ui.findings`, `bot.ui.learnings`).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from bot.ui import queries
from bot.ui.findings import findings_view
from bot.ui.forms import PageRoutes
from bot.ui.learnings import learnings_view
from bot.ui.svg import cost_chart_svg
from policies.ui_costs import DAY, RunCost, Usage, day_of, per_day, per_key, stacks
from policies.ui_pages import count

if TYPE_CHECKING:
    from bot.ui.auth import Session

__all__ = ["ReportRoutes"]


class ReportRoutes(PageRoutes):
    """The routes of the costs, findings and learnings pages, on the page's plumbing."""

    async def costs(self, request: Request, session: Session) -> Response:
        store = self.page.store
        days = count(request.query_params.get("days"), name="days", default=30, low=1, high=366)
        now = time.time()
        first = day_of(now) - days + 1
        start, end = float(first * DAY), float((first + days) * DAY)

        def read() -> tuple[list[Usage], list[RunCost]]:
            return (
                queries.usage_by_day(store, start, end),
                queries.costliest_runs(store, start, end, 10),
            )

        rows, top = await anyio.to_thread.run_sync(read)
        daily = [(_day_name(int(t.key)), t) for t in per_day(rows, first, days)]
        by = request.query_params.get("by", "")
        if by not in ("cost", "tokens"):
            by = "cost" if any(t.cost for _, t in daily) else "tokens"
        split = "repo" if request.query_params.get("split") == "repo" else "workflow"
        series, values = stacks(rows, first, days, key=split, measure=by)
        return await self.page.page(
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

    async def findings(self, request: Request, session: Session) -> Response:
        """What became of the findings posted (`bot.ui.findings`), of one repository or all."""
        repo = request.query_params.get("repo", "").strip()[:200]
        fates = await anyio.to_thread.run_sync(self.page.store.finding_fates, repo or None)
        return await self.page.page("findings.html", request, session, **findings_view(fates, repo))

    async def learnings(self, request: Request, session: Session) -> Response:
        """The learnings each repository keeps (`bot.ui.learnings`), of one or all."""
        repo = request.query_params.get("repo", "").strip()[:200]
        kept = await anyio.to_thread.run_sync(self.page.store.learnings, repo or None)
        view = learnings_view(kept, repo, self.page.github)
        return await self.page.page("learnings.html", request, session, **view)

    def routes(self) -> list[BaseRoute]:
        s = self.page.signed_in
        return [
            Route("/costs", s(self.costs), methods=["GET"]),
            Route("/findings", s(self.findings), methods=["GET"]),
            Route("/learnings", s(self.learnings), methods=["GET"]),
        ]


def _day_name(day: int) -> str:
    return datetime.fromtimestamp(day * DAY, UTC).strftime("%Y-%m-%d")
