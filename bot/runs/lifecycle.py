"""Carries out an installation's lifecycle change: its state, its tokens, its pending work.

The worker calls `apply_change` for a delivery that `policies.lifecycle.lifecycle_change`
routes here (the installation deleted, suspended or unsuspended; repositories removed from it
or added). In this order:

1. The installation's new state is stored (`policies.lifecycle.next_state`): every delivery
   decided after this, in any process, is skipped while the installation is suspended or
   deleted.
2. Access, in this process: on a loss the GitHub client drops the installation's (or those
   repositories') cached tokens, permissions and labels and requests no token for them any
   more, so nothing is read or written with them; on a return it may request them again.
3. On a loss, the queued and running jobs of the affected deliveries are cancelled in the
   queue (`policies.lifecycle.affected` picks them; a worker of another process that holds
   one loses its lease at its next heartbeat). A delivery not decided yet is recorded
   `cancelled`; a run not finished is recorded `failed`, with the change as its error.
4. The jobs this process is handling are stopped: marked cancelled, their runs stopped on
   the engine (their agents cancelled), their tasks cancelled. When such a task ends the
   worker records its runs `failed` (`finish_cancelled`) and posts nothing: the app has lost
   access, and GitHub would refuse the tokens anyway.

Runs in other processes are not stopped from here: their jobs are cancelled, so they stop
at their next heartbeat, and GitHub refuses their tokens in the meantime.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import anyio
import anyio.to_thread

from bot.events import parse_event
from bot.log import get_logger
from policies.lifecycle import LifecycleChange, Target, affected, next_state
from policies.outcome import OUTCOME_STATUSES, RunFacts, failed_outcome
from policies.outcome_json import outcome_to_json

if TYPE_CHECKING:
    from bot.store.contract import DeliveryRecord, RunRecord, Storage
    from bot.store.queue.base import JobQueue

log = get_logger(__name__)

CANCELLED = "cancelled"
"""The decision recorded on a delivery whose job was cancelled before it was decided."""


class Access(Protocol):
    """The process's hold on installation tokens (`bot.github.client.GitHubApp`)."""

    def revoke_access(self, installation_id: int, repos: Collection[str] | None = None) -> None:
        """Drop what is cached for the installation (or those repositories) and request no
        more tokens for it."""

    def restore_access(self, installation_id: int, repos: Collection[str] | None = None) -> None:
        """Let tokens be requested for the installation (or those repositories) again."""


RunStopper = Callable[[str, str], Awaitable[bool]]
"""Stop a run on this process's engine with a reason; False when it does not run here."""


@dataclass(eq=False)
class InFlight:
    """A job this process's worker is handling, as a lifecycle change needs to see it."""

    delivery_id: str
    scope: anyio.CancelScope
    event: str = ""
    installation_id: int | None = None
    repo: str | None = None
    run_ids: list[str] = field(default_factory=list)
    cancelled: str | None = None
    """Why a lifecycle change cancelled the job (None while it has not)."""

    def target(self) -> Target:
        return Target(self.delivery_id, self.event, self.installation_id, self.repo)


def target_of(record: DeliveryRecord) -> Target:
    """The delivery as a lifecycle change sees it: read from its own payload (a payload that
    cannot be read names no installation, so no change stops it)."""
    try:
        payload = json.loads(record.body)
    except (ValueError, RecursionError):
        payload = None
    if not isinstance(payload, dict):
        return Target(record.guid, record.event, None, None)
    event = parse_event(record.event, record.guid, payload)
    return Target(record.guid, record.event, event.installation_id, event.repo_full_name)


def cancelled_outcome(run: RunRecord, reason: str) -> dict[str, object]:
    """The outcome recorded on a run a lifecycle change stopped (never posted)."""
    facts = RunFacts(run_id=run.id, workflow=run.workflow, status="failed")
    summary = f"The run was cancelled: the app lost access ({reason})."
    return outcome_to_json(failed_outcome(facts, f"cancelled: {reason}", summary=summary))


def _fail_unfinished(store: Storage, run: RunRecord, reason: str) -> bool:
    if run.status in OUTCOME_STATUSES:
        return False
    store.update_run(run.id, status="failed", outcome=cancelled_outcome(run, reason))
    return True


def _cancel_recorded(store: Storage, guids: Iterable[str], reason: str) -> int:
    """Record the cancelled deliveries: undecided ones `cancelled`, unfinished runs `failed`;
    how many runs were failed (blocking: run it in a thread)."""
    runs = 0
    for guid in guids:
        delivery_runs = store.runs_for_delivery(guid)
        for run in delivery_runs:
            runs += _fail_unfinished(store, run, reason)
        if not delivery_runs:
            record = store.get_delivery(guid)
            if record is not None and record.decision is None:
                store.record_decision(guid, CANCELLED, reason=reason)
    return runs


def finish_cancelled(store: Storage, job: InFlight) -> None:
    """After a cancelled job's task ended: its runs end `failed` with the change as their
    error, whatever the task recorded before it stopped (blocking: run it in a thread)."""
    reason = job.cancelled or CANCELLED
    found = store.runs_for_delivery(job.delivery_id)
    for run in found:
        if run.status in OUTCOME_STATUSES and run.status != "failed":
            continue  # it finished before the change arrived
        store.update_run(run.id, status="failed", outcome=cancelled_outcome(run, reason))
    if not found:
        record = store.get_delivery(job.delivery_id)
        if record is not None and record.decision is None:
            store.record_decision(job.delivery_id, CANCELLED, reason=reason)


def _pending_targets(store: Storage, own: str) -> list[Target]:
    return [target_of(d) for d in store.deliveries_in_flight() if d.guid != own]


async def apply_change(
    change: LifecycleChange,
    *,
    delivery_id: str,
    store: Storage,
    queue: JobQueue,
    inflight: Iterable[InFlight],
    access: Access | None,
    stop_run: RunStopper | None,
) -> str:
    """Carry out `change`, which delivery `delivery_id` announced (see the module docstring);
    the reason to record on that delivery, with what was stopped."""
    reason = change.message
    installation = change.installation_id

    def store_state() -> None:
        current = store.installation_state(installation)
        new = next_state(current, change)
        if new is not None:
            store.set_installation_state(installation, new, delivery_id=delivery_id)
            log.info("installation state recorded", extra={"state": new.value, "was": current})

    await anyio.to_thread.run_sync(store_state)
    if access is not None:
        if change.revoke:
            access.revoke_access(installation, change.repos)
        else:
            access.restore_access(installation, change.repos)
    if not change.revoke:
        return reason

    mine = {job.delivery_id: job for job in inflight}
    stopping = [mine[key] for key in affected(change, [j.target() for j in mine.values()])]
    for job in stopping:
        job.cancelled = reason  # before anything awaits: the worker reads it when the task ends
    targets = await anyio.to_thread.run_sync(_pending_targets, store, delivery_id)
    guids = list(dict.fromkeys([*affected(change, targets), *(j.delivery_id for j in stopping)]))
    jobs = await queue.cancel(guids, reason) if guids else []
    failed = await anyio.to_thread.run_sync(_cancel_recorded, store, guids, reason)

    stopped = 0
    for job in stopping:
        for run_id in job.run_ids:
            if stop_run is not None and await stop_run(run_id, reason):
                stopped += 1
        job.scope.cancel()
    log.info(
        "pending work of the installation cancelled",
        extra={
            "installation_id": installation,
            "jobs_cancelled": len(jobs),
            "runs_failed": failed,
            "runs_stopped": stopped,
            "tasks_cancelled": len(stopping),
        },
    )
    return f"{reason}; jobs cancelled: {len(jobs)}, runs stopped: {stopped}"
