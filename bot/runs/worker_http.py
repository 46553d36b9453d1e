"""`bot worker --port N`: the worker process's health, readiness and metrics over HTTP.

- `GET /healthz`: 200 while the process answers at all.
- `GET /readyz`: 200 once the worker pool has started and while it runs, and the store
  answers a query; 503 otherwise (before the pool has started, after it stopped, or with the
  database out of reach).
- `GET /metrics`: `bot/metrics.py`'s page, the same as a receiver's: what this process
  recorded (its runs, agent calls and tokens, GitHub requests, rate-limit waits, dead jobs),
  with the queue read from the store at each scrape. A worker is one process, so its values
  live in its memory; scrape every worker as well as the receivers.

Nothing else is served: a worker receives no webhooks. The server is uvicorn, run in the
worker's own event loop beside the pool, without uvicorn's signal handlers (the worker's loop
handles SIGTERM and SIGINT, and stops the server when it stops the pool). The socket is bound
before anything starts, so a port in use is reported before the pool claims any job.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import anyio.abc
import uvicorn
from starlette.applications import Starlette

from bot.metrics import QueueReader
from bot.probes import probe_routes
from bot.store.contract import Storage

GRACEFUL_STOP = 5.0  # seconds the server gives a scrape in flight when the worker stops


class PoolState:
    """Whether the worker pool is running: set by `watched`, read by `/readyz`."""

    def __init__(self) -> None:
        self.running = False

    async def watched(
        self,
        run: Callable[..., Coroutine[Any, Any, None]],
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run `run` (the pool's `run`, which reports when it has started) and say whether it
        is running until it ends."""
        try:
            async with anyio.create_task_group() as tasks:
                await tasks.start(run)
                self.running = True
                task_status.started()
        finally:
            self.running = False


def create_worker_app(store: Storage, read_queue: QueueReader, pool: PoolState) -> Starlette:
    """The worker's three routes (`bot.probes`), nothing else: a worker receives no webhooks."""
    return Starlette(routes=probe_routes(lambda: pool.running, store, read_queue))


async def serve(
    app: Starlette,
    sock: socket.socket,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `app` on the listening `sock` until cancelled; then stop accepting, give the
    requests in flight GRACEFUL_STOP seconds, and close the socket."""
    config = uvicorn.Config(
        app,
        lifespan="off",
        http="httptools",
        ws="none",
        access_log=False,
        log_config=None,
        server_header=False,
        proxy_headers=False,
        timeout_graceful_shutdown=int(GRACEFUL_STOP),
    )
    # uvicorn's own `serve` without its signal handlers: the steps it takes, in its order.
    server = uvicorn.Server(config)
    config.load()
    server.lifespan = config.lifespan_class(config)
    await server.startup(sockets=[sock])
    task_status.started()
    try:
        await server.main_loop()
    finally:
        with anyio.CancelScope(shield=True):
            await server.shutdown(sockets=[sock])
