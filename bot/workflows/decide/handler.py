"""A `decide` follow-up's handler: what it is given (`FollowUp`) and what it returns (`Resumed`).

Apart from the flow, so a workflow with its own follow-up (`fix`) can write one without importing
the flow that calls it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from policies.decide import Refused
from policies.outcome import Blocked, Outcome

if TYPE_CHECKING:
    from bot.engine.details import RunDetails
    from bot.github.client import InstallationClient
    from bot.publish.publisher import Publisher
    from bot.runs.flows import RunHost
    from bot.store.contract import RunRecord
    from policies.event import Trigger


@dataclass(frozen=True, slots=True)
class FollowUp:
    """Everything a follow-up handler needs to resume one BLOCKED run.

    The follow-up runs under the `decide` run's id (`run.id`: the store's and the engine's),
    and resumes `blocked` (`resume_from=blocked.id`). `args` are the arguments the blocked
    run's workflow was given (None when they were not recorded); `decision` is what the
    follow-up adds as `args["decision"]` (`policies.decide.decision_args`).
    """

    client: InstallationClient
    trigger: Trigger
    run: RunRecord
    payload: Mapping[str, Any] | None
    blocked: RunRecord
    workflow: str
    question: Blocked
    decision: dict[str, Any]
    args: dict[str, Any] | None
    publisher: Publisher
    """The follow-up's own comment (and check run on a pull request), for progress."""
    started: float


@dataclass(frozen=True, slots=True)
class Resumed:
    """What a handler's follow-up concluded; `details` gives the replay count."""

    outcome: Outcome
    details: RunDetails | None = None


FollowUpHandler = Callable[["RunHost", FollowUp], Awaitable[Resumed | Refused]]
"""Runs one follow-up and returns its outcome, unpublished (the caller records, posts and
links it), or `Refused` when it cannot run (its reply is posted, nothing else). An exception
becomes a published `failed` outcome, except `RateLimited`, which re-queues the job."""
