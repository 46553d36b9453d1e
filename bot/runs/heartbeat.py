"""A worker pool's heartbeat in the store (`bot.store.workers`): every `BEAT_S` seconds its
host, pid, start and the runs it holds; its row is deleted when the pool stops. A beat that
fails (a busy database) is logged and the next one tries again: the operator's page calls a
pool silent only after several missed beats (`policies.ui_queue.SILENT_AFTER_S`)."""

from __future__ import annotations

import functools
import os
import socket
import time
from collections.abc import Callable, Sequence

import anyio
import anyio.to_thread

from bot.log import get_logger
from bot.store.contract import Storage
from policies.ui_queue import BEAT_S

log = get_logger(__name__)


async def beat_forever(
    store: Storage,
    worker_id: str,
    held: Callable[[], Sequence[str]],
    *,
    interval: float = BEAT_S,
) -> None:
    """Beat until cancelled, then remove the pool's row (shielded: a stopping pool still
    says so)."""
    host, pid, started = socket.gethostname(), os.getpid(), time.time()
    try:
        while True:
            beat = functools.partial(
                store.beat, worker_id, host=host, pid=pid, started_at=started, runs=list(held())
            )
            try:
                await anyio.to_thread.run_sync(beat)
            except Exception as exc:
                log.warning(
                    "writing the heartbeat failed",
                    extra={"worker_id": worker_id, "error": type(exc).__name__},
                )
            await anyio.sleep(interval)
    finally:
        with anyio.CancelScope(shield=True):
            try:
                await anyio.to_thread.run_sync(store.worker_stopped, worker_id)
            except Exception as exc:
                log.warning(
                    "removing the heartbeat failed",
                    extra={"worker_id": worker_id, "error": type(exc).__name__},
                )
