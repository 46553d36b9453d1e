"""Ask GitHub again for the webhook deliveries the app missed, once or every interval.

`redeliver_missed` lists the App's delivery attempts of a recent window
(`GitHubApp.hook_deliveries`), lets `policies.redelivery.plan` pick those that failed and
whose GUID the store never saw, and asks GitHub to send each again
(`POST /app/hook/deliveries/{id}/attempts`). The redelivery reaches the receiver like the
original would have, with the same GUID, so it is stored and decided once.

`redeliver_forever` runs that beside the worker pool every `BOT_REDELIVER_INTERVAL` seconds:
the first pass looks back `DEFAULT_SINCE` (what was lost while the process was down), the
later ones two intervals. Several worker processes may each run it; a delivery asked for
twice reaches the receiver twice and is stored once.

Each request is counted in the store before it is made (`Storage.claim_redelivery`), so a
GUID that fails every time is asked for `MAX_REDELIVERIES` times in all, however short the
interval and however many processes redeliver; the counts are dropped `REMEMBER_S` after a
GUID's last request, when GitHub lists none of its attempts any more.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from bot.github._auth import parse_github_time
from bot.github.errors import AuthError, GitHubError, RateLimited
from bot.log import bound, get_logger
from policies.redelivery import (
    DEFAULT_SINCE,
    MAX_REDELIVERIES,
    REMEMBER_S,
    Action,
    Attempt,
    Step,
    parse_duration,
    plan,
)

if TYPE_CHECKING:
    from bot.github.client import GitHubApp
    from bot.github.models import HookDelivery
    from bot.store.contract import Storage

log = get_logger(__name__)

MIN_WINDOW_S = 300.0
"""The shortest window a periodic pass looks back over, however short the interval."""


@dataclass(frozen=True, slots=True)
class Done:
    """A step and what came of it: `redelivered`, `would redeliver` (a dry run), `failed: ...`
    or the reason it was skipped."""

    step: Step
    result: str


def _attempt(item: HookDelivery) -> Attempt:
    try:
        at = parse_github_time(item.delivered_at)
    except ValueError:
        at = 0.0
    return Attempt(
        id=item.id,
        guid=item.guid,
        event=item.event,
        action=item.action,
        status=item.status,
        status_code=item.status_code,
        delivered_at=at,
        redelivery=item.redelivery,
    )


_SKIPPED = {
    Action.SEEN: "skipped: received before",
    Action.DELIVERED: "skipped: delivered",
    Action.GAVE_UP: "skipped: redelivered enough times",
}


async def redeliver_missed(
    app: GitHubApp,
    store: Storage,
    *,
    since: float,
    dry_run: bool = False,
    clock: Callable[[], float] = time.time,
) -> list[Done]:
    """Redeliver the missed deliveries of the past `since` seconds; what was done with each.

    Listing errors propagate (`AuthError` when GitHub refuses the App's credentials); a
    refused redelivery is reported on its line and the others go on, except a rate limit,
    which ends the pass.
    """
    now = clock()
    items = await app.hook_deliveries(since=now - since)
    attempts = [_attempt(item) for item in items]
    guids = [a.guid for a in attempts]
    seen = await anyio.to_thread.run_sync(store.seen_guids, guids)
    requested = await anyio.to_thread.run_sync(store.redelivery_requests, guids)
    done: list[Done] = []
    for step in plan(attempts, seen, requested):
        if step.action is not Action.REDELIVER:
            done.append(Done(step, _SKIPPED[step.action]))
            continue
        if dry_run:
            done.append(Done(step, "would redeliver"))
            continue
        guid = step.attempt.guid
        claimed = await anyio.to_thread.run_sync(
            partial(store.claim_redelivery, guid, at=now, limit=MAX_REDELIVERIES)
        )
        if not claimed:  # another process asked for it meanwhile, up to the limit
            done.append(Done(step, _SKIPPED[Action.GAVE_UP]))
            continue
        with bound(delivery_id=guid):
            try:
                await app.redeliver(step.attempt.id)
            except (AuthError, RateLimited):
                raise
            except GitHubError as exc:
                log.warning(
                    "redelivery refused", extra={"status": exc.status, "error": exc.message}
                )
                done.append(Done(step, f"failed: {exc.status} {exc.message}"))
                continue
            log.info(
                "missed delivery redelivered",
                extra={"event": step.event, "status_code": step.attempt.status_code},
            )
            done.append(Done(step, "redelivered"))
    if not dry_run:
        await anyio.to_thread.run_sync(lambda: store.forget_redeliveries(before=now - REMEMBER_S))
    return done


async def redeliver_forever(
    app: GitHubApp,
    store: Storage,
    interval: float,
    *,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
) -> None:
    """Redeliver missed deliveries every `interval` seconds until cancelled (see the module
    docstring). A pass that fails is logged and the next one comes at its time."""
    since = parse_duration(DEFAULT_SINCE)
    while True:
        try:
            done = await redeliver_missed(app, store, since=since, clock=clock)
        except Exception as exc:
            log.warning("the redelivery pass failed", extra={"error": str(exc)})
        else:
            count = sum(d.result == "redelivered" for d in done)
            if count:
                log.info("missed deliveries redelivered", extra={"redelivered": count})
            since = max(2 * interval, MIN_WINDOW_S)
        await sleep(interval)
