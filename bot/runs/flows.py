"""What a workflow's flow gets from the run executor, and the shape of the table of flows.

A flow (`review`, `fix`, `decide`) runs a whole run of its workflow: it reads GitHub, runs its
workflow on the engine, and publishes. The executor does not import the flows: the wiring builds
the table (`bot.workflows.flows.FLOWS`, workflow name -> flow) and hands it to the executor, and
a flow sees the executor only as a `RunHost`, the few things it needs (the store, the mirrors,
the engine, recording and publishing a run). So nothing here imports a workflow.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from bot.engine.details import RunDetails
    from bot.engine.engine import Engine
    from bot.engine.workflow import WorkflowFn, WorkflowMeta
    from bot.git.checkout import Mirrors
    from bot.github.client import InstallationClient
    from bot.publish.publisher import Publisher
    from bot.runs.progress import Tracker
    from bot.store.contract import RunRecord, Storage
    from policies.config import RepoConfig
    from policies.event import Trigger
    from policies.outcome import Outcome, RunFacts

PUBLISHING = "publishing"  # the outcome is recorded and being posted
# Why a review still running stops when a newer push of its pull request is to be reviewed.
SUPERSEDED = "superseded by a newer review of this pull request"


class RunHost(Protocol):
    """The executor as a flow sees it."""

    store: Storage
    mirrors: Mirrors
    engine: Engine
    app_slug: str
    redactor: Callable[[str], str]
    clock: Callable[[], float]
    review_key: bytes
    carry_blocked: bool

    @property
    def bot_login(self) -> str: ...

    async def record(self, run_id: str, status: str, outcome: Outcome | None) -> None: ...

    def publisher_for(
        self,
        client: InstallationClient,
        trigger: Trigger,
        run: RunRecord,
        payload: Mapping[str, Any] | None,
        *,
        kind: str | None = None,
        workflow: str | None = None,
    ) -> Publisher: ...

    async def publish(
        self,
        publisher: Publisher,
        run_id: str,
        outcome: Outcome,
        *,
        hidden: str = "",
        conclusion: str | None = None,
    ) -> None: ...

    async def repo_config(self, client: InstallationClient) -> RepoConfig: ...

    async def workspace(
        self,
        client: InstallationClient,
        trigger: Trigger,
        payload: Mapping[str, Any] | None,
        head_sha: str | None,
    ) -> tuple[Path, str]: ...

    async def run_workflow(
        self,
        meta: WorkflowMeta,
        fn: WorkflowFn,
        args: dict[str, Any],
        *,
        git_dir: Path,
        base: str,
        run_id: str,
        publisher: Publisher,
        tracker: Tracker,
        resume_from: str | None = None,
    ) -> RunDetails: ...

    def failed_by(
        self,
        exc: BaseException,
        run_id: str,
        workflow: str,
        details: RunDetails | None,
        started: float,
    ) -> Outcome: ...

    def facts_of(
        self, finished: RunDetails, run_id: str, workflow: str, started: float
    ) -> RunFacts: ...


Flow = Callable[
    [
        RunHost,
        "InstallationClient",
        "Trigger",
        "RunRecord",
        "Mapping[str, Any] | None",
        "Publisher",
        float,
    ],
    Awaitable[None],
]
"""One run of a workflow, end to end: `flow(host, client, trigger, run, payload, publisher,
started)`; `publisher` has acknowledged the run, `started` is the executor's clock then."""

Flows = Mapping[str, Flow]
