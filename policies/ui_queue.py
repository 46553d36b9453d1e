"""The queue page's figures: jobs per workflow by state with the oldest wait, and which workers
have gone silent (their heartbeat stopped) with the runs they held.

A job's state, in the store's words (`bot.store.contract.Storage.queue_states`): `queued`
(ready to run), `deferred` (waiting for its time: a target another run holds), `failed` (an
attempt failed and it waits to be tried again), `running`, `dead` (given up).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

STATES = ("queued", "deferred", "failed", "running", "dead")
WAITING = ("queued", "deferred", "failed")
BEAT_S = 5.0
"""How often a worker pool writes its heartbeat."""
SILENT_AFTER_S = 4 * BEAT_S
"""A worker whose last beat is older than this has stopped beating (three beats missed)."""
UNDECIDED = ""
"""The workflow of a job whose delivery is not decided yet."""


@dataclass(frozen=True, slots=True)
class StateCount:
    """One (workflow, state) of the queue: how many jobs, and when the oldest was enqueued."""

    workflow: str
    state: str
    jobs: int
    oldest_enqueued: float | None


@dataclass(frozen=True, slots=True)
class QueueLine:
    workflow: str
    counts: dict[str, int]
    oldest_wait: float | None
    """Seconds the longest-waiting job (queued, deferred or failed) has waited; None if none."""


@dataclass(frozen=True, slots=True)
class WorkerBeat:
    id: str
    host: str
    pid: int
    started_at: float
    beat_at: float
    runs: tuple[str, ...]


def queue_lines(states: Iterable[StateCount], now: float) -> list[QueueLine]:
    """One line per workflow (the undecided first, then by name), every state counted."""
    counts: dict[str, dict[str, int]] = {}
    oldest: dict[str, float] = {}
    for s in states:
        line = counts.setdefault(s.workflow, dict.fromkeys(STATES, 0))
        if s.state in line:
            line[s.state] += s.jobs
        if s.state in WAITING and s.oldest_enqueued is not None:
            oldest[s.workflow] = min(oldest.get(s.workflow, s.oldest_enqueued), s.oldest_enqueued)
    return [
        QueueLine(
            workflow=w,
            counts=counts[w],
            oldest_wait=None if w not in oldest else max(0.0, now - oldest[w]),
        )
        for w in sorted(counts)
    ]


def totals(lines: Sequence[QueueLine]) -> dict[str, int]:
    return {state: sum(line.counts[state] for line in lines) for state in STATES}


def is_silent(worker: WorkerBeat, now: float, *, after: float = SILENT_AFTER_S) -> bool:
    return now - worker.beat_at > after


def held_by_silent(
    workers: Iterable[WorkerBeat], now: float, *, after: float = SILENT_AFTER_S
) -> dict[str, WorkerBeat]:
    """The runs held by a worker that stopped beating, by run id: nothing works on them now
    unless another worker took them since (a run a live worker holds is not listed)."""
    alive: set[str] = set()
    silent: dict[str, WorkerBeat] = {}
    for worker in workers:
        if is_silent(worker, now, after=after):
            for run in worker.runs:
                silent.setdefault(run, worker)
        else:
            alive.update(worker.runs)
    return {run: worker for run, worker in silent.items() if run not in alive}
