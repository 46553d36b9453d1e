"""The worker pool: job -> stored delivery -> Event -> Trigger or Skip -> Run -> executor."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

import anyio
import anyio.abc
import anyio.to_thread

from bot import metrics
from bot.events import parse_event
from bot.github.errors import AccessRevoked, RateLimited
from bot.log import bound, get_logger
from bot.runs.heartbeat import beat_forever
from bot.runs.lifecycle import Access, InFlight, RunStopper, apply_change, finish_cancelled
from bot.store.contract import REPORTER_REPLY, BodyMissing, DeliveryRecord, RunRecord, Storage
from bot.store.queue.base import (
    Deferred,
    GiveUp,
    Job,
    JobQueue,
    JobStatus,
    LeasedQueue,
    LeaseLost,
    ThreadedLeasedQueue,
)
from bot.store.queue.fence import Fence, fenced
from policies.command_rate import WINDOW_S, is_limited, limited
from policies.config import ConfigError, RepoConfig, parse_repo_config
from policies.event import Decision, Event, Skip, SkipReason, Trigger
from policies.finding_fates import PullClosed, ThreadDeclined, closed_pull, declined_thread
from policies.interaction import resolve_run_interaction_policy
from policies.lifecycle import LifecycleChange, inactive_skip, lifecycle_change
from policies.outcome import OUTCOME_STATUSES
from policies.readiness import Setup, not_configured
from policies.rerun import foreign_check, needs_pull_lookup, with_pull
from policies.triggers import (
    AwaitingReporter,
    decide,
    is_reporter_comment,
    needs_permission,
    run_key,
)

log = get_logger(__name__)

DEFAULT_APP_SLUG = "repo-agent"
POLL_INTERVAL = 1.0
"""Seconds between claims of an idle pool that only its own process wakes (SQLite: the
receivers beside it do, `bot.intake.wakeup`); the fallback for a lost wake-up."""
WATCHED_POLL_INTERVAL = 5.0
"""The same for a pool whose database wakes it whoever commits (procrastinate's worker,
woken by Postgres's notifications): the poll only catches a notification lost on a dropped
connection."""


class ConfigLoader(Protocol):
    """Reads the repository's `.github/bot.yml` from its default branch, merged over defaults.

    Raises `policies.config.ConfigError` when the file is invalid (the delivery is skipped
    with that message); any other exception is treated as transient and the job is retried.
    """

    async def __call__(self, event: Event) -> RepoConfig: ...


class PermissionLookup(Protocol):
    """The sender's permission on the repository: admin, maintain, write, triage, read, none;
    None when it cannot be known (commands then fail closed)."""

    async def __call__(self, event: Event) -> str | None: ...


class PullLookup(Protocol):
    """The number of the open pull request of the event's repository whose head is the
    event's `head_sha` (a check's commit); None when there is none or it cannot be known."""

    async def __call__(self, event: Event) -> int | None: ...


class Executor(Protocol):
    """Carries out a run: builds its context, runs the workflow, publishes the outcome.

    It may be called again for the same run after a crash, so it must be idempotent.
    """

    async def __call__(self, trigger: Trigger, run: RunRecord) -> None: ...


PullClosedHandler = Callable[[PullClosed], Awaitable[str]]
ThreadDeclinedHandler = Callable[[ThreadDeclined], Awaitable[str]]
"""Learns the reason a person gave in declining a finding's thread; the line the delivery
keeps."""
"""Records the fates of a closed pull request's findings; returns the line the delivery keeps."""


class SkipHandler(Protocol):
    """Answers a skip that deserves a reply (an unknown command from a writer gets help).

    Called after the skip is recorded; it must be idempotent, as a retried job calls it again.
    """

    async def __call__(self, event: Event, skip: Skip) -> object: ...


async def default_config(event: Event) -> RepoConfig:
    """No repository access: every setting at its default."""
    return parse_repo_config(None)


async def unknown_permission(event: Event) -> str | None:
    """No GitHub access: the permission is unknown, so commands are refused."""
    return None


async def no_pull(event: Event) -> int | None:
    """No GitHub access: no pull request can be found at a check's head."""
    return None


@dataclass(frozen=True, slots=True)
class WorkerHooks:
    """The pieces a worker gets from outside; the defaults need no GitHub access."""

    config_loader: ConfigLoader = field(default=default_config)
    permission_lookup: PermissionLookup = field(default=unknown_permission)
    pull_lookup: PullLookup = field(default=no_pull)
    """Finds the pull request of a check run again whose payload lists none (a fork's)."""
    executor: Executor | None = None
    skip_handler: SkipHandler | None = None
    background: tuple[Callable[[], Coroutine[Any, Any, object]], ...] = ()
    """Housekeeping that runs beside the pool for its lifetime (e.g. the mirror sweep)."""
    app_slug: str | None = None
    """Overrides the slug from settings, e.g. once learned from `GET /app`."""
    app_id: int | None = None
    """The App's own id: a check is run again only when it is this App's (`policies.rerun`)."""
    access: Access | None = None
    """The GitHub client's hold on installation tokens, dropped when an installation is lost."""
    stop_run: RunStopper | None = None
    """Stops a run on this process's engine (the lifecycle of an installation needs it)."""
    setup: Setup | None = None
    """What the operator configured (the wiring always says): a trigger it cannot carry out
    is skipped `not_configured` before a run is recorded (`policies.readiness`). None: not
    checked, for a caller that only wants the decisions recorded."""
    thread_declined: ThreadDeclinedHandler | None = None
    """Learns now from a reply that declines one of the app's findings
    (`pull_request_review_comment.created`, `policies.finding_fates.declined_thread`)."""
    pull_closed: PullClosedHandler | None = None
    """Records what became of a closed pull request's findings (`pull_request.closed`,
    `bot.workflows.review.fates`); None: that delivery is skipped as an unrouted action."""


@dataclass(frozen=True, slots=True)
class Attempt:
    """How one attempt at a job ended: `error` is what its work raised, if anything."""

    inflight: InFlight
    fence: Fence
    error: Exception | None


def describe_failure(error: Exception) -> str:
    return f"{type(error).__name__}: {error}"


def retryable(error: Exception) -> bool:
    """Whether another attempt may succeed where this one failed."""
    return not isinstance(error, GiveUp | AccessRevoked)  # trying again cannot help


def retry_not_before(error: Exception) -> float | None:
    """GitHub's rate limit says when to come back; an earlier try would only fail again."""
    return error.retry_at if isinstance(error, RateLimited) else None


class Runner(Protocol):
    """How a worker pool gets its jobs and settles them: the pool's own claim loop over the
    JobQueue (SQLite: `Worker` itself), or a job engine that runs them and calls back into
    the worker's `load` and `attempt` (Postgres: `bot.runs.procrastinate_pool`)."""

    async def run(self, worker: Worker, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Run the worker's jobs until cancelled."""
        ...

    async def run_until_idle(self, worker: Worker) -> int:
        """Run the ready jobs, one at a time, until none is left; how many."""
        ...


class Worker:
    """`concurrency` tasks that claim jobs, decide, record and hand triggers to the executor."""

    def __init__(
        self,
        store: Storage,
        queue: JobQueue,
        hooks: WorkerHooks,
        *,
        app_slug: str,
        concurrency: int = 2,
        lease_seconds: float = 60.0,
        poll_interval: float | None = None,
        worker_id: str | None = None,
        runner: Runner | None = None,
    ) -> None:
        """`runner`, when given, gets and settles the jobs instead of the pool's own claim
        loop over `queue` (which then only enqueues and cancels); without one, `queue` must
        be a LeasedQueue, claimed every `poll_interval` (POLL_INTERVAL) when idle."""
        if concurrency < 1:
            raise ValueError("a worker needs at least one task")
        if lease_seconds <= 0:
            raise ValueError("lease_seconds must be positive")
        self.store = store
        self.queue = queue
        self.hooks = hooks
        self.app_slug = hooks.app_slug or app_slug
        self.concurrency = concurrency
        self.lease_seconds = lease_seconds
        if runner is None and not isinstance(queue, LeasedQueue):
            raise ValueError(f"a {type(queue).__name__} needs a runner: it claims no jobs")
        self.poll_interval = POLL_INTERVAL if poll_interval is None else poll_interval
        self.worker_id = worker_id or f"{os.uname().nodename}-{os.getpid()}-{secrets.token_hex(3)}"
        self.runner = runner
        self._wakeup: anyio.Event | None = None
        self._inflight: dict[str, InFlight] = {}  # by delivery id: the jobs handled here

    @property
    def leased(self) -> LeasedQueue:
        """The queue, for the pool's own claim loop (a queue without a runner is one)."""
        if not isinstance(self.queue, LeasedQueue):
            raise TypeError(f"a {type(self.queue).__name__} claims no jobs; its runner does")
        return self.queue

    def held_runs(self) -> list[str]:
        """The runs this pool's jobs work on now (its heartbeat says so)."""
        return [run for inflight in list(self._inflight.values()) for run in inflight.run_ids]

    def wake(self, new_jobs: int = 1) -> None:
        """Stop idling: new jobs were committed. Call from the worker's event loop."""
        if self._wakeup is not None:
            self._wakeup.set()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Run the pool until cancelled."""
        if self.runner is not None:
            await self.runner.run(self, task_status=task_status)
            return
        self._wakeup = anyio.Event()
        log.info(
            "worker pool started",
            extra={"worker_id": self.worker_id, "tasks": self.concurrency},
        )
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(beat_forever, self.store, self.worker_id, self.held_runs)
            for n in range(self.concurrency):
                tasks.start_soon(self._loop, f"{self.worker_id}/{n}")
            for job in self.hooks.background:
                tasks.start_soon(job)
            task_status.started()

    async def run_until_idle(self, worker_id: str = "once") -> int:
        """Handle ready jobs one after another until none is left; returns how many."""
        if self.runner is not None:
            return await self.runner.run_until_idle(self)
        handled = 0
        while (job := await self.leased.claim(worker_id, self.lease_seconds)) is not None:
            await self.handle(job, worker_id)
            handled += 1
        return handled

    async def _loop(self, worker_id: str) -> None:
        while True:
            try:
                job = await self.leased.claim(worker_id, self.lease_seconds)
            except Exception:
                log.exception("claiming a job failed", extra={"worker_id": worker_id})
                job = None
            if job is not None:
                try:
                    await self.handle(job, worker_id)
                except Exception:  # the lease runs out and the job is claimed again
                    log.exception("handling a job failed", extra={"job_id": job.id})
                continue
            wakeup = self._wakeup
            if wakeup is None:
                wakeup = self._wakeup = anyio.Event()
            with anyio.move_on_after(self.poll_interval):
                await wakeup.wait()
            if wakeup.is_set() and self._wakeup is wakeup:
                self._wakeup = anyio.Event()

    async def handle(self, job: Job, worker_id: str) -> None:
        """Handle one claimed job; never raises for a bad delivery (it is recorded instead)."""
        with bound(delivery_id=job.delivery_id, job_id=job.id):
            unusable = await self.load(job.delivery_id)
            if isinstance(unusable, str):
                await self.leased.fail(job.id, worker_id, unusable, retry=False)
                metrics.job_dead()
                return
            delivery = unusable
            with bound(event=delivery.event):
                await self._handle_leased(job, worker_id, delivery)

    async def load(self, delivery_id: str) -> DeliveryRecord | str:
        """The job's stored delivery, or why it cannot be handled (recorded where the
        delivery exists): trying again would read the same missing bytes."""
        try:
            delivery = await anyio.to_thread.run_sync(self.store.get_delivery, delivery_id)
        except BodyMissing as exc:
            reason = f"body_missing: {exc}"
            log.error("stored body unreadable", extra={"reason": reason})
            await self._record(delivery_id, "error", reason=reason)
            return reason
        if delivery is None:
            log.error("job names a delivery that is not stored")
            return "delivery not stored"
        return delivery

    async def attempt(
        self,
        job_id: int,
        delivery: DeliveryRecord,
        make_fence: Callable[[anyio.CancelScope], Fence],
        keep_alive: Callable[[Fence], Coroutine[Any, Any, None]] | None = None,
    ) -> Attempt:
        """One attempt at a job, its delivery loaded: decide, record and run, under the fence
        that `make_fence` builds for the attempt's cancel scope (`keep_alive` runs beside it,
        e.g. a lease's heartbeat). Never raises what the work raised: the attempt says."""
        errors: list[Exception] = []
        inflight: InFlight | None = None
        fence: Fence | None = None
        try:
            async with anyio.create_task_group() as tasks:
                inflight = InFlight(delivery.guid, tasks.cancel_scope, event=delivery.event)
                self._inflight[delivery.guid] = inflight
                fence = make_fence(tasks.cancel_scope)

                async def work(fence: Fence) -> None:
                    try:
                        with fenced(fence):  # the run's model calls and writes check it
                            await self._process(delivery)
                    except Exception as exc:
                        errors.append(exc)
                    finally:
                        tasks.cancel_scope.cancel()

                if keep_alive is not None:
                    tasks.start_soon(keep_alive, fence)
                tasks.start_soon(work, fence)
        finally:
            if inflight is not None and self._inflight.get(delivery.guid) is inflight:
                del self._inflight[delivery.guid]
        assert inflight is not None and fence is not None
        if inflight.cancelled is not None:
            # The installation was lost while the job ran: record, post nothing, leave the
            # job as the change cancelled it.
            await anyio.to_thread.run_sync(finish_cancelled, self.store, inflight)
            log.info("job cancelled: the app lost access", extra={"reason": inflight.cancelled})
        elif fence.lost:
            # The job is another claim's now: neither done nor failed by this one.
            log.warning(
                "lease lost; another worker may be handling the job",
                extra={"run_id": ",".join(inflight.run_ids)},
            )
        return Attempt(inflight, fence, errors[0] if errors else None)

    async def _handle_leased(self, job: Job, worker_id: str, delivery: DeliveryRecord) -> None:
        async def keep_lease(fence: Fence) -> None:
            while True:
                await anyio.sleep(self.lease_seconds / 3)
                try:
                    await self.leased.heartbeat(job.id, worker_id, self.lease_seconds)
                except LeaseLost as exc:
                    fence.lose(str(exc))
                    return
                except Exception:  # a busy database now and then; the lease has slack
                    log.warning("extending the lease failed", exc_info=True)

        claim = (job.id, worker_id, job.lease_token)

        def make_fence(scope: anyio.CancelScope) -> Fence:
            return Fence(
                lambda: self.leased.still_holds(*claim),
                job_id=job.id,
                delivery_id=delivery.guid,
                on_lost=scope.cancel,
                holds_now=(
                    partial(self.queue.still_holds_sync, *claim)
                    if isinstance(self.queue, ThreadedLeasedQueue)
                    else None
                ),
            )

        done = await self.attempt(job.id, delivery, make_fence, keep_lease)
        if done.inflight.cancelled is not None or done.fence.lost:
            return
        try:
            if isinstance(done.error, Deferred):
                deferred = done.error
                await self.leased.defer(job.id, worker_id, str(deferred), deferred.not_before)
            elif done.error is not None:
                await self._failed(job, worker_id, delivery, done.error)
            else:
                await self.leased.complete(job.id, worker_id)
        except LeaseLost:
            log.warning("lease lost before the job could be closed")

    async def _failed(
        self, job: Job, worker_id: str, delivery: DeliveryRecord, error: Exception
    ) -> None:
        log.error(
            "handling the delivery failed",
            exc_info=error,
            extra={"attempt": job.attempts, "max_attempts": job.max_attempts},
        )
        after = await self.leased.fail(
            job.id,
            worker_id,
            describe_failure(error),
            retry=retryable(error),
            not_before=retry_not_before(error),
        )
        if after.status is JobStatus.DEAD:
            await self.dead(delivery.guid, after.attempts, error)

    async def dead(self, guid: str, attempts: int, error: Exception) -> None:
        """A job given up: say so on its delivery, and end the runs nothing works on now."""
        reason = f"gave up after {attempts} attempts: {describe_failure(error)}"
        await self._record(guid, "error", reason=reason)
        await anyio.to_thread.run_sync(self._fail_unfinished_runs, guid)
        log.error("job is dead", extra={"reason": reason})
        metrics.job_dead()

    def _fail_unfinished_runs(self, guid: str) -> None:
        """Nothing works on a dead job's run any more: say so, or `status` shows it running."""
        for run in self.store.runs_for_delivery(guid):
            if run.status not in OUTCOME_STATUSES:
                self.store.update_run(run.id, status="failed")

    async def _record(
        self, guid: str, decision: str, *, reason: str | None = None, workflow: str | None = None
    ) -> None:
        await anyio.to_thread.run_sync(
            lambda: self.store.record_decision(guid, decision, reason=reason, workflow=workflow)
        )

    async def _process(self, delivery: DeliveryRecord) -> None:
        decided = await self._decide(delivery)
        if decided is None:
            return
        event, decision = decided
        if isinstance(decision, LifecycleChange):
            await self._lifecycle(delivery, decision)
            return
        if isinstance(decision, PullClosed):
            await self._pull_closed(delivery, decision)
            return
        if isinstance(decision, ThreadDeclined):
            await self._thread_declined(delivery, decision)
            return
        if isinstance(decision, Skip):
            await self._record(delivery.guid, "skip", reason=decision.message)
            log.info("skipped", extra={"decision": "skip", "reason": decision.message})
            if self.hooks.skip_handler is not None:
                await self.hooks.skip_handler(event, decision)
            return
        await self._start_run(delivery, decision)

    async def _lifecycle(self, delivery: DeliveryRecord, change: LifecycleChange) -> None:
        """Carry out an installation's lifecycle change (`bot.runs.lifecycle`) and record it."""
        with bound(installation_id=change.installation_id):
            reason = await apply_change(
                change,
                delivery_id=delivery.guid,
                store=self.store,
                queue=self.queue,
                inflight=list(self._inflight.values()),
                access=self.hooks.access,
                stop_run=self.hooks.stop_run,
            )
            await self._record(delivery.guid, "lifecycle", reason=reason)
            log.info("installation lifecycle change", extra={"reason": reason})

    async def _pull_closed(self, delivery: DeliveryRecord, closed: PullClosed) -> None:
        """Record the fates of the closed pull request's findings, and the delivery's decision."""
        assert self.hooks.pull_closed is not None  # `_decide` returns PullClosed only then
        with bound(repo=closed.repo, number=closed.number):
            reason = await self.hooks.pull_closed(closed)
            await self._record(delivery.guid, "findings", reason=reason)
            log.info("finding fates recorded", extra={"reason": reason})

    async def _thread_declined(self, delivery: DeliveryRecord, declined: ThreadDeclined) -> None:
        """Learn from a reply declining a finding, and record the delivery's decision."""
        assert self.hooks.thread_declined is not None  # `_decide` returns it only then
        with bound(repo=declined.repo, number=declined.number):
            reason = await self.hooks.thread_declined(declined)
            await self._record(delivery.guid, "findings", reason=reason)
            log.info("a declined finding's thread read", extra={"reason": reason})

    async def _decide(
        self, delivery: DeliveryRecord
    ) -> tuple[Event, Decision | LifecycleChange | PullClosed | ThreadDeclined] | None:
        """The decision for a delivery, or None when its payload is unusable (then recorded)."""

        if delivery.event == "ping":
            ping = Event(name="ping", delivery_id=delivery.guid)
            return ping, Skip(SkipReason.UNSUPPORTED_EVENT, "ping: GitHub checking the webhook")
        try:
            payload = json.loads(delivery.body)
        except (ValueError, RecursionError) as exc:
            payload = exc
        if not isinstance(payload, dict):
            reason = "invalid_payload: the stored body is not a JSON object"
            await self._record(delivery.guid, "error", reason=reason)
            log.error("stored payload unusable", extra={"reason": reason})
            return None
        try:
            event = parse_event(delivery.event, delivery.guid, payload)
        except Exception as exc:  # parse_event is lenient; this is a bug, not a retry case
            reason = f"invalid_payload: {type(exc).__name__}: {exc}"
            await self._record(delivery.guid, "error", reason=reason)
            log.exception("payload could not be read")
            return None
        inflight = self._inflight.get(delivery.guid)
        if inflight is not None:  # before the state is read: see bot.runs.lifecycle
            inflight.installation_id, inflight.repo = event.installation_id, event.repo_full_name
        change = lifecycle_change(event)
        if change is not None:
            return event, change
        if event.installation_id is not None:
            installation = event.installation_id
            state = await anyio.to_thread.run_sync(self.store.installation_state, installation)
            inactive = inactive_skip(installation, state)
            if inactive is not None:
                return event, inactive
        closed = closed_pull(event) if self.hooks.pull_closed is not None else None
        if closed is not None:
            return event, closed
        declined = (
            declined_thread(event, self.app_slug)
            if self.hooks.thread_declined is not None
            else None
        )
        if declined is not None:
            return event, declined
        refused = foreign_check(event, self.hooks.app_id)
        if refused is not None:
            return event, refused
        if needs_pull_lookup(event):  # a check run again whose payload lists no pull request
            found = with_pull(event, await self.hooks.pull_lookup(event))
            if isinstance(found, Skip):
                return event, found
            event = found
        with bound(repo=event.repo_full_name, action=event.action):
            config_error: str | None = None
            try:
                config = await self.hooks.config_loader(event)
            except ConfigError as exc:
                # Decided on defaults; events meant for the bot then skip with this message.
                config, config_error = parse_repo_config(None), str(exc)
                log.warning("repository config is invalid", extra={"error": config_error})
            awaiting: AwaitingReporter | None = None
            if is_reporter_comment(event):
                awaiting = await anyio.to_thread.run_sync(lambda: self._awaiting_reporter(event))
            # Both parse the comment as CommonMark: a hostile 64 KiB comment takes seconds,
            # which must not stall the event loop (and every other job with it).
            wanted = await anyio.to_thread.run_sync(
                lambda: needs_permission(
                    event,
                    config,
                    self.app_slug,
                    config_error=config_error,
                    awaiting_reporter=awaiting,
                )
            )
            permission: str | None = None
            if wanted:
                permission = await self.hooks.permission_lookup(event)
            decision = await anyio.to_thread.run_sync(
                lambda: decide(
                    event,
                    config,
                    app_slug=self.app_slug,
                    permission=permission,
                    config_error=config_error,
                    awaiting_reporter=awaiting,
                )
            )
            if isinstance(decision, Trigger) and self.hooks.setup is not None:
                # Before the trigger's key is claimed: a replay of it later runs it.
                decision = not_configured(decision, self.hooks.setup) or decision
            if isinstance(decision, Trigger):
                decision = await self._unless_replayed(delivery, event, decision)
            if isinstance(decision, Trigger) and is_limited(decision.command):
                decision = await self._within_rate(decision, config.commands.per_hour)
            return event, decision

    async def _within_rate(self, trigger: Trigger, per_hour: int) -> Decision:
        """The command, unless its author gave more than `per_hour` commands in this
        repository within the hour (`policies.command_rate`)."""
        now = self.store.clock()
        repo, actor, guid = trigger.repo_full_name, trigger.actor, trigger.delivery_id
        count = await anyio.to_thread.run_sync(
            lambda: self.store.count_command(guid, repo, actor, at=now, window=WINDOW_S)
        )
        if count <= per_hour:
            return trigger
        answer = await anyio.to_thread.run_sync(
            lambda: self.store.claim_command_notice(repo, actor, at=now, window=WINDOW_S)
        )
        return limited(actor, count, per_hour, answer=answer) or trigger

    async def _unless_replayed(
        self, delivery: DeliveryRecord, event: Event, trigger: Trigger
    ) -> Decision:
        """The trigger, unless another delivery already holds its key (`run_key`): the same
        signed body sent again under a new GUID. A retried job holds its own key still."""
        key = run_key(event, trigger, hashlib.sha256(delivery.body).hexdigest())
        holder = await anyio.to_thread.run_sync(self.store.claim_trigger, key, delivery.guid)
        if holder == delivery.guid:
            return trigger
        return Skip(SkipReason.REPLAYED, f"delivery {holder} asked for the same {trigger.workflow}")

    def _awaiting_reporter(self, event: Event) -> AwaitingReporter | None:
        """The store's facts about triage on the issue the reporter commented on.

        The delivery's own run, if an earlier attempt at this job made one, does not count:
        a retried job decides as the first attempt did.
        """
        if not event.repo_full_name or event.number is None:
            return None
        repo, number, guid = event.repo_full_name, event.number, event.delivery_id
        latest = self.store.latest_run(repo, "issue", number, "triage", exclude_delivery=guid)
        replies = self.store.count_runs_for_reason(
            repo, "issue", number, "triage", REPORTER_REPLY, exclude_delivery=guid
        )
        return AwaitingReporter(latest.status if latest else None, replies)

    async def _start_run(self, delivery: DeliveryRecord, trigger: Trigger) -> None:
        # The mode comes from values set here, never from the payload: always webhook.
        policy = resolve_run_interaction_policy({"context": {"channel_name": "github"}})
        run = await anyio.to_thread.run_sync(
            lambda: self.store.create_run(
                delivery_id=delivery.guid,
                repo=trigger.repo_full_name,
                target_kind=trigger.target_kind,
                number=trigger.number,
                workflow=trigger.workflow,
                mode=policy.mode.value,
            )
        )
        inflight = self._inflight.get(delivery.guid)
        if inflight is not None:
            inflight.run_ids.append(run.id)
        reason = REPORTER_REPLY if trigger.reporter_reply else trigger.command
        await self._record(delivery.guid, "trigger", workflow=trigger.workflow, reason=reason)
        metrics.run_started(trigger.workflow)
        with bound(run_id=run.id, repo=trigger.repo_full_name):
            log.info(
                "run created",
                extra={
                    "decision": "trigger",
                    "workflow": trigger.workflow,
                    "mode": run.mode,
                    "target": f"{trigger.target_kind}#{trigger.number}",
                },
            )
            executor = self.hooks.executor
            if executor is None:
                # Nothing will ever carry it out: never leave it `queued`.
                await anyio.to_thread.run_sync(
                    lambda: self.store.update_run(run.id, status="skipped")
                )
                log.info("run recorded as skipped; no executor is configured")
                return
            await executor(trigger, run)
