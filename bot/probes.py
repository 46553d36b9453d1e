"""The three routes every HTTP process of the app serves, receiver and worker alike.

- `GET /healthz`: 200 while the process answers at all.
- `GET /readyz`: 200 while the process's own loop runs (the receiver's intake writer, the
  worker's pool) and the store answers a query; 503 otherwise.
- `GET /metrics`: `bot.metrics.render`'s page, with the queue and the review findings read from
  the store at each scrape.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from bot import metrics
from bot.metrics import QueueReader
from bot.store.contract import Storage


def probe_routes(
    running: Callable[[], bool], store: Storage, read_queue: QueueReader | None
) -> list[Route]:
    """/healthz, /readyz (ready while `running()` and the store answers) and /metrics."""

    async def healthz(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    async def readyz(request: Request) -> JSONResponse:
        ready = running() and await anyio.to_thread.run_sync(store.ping)
        return JSONResponse(
            {"status": "ready" if ready else "unavailable"}, status_code=200 if ready else 503
        )

    async def metrics_page(request: Request) -> Response:
        page = await anyio.to_thread.run_sync(
            metrics.render, read_queue, store.finding_outcome_counts
        )
        return Response(page, media_type=metrics.CONTENT_TYPE)

    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics_page, methods=["GET"]),
    ]
