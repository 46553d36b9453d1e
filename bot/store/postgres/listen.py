"""Wake the worker pool when a job is committed on any machine: Postgres LISTEN/NOTIFY.

procrastinate's schema already announces every job it inserts as ready to run: a trigger on
`procrastinate_jobs` runs `pg_notify('procrastinate_queue_v1#<queue>', ...)`, and Postgres
delivers the notification when the inserting transaction commits (never for one rolled
back). So the intake on any machine wakes every listening pool without a line of its own,
and a pool starts on a new job within a round trip instead of at its next poll.

One connection per process listens, outside the pool (a pooled connection goes back and
forgets its LISTEN). A notification only says "look now": the pool claims as usual, so a
spurious one costs a claim that finds nothing, and one that is lost costs the time to the
pool's next poll, which stays as the fallback (`bot.runs.worker.WATCHED_POLL_INTERVAL`). Notifications sent while
the connection was down are lost, so a reconnect wakes the pool once. A connection that
died without a word (a vanished server, a cut network) is found by a `SELECT 1` after
`IDLE_CHECK` seconds without a notification. Retries back off from `RETRY_MIN` to
`RETRY_MAX`. Channels are per database, not per schema: two deployments sharing a database
in different schemas wake each other now and then, which is harmless.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import anyio.abc
import psycopg
from psycopg import sql

from bot.log import get_logger
from bot.store.postgres.connection import CONNECT_TIMEOUT

log = get_logger(__name__)

CHANNEL_PREFIX = "procrastinate_queue_v1#"  # procrastinate 3's trigger; the schema pins it
IDLE_CHECK = 30.0
RETRY_MIN = 0.5
RETRY_MAX = 30.0
APPLICATION_NAME = "bot-listen"


def channel(queue: str) -> str:
    """The channel procrastinate notifies when a job is inserted in `queue`."""
    return CHANNEL_PREFIX + queue


async def listen(
    conninfo: str,
    channel: str,
    wake: Callable[[], None],
    *,
    idle_check: float = IDLE_CHECK,
    retry_min: float = RETRY_MIN,
    retry_max: float = RETRY_MAX,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Call `wake` at each notification on `channel`, and once after each reconnect, until
    cancelled. Reports started (`task_status`) once the first attempt to listen is over,
    whether it succeeded or not: the pool's poll covers the time until it does."""
    delay = retry_min
    connected_before = False
    while True:
        try:
            conn = await psycopg.AsyncConnection.connect(
                conninfo,
                autocommit=True,
                connect_timeout=int(CONNECT_TIMEOUT),
                application_name=APPLICATION_NAME,
            )
        except psycopg.Error as exc:
            log.warning(
                "cannot listen for new jobs; polling until the database answers",
                extra={"error": type(exc).__name__, "retry_in": delay},
            )
        else:
            try:
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                if connected_before:
                    wake()  # what was committed while nobody listened
                log.info("listening for new jobs", extra={"channel": channel})
                connected_before = True
                delay = retry_min
                task_status.started()
                task_status = anyio.TASK_STATUS_IGNORED
                while True:
                    async for _ in conn.notifies(timeout=idle_check):
                        wake()
                    await conn.execute("SELECT 1")  # quiet for a while: still there?
            except psycopg.Error as exc:
                log.warning(
                    "listening for new jobs: the connection was lost; reconnecting",
                    extra={"error": type(exc).__name__, "retry_in": delay},
                )
            finally:
                with anyio.CancelScope(shield=True):
                    await conn.close()
        task_status.started()
        task_status = anyio.TASK_STATUS_IGNORED
        await anyio.sleep(delay)
        delay = min(retry_max, delay * 2)
