"""The run executor: Trigger + Run -> context -> mirror -> engine run -> Outcome -> publication.

The worker calls `RunExecutor(trigger, run)` for every Trigger. The executor

1. reacts 👀 on the command's comment (commands only);
2. answers `help`, `status` and `stop` itself, without a model, as a sticky reply;
3. hands `decide` to the `decide` flow (`bot.workflows.decide.flow`): it resumes the newest BLOCKED run here
   with the maintainer's answer, or says in a sticky reply why it cannot;
4. otherwise reads the context (`bot.runs.context`), makes sure the mirror holds the commit
   the agents read (the PR head, or the default branch for issues), runs the workflow on the
   engine in webhook mode, maps its return value onto an Outcome and publishes it
   (`bot.publish.publisher`), editing the progress comment as the run goes (`review`, `fix`
   and `decide` have their own flows, from the table the wiring hands over: `bot.runs.flows`);
5. for triage, offers the repository's labels to the workflow and, where `.github/bot.yml`
   says `triage.apply_labels: true`, applies the existing ones it chose before posting
   (`bot.github.labels`; a refusal becomes a note in the comment); a `needs_info` outcome
   addresses the issue's author, and says whether their reply will run triage again;
6. records the outcome on the run ("publishing") before posting it, and its final status after.

A run that fails for any reason (context, checkout, model, engine) still ends with a published
`failed` outcome that says what failed, redacted. The one exception is GitHub's rate limit
beyond the client's cap (`RateLimited`): the executor lets it propagate so the worker re-queues
the job, and posts nothing. Calling the executor again for the same run (a retried job) edits
the same comment; a run already finished is not run again; a run whose outcome was recorded but
not posted (GitHub down at the end) posts the recorded outcome without running the workflow again.
`answer_skip` answers an unknown command from someone with write access with the help text,
and says where a broken `.github/bot.yml` matters that the app is off (`bot.runs.config_notice`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import secrets
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from bot import metrics
from bot.engine.artifacts import JOURNAL, RunNotFound
from bot.engine.budget import RunBudget
from bot.engine.details import RunDetails
from bot.github.errors import RateLimited
from bot.github.labels import apply_labels, label_names
from bot.log import bound, get_logger
from bot.publish.publisher import CommentKind, Publisher
from bot.publish.render import Progress, render_reply
from bot.redact import redact
from bot.runs.config_notice import answer_config_error
from bot.runs.context import default_branch_of, fetch_context, sanitize
from bot.runs.flows import PUBLISHING, SUPERSEDED, Flows
from bot.runs.learn_replies import COMMANDS as LEARNING_COMMANDS
from bot.runs.learn_replies import answer_learning
from bot.runs.leftovers import clear_interrupted
from bot.runs.progress import Tracker, clean_model_text, usage_of
from bot.runs.replies import answer_command, answer_unknown
from bot.store.queue.base import Deferred, GiveUp
from bot.store.queue.fence import fence_lost
from bot.store.records import PUBLISHED_ARTIFACT
from bot.store.sqlite import REPORTER_REPLY, BodyMissing
from bot.workflows import MODEL_FREE, get_workflow
from bot.workflows.instructions import with_instructions
from bot.workflows.thread_context import IN_THREAD, with_thread
from policies.budget import BudgetLimits, run_limits, stopped_summary
from policies.carried_run import CarriedRun, carried_line
from policies.command_rate import ANSWER, WINDOW_S, limit_reply
from policies.config import RepoConfig, parse_repo_config
from policies.event import Event, Skip, SkipReason
from policies.interaction import resolve_run_interaction_policy
from policies.outcome import (
    OUTCOME_STATUSES,
    Outcome,
    RunFacts,
    failed_outcome,
    outcome_from_run,
)
from policies.outcome_json import outcome_from_json, outcome_to_json
from policies.triggers import MAX_REPORTER_REPLIES, comment_identity

if TYPE_CHECKING:
    from bot.engine.engine import Engine
    from bot.engine.types import AgentType
    from bot.engine.workflow import WorkflowFn, WorkflowMeta
    from bot.git.checkout import Mirrors
    from bot.github.client import GitHubApp, InstallationClient
    from bot.store.contract import RunRecord, Storage
    from policies.event import Trigger

log = get_logger(__name__)

INTERRUPTIONS_BEFORE_GIVING_UP = 3
TARGET_LEASE_S = 30.0  # a target held by a worker that died frees itself after this
TARGET_POLL_S = 1.0  # how often a run renews its target and looks for a stop request
# A run whose target another run holds waits this long in its worker slot (a superseded
# review ends within it), then gives the slot back and is tried again this much later.
TARGET_WAIT_IN_SLOT_S = 10.0
TARGET_RETRY_S = 15.0


def describe_error(exc: BaseException) -> str:
    """A one-line account of what failed, for people (redacted by the publisher)."""
    kind = type(exc).__name__
    text = " ".join(str(exc).split())[:500]
    return f"{kind}: {text}" if text else kind


class RunExecutor:
    """The worker's `executor`: carries out one run end to end (see the module docstring)."""

    def __init__(
        self,
        *,
        github: GitHubApp,
        engine: Engine,
        mirrors: Mirrors,
        store: Storage,
        app_slug: str,
        flows: Flows,
        redactor: Callable[[str], str] = redact,
        progress_interval: float = 3.0,
        clock: Callable[[], float] = time.monotonic,
        config_reader: Callable[[InstallationClient], Awaitable[RepoConfig]] | None = None,
        review_key: bytes | None = None,
        agent_types: Callable[[RepoConfig], Mapping[str, AgentType]] | None = None,
        run_caps: BudgetLimits | None = None,
        carry_blocked: bool = False,
    ) -> None:
        self.github = github
        # The operator's caps on every run's budget (BOT_MAX_RUN_TOKENS, BOT_MAX_RUN_COST_USD,
        # BOT_DAILY_TOKENS); each repository's `budget` is capped by them.
        self.run_caps = run_caps or BudgetLimits()
        # The flows by workflow name (`review`, `fix`, `decide`), from the table the wiring
        # builds: the executor never imports a workflow's effects itself.
        self.flows = flows
        # Signs the review memory mirrored in sticky summaries (`bot.workflows.review.memory`); without
        # one from the settings, a key of this process (the store stays the memory).
        self.review_key = review_key if review_key is not None else secrets.token_bytes(32)
        self.carry_blocked = carry_blocked
        """A BLOCKED run's comment carries its record, signed (`policies.carried_run`), for a
        `decide` in a process that has no store of it (`bot action`)."""
        self.config_reader = config_reader
        self._configs: weakref.WeakKeyDictionary[InstallationClient, RepoConfig] = (
            weakref.WeakKeyDictionary()
        )
        # The agent types of a run in a repository (its `agents` added); None: the engine's.
        self.agent_types = agent_types
        self.engine = engine
        self.mirrors = mirrors
        self.store = store
        self.app_slug = app_slug
        self.redactor = redactor
        self.progress_interval = progress_interval
        self.clock = clock
        self._engine_started: set[str] = set()
        """Runs whose workflow reached the engine in this attempt (a stop then goes there)."""
        self._resuming: set[str] = set()
        """Runs whose interrupted attempt this attempt resumes from the engine's journal."""

    @property
    def bot_login(self) -> str:
        return f"{self.app_slug}[bot]"

    async def __call__(self, trigger: Trigger, run: RunRecord) -> None:
        with bound(run_id=run.id, workflow=trigger.workflow, repo=trigger.repo_full_name):
            if run.status in OUTCOME_STATUSES:
                log.info("run already finished; not running it again", extra={"status": run.status})
                return
            if trigger.installation_id is None or "/" not in trigger.repo_full_name:
                log.error("the trigger names no installation or repository; nothing can be posted")
                await self.record(run.id, "failed", None)
                metrics.run_finished(trigger.workflow, "failed", None)
                return
            owner, repo = trigger.repo_full_name.split("/", 1)
            client = self.github.installation(trigger.installation_id, owner, repo)
            started = time.monotonic()
            try:
                await self._execute_held(client, trigger, run)
            except RateLimited:
                # Not an interruption: the next attempt starts a running run as a queued one
                # (one whose outcome is recorded stays `publishing`, and is posted then).
                current = await anyio.to_thread.run_sync(self.store.get_run, run.id)
                if current is not None and current.status == "running":
                    await self.record(run.id, "queued", None)
                raise
            finally:
                self._resuming.discard(run.id)
            # Every way through ends in a recorded status: read it back once rather than
            # count in each of them.
            finished = await anyio.to_thread.run_sync(self.store.get_run, run.id)
            if finished is not None and finished.status in OUTCOME_STATUSES:
                metrics.run_finished(trigger.workflow, finished.status, time.monotonic() - started)

    async def _execute_held(
        self, client: InstallationClient, trigger: Trigger, run: RunRecord
    ) -> None:
        """`_execute` while holding the run's target (one run per repository, issue or pull
        request, and workflow, across every worker), and acting on stops asked of it."""
        if trigger.workflow in MODEL_FREE:  # a reply, at once: `stop` must never wait
            await self._begin_attempt(client, trigger, run)
            await self._execute(client, trigger, run)
            return
        await self._acquire_target(trigger, run)
        stopped: list[str] = []
        failed: list[Exception] = []  # raised as it is, not in a group: the worker reads it
        try:
            # Counted once it holds its target: a wait for another run is not an attempt.
            await self._begin_attempt(client, trigger, run)
            async with anyio.create_task_group() as tasks:

                async def body() -> None:
                    try:
                        await self._execute(client, trigger, run)
                    except Exception as exc:
                        failed.append(exc)
                    tasks.cancel_scope.cancel()

                tasks.start_soon(self._watch, run.id, tasks.cancel_scope, stopped)
                tasks.start_soon(body)
            if failed:
                raise failed[0]
        finally:
            self._engine_started.discard(run.id)
            # After a lost lease the target is the new holder's (the same run id): keep off.
            if not fence_lost():
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(self.store.release_target, run.id)
        current = await anyio.to_thread.run_sync(self.store.get_run, run.id)
        if stopped and current is not None and current.status not in OUTCOME_STATUSES:
            # Stopped before its workflow started (fetching, reading the context): say so.
            payload = await self._payload(run.delivery_id)
            facts = RunFacts(run_id=run.id, workflow=trigger.workflow, status="failed")
            outcome = failed_outcome(
                facts, stopped[0], summary=f"The run was stopped: {stopped[0]}."
            )
            await self.publish(self.publisher_for(client, trigger, run, payload), run.id, outcome)

    async def _begin_attempt(
        self, client: InstallationClient, trigger: Trigger, run: RunRecord
    ) -> None:
        """Count this attempt; one that finds its run still `running` resumes an attempt
        whose worker died, or gives the run up after too many such deaths (`GiveUp`)."""
        attempts = await anyio.to_thread.run_sync(self.store.start_attempt, run.id)
        if run.status == "running":  # the last attempt never ended: its worker died
            if attempts > INTERRUPTIONS_BEFORE_GIVING_UP:
                await self._give_up(client, trigger, run, attempts - 1)
            log.warning(
                "resuming a run whose last attempt was interrupted", extra={"attempt": attempts}
            )
            self._resuming.add(run.id)

    async def _acquire_target(self, trigger: Trigger, run: RunRecord) -> None:
        """Wait until this run holds its target. A command or triage queues behind the run
        that holds it; a review of a new push asks the older review to stop (superseded).
        Past TARGET_WAIT_IN_SLOT_S the job goes back to the queue (`Deferred`), so a long
        run does not keep the runs queued behind it in worker slots."""
        waiting_for = None
        give_back_at = time.monotonic() + TARGET_WAIT_IN_SLOT_S
        while True:
            acquire = functools.partial(
                self.store.acquire_target,
                run,
                workflow=trigger.workflow,
                until=self.store.clock() + TARGET_LEASE_S,
            )
            holder = await anyio.to_thread.run_sync(acquire)
            if holder is None:
                return
            if holder != waiting_for:
                waiting_for = holder
                log.info("waiting for the run that holds this target", extra={"holder": holder})
                if trigger.workflow == "review" and trigger.command is None:
                    await anyio.to_thread.run_sync(self.store.request_stop, holder, SUPERSEDED)
            if time.monotonic() >= give_back_at:
                log.info("back to the queue until the target is free", extra={"holder": holder})
                raise Deferred(f"waiting for run {holder}", self.store.clock() + TARGET_RETRY_S)
            await anyio.sleep(TARGET_POLL_S)

    async def _watch(self, run_id: str, scope: anyio.CancelScope, stopped: list[str]) -> None:
        """Keep the target held, and stop the run when any worker's `stop` asks for it: its
        engine run if it has one here, else everything before it (`scope`)."""
        while True:
            await anyio.sleep(TARGET_POLL_S)
            until = self.store.clock() + TARGET_LEASE_S
            await anyio.to_thread.run_sync(self.store.refresh_target, run_id, until)
            reason = await anyio.to_thread.run_sync(self.store.stop_requested, run_id)
            if reason is None:
                continue
            log.info("stop requested", extra={"reason": reason})
            try:
                await self.engine.stop(run_id, reason)
            except RunNotFound:
                if run_id in self._engine_started:
                    return  # its workflow has ended: the outcome is being posted
                stopped.append(reason)
                scope.cancel()
            return

    async def _give_up(
        self, client: InstallationClient, trigger: Trigger, run: RunRecord, interrupted: int
    ) -> None:
        """Post a failed outcome for a run whose attempts keep killing their worker, and end
        its job for good (`GiveUp`): a fourth try would most likely kill the next one too."""
        payload = await self._payload(run.delivery_id)
        publisher = self.publisher_for(client, trigger, run, payload)
        facts = RunFacts(run_id=run.id, workflow=trigger.workflow, status="failed")
        reason = (
            f"the run was interrupted {interrupted} times (its worker stopped: a crash, a kill "
            "or a lost lease), so it was given up"
        )
        log.error("giving up a run that keeps stopping its worker", extra={"times": interrupted})
        await self.publish(publisher, run.id, failed_outcome(facts, reason))
        raise GiveUp(reason)

    # -- plumbing ------------------------------------------------------------------------------

    def failed_by(
        self,
        exc: BaseException,
        run_id: str,
        workflow: str,
        details: RunDetails | None,
        started: float,
    ) -> Outcome:
        """The failed outcome of a run that `exc` ended: what failed (redacted), and what the
        run had used by then."""
        facts = RunFacts(
            run_id=run_id,
            workflow=workflow,
            status="failed",
            usage=usage_of(details, self.clock() - started),
        )
        return failed_outcome(facts, self.redactor(describe_error(exc)))

    async def record(self, run_id: str, status: str, outcome: Outcome | None) -> None:
        data = outcome_to_json(outcome) if outcome is not None else None
        await anyio.to_thread.run_sync(
            lambda: self.store.update_run(run_id, status=status, outcome=data)
        )

    async def _payload(self, delivery_id: str) -> Mapping[str, Any] | None:
        try:
            record = await anyio.to_thread.run_sync(self.store.get_delivery, delivery_id)
        except BodyMissing:  # the payload only spares lookups; the run goes on without it
            return None
        if record is None:
            return None
        try:
            data = json.loads(record.body)
        except (ValueError, RecursionError):
            return None
        return data if isinstance(data, dict) else None

    def publisher_for(
        self,
        client: InstallationClient,
        trigger: Trigger,
        run: RunRecord,
        payload: Mapping[str, Any] | None,
        *,
        kind: str | None = None,
        workflow: str | None = None,
    ) -> Publisher:
        """The run's publisher; `kind` (the comment's) and `workflow` (the check run's name)
        default to the trigger's workflow."""
        # A retried run (bot.store.retry) is queued again with the end of its last attempt
        # kept: what it posted then is there to find and edit.
        first_attempt = run.status == "queued" and run.finished_at is None
        known: list[Any] | None = None
        issue = payload.get("issue") if payload else None
        if (
            first_attempt
            and isinstance(issue, Mapping)
            and issue.get("number") == trigger.number
            and issue.get("comments") == 0
        ):
            known = []  # a new issue: nothing to find, spare the lookup
        is_pull = trigger.target_kind == "pull_request"
        return Publisher(
            client,
            run_id=run.id,
            kind=kind or trigger.workflow,
            number=trigger.number,
            bot_login=self.bot_login,
            check_name=f"{self.app_slug}: {workflow or trigger.workflow}" if is_pull else None,
            head_sha=trigger.head_sha if is_pull else None,
            command_comment_id=trigger.comment_id,
            command_comment_kind=_comment_kind(payload),
            known_comments=known,
            known_fresh_checks=first_attempt,
            redactor=self.redactor,
            interval=self.progress_interval,
            clock=self.clock,
        )

    # -- the run -------------------------------------------------------------------------------

    async def _execute(self, client: InstallationClient, trigger: Trigger, run: RunRecord) -> None:
        started = self.clock()
        payload = await self._payload(run.delivery_id)
        publisher = self.publisher_for(client, trigger, run, payload)
        await publisher.acknowledge()
        if run.status != PUBLISHING:
            await self.record(run.id, "running", None)
        if trigger.workflow == "decide":
            # Answer the newest BLOCKED run here with the decision, or reply why not: the
            # `decide` flow (`bot.workflows.decide.flow`).
            await self.flows["decide"](self, client, trigger, run, payload, publisher, started)
            return

        if run.status == PUBLISHING and run.outcome is not None:
            try:
                recorded = outcome_from_json(run.outcome)
            except ValueError:
                log.warning("the recorded outcome is unreadable; running the workflow again")
            else:
                log.info("posting the outcome recorded before the last attempt failed")
                await self.publish(publisher, run.id, recorded)
                return
        if trigger.workflow in LEARNING_COMMANDS:
            await answer_learning(
                publisher,
                self.store,
                trigger,
                run_id=run.id,
                app_slug=self.app_slug,
                payload=payload,
            )
            await self.record(run.id, "succeeded", None)
            return
        if trigger.workflow in MODEL_FREE:
            await self._model_free(publisher, trigger, run)
            return
        if trigger.workflow == "review" and trigger.target_kind == "pull_request":
            await self.flows["review"](self, client, trigger, run, payload, publisher, started)
            return
        if trigger.workflow == "fix":
            await self.flows["fix"](self, client, trigger, run, payload, publisher, started)
            return
        entry = get_workflow(trigger.workflow)
        facts = RunFacts(run_id=run.id, workflow=trigger.workflow, status="failed")
        if entry is None:
            if trigger.command is None:
                log.info("no built-in workflow of this name; nothing is posted")
                await self.record(run.id, "skipped", None)
                return
            outcome = failed_outcome(
                facts,
                f"the `{trigger.workflow}` workflow is not available in this version",
                summary=f"The `{trigger.workflow}` workflow is not available in this version "
                f"of the app. Comment `@{self.app_slug} help` for the commands it knows.",
            )
            await self.publish(publisher, run.id, outcome)
            return

        meta, fn = entry
        tracker = Tracker(trigger.workflow, started, clock=self.clock)
        details: RunDetails | None = None
        triage = trigger.workflow == "triage"
        repo_labels: list[str] | None = None
        try:
            context = await fetch_context(
                client,
                trigger,
                # A command's actor passed the write-permission check before the run began.
                actor_permission="write" if trigger.command is not None else None,
                run_id=run.id,
                payload=payload,
                default_branch=default_branch_of(payload),
            )
            if context.comments_fetched:
                publisher.know_comments(context.comments)
            # Asked in a review thread: that thread, its code and the app's finding first.
            context, thread = await with_thread(
                client, trigger, payload, context, store=self.store, bot_login=self.bot_login
            )
            if publisher.check_name and publisher.head_sha is None:
                publisher.head_sha = context.head_sha  # a command on a PR: the head from the API
            first = Progress(run_id=run.id, workflow=trigger.workflow, phases=_titles(meta))
            await publisher.start(first, defer=True)
            git_dir, base = await self.workspace(client, trigger, payload, context.head_sha)
            if triage:
                repo_labels = await label_names(client)
            args = {
                "target": f"{'pull request' if trigger.target_kind == 'pull_request' else 'issue'} #{trigger.number}"
                + (IN_THREAD if thread is not None else ""),
                "kind": trigger.target_kind,
                "fence": context.fence,
                "context": await with_instructions(client, context.text, context.fence),
                "question": sanitize(trigger.args),
                "repo_labels": repo_labels,
                "reporter_reply": trigger.reporter_reply,
            }
            finished = details = await self.run_workflow(
                meta,
                fn,
                args,
                git_dir=git_dir,
                base=base,
                run_id=run.id,
                publisher=publisher,
                tracker=tracker,
            )
            facts = self.facts_of(finished, run.id, trigger.workflow, started)
            if finished.budget_reached is not None:
                reason = finished.budget_reached
                summary = stopped_summary(trigger.workflow, reason)
                await self.publish(
                    publisher, run.id, failed_outcome(facts, reason, summary=summary)
                )
                return
            outcome = outcome_from_run(
                finished.result,
                facts,
                app_slug=self.app_slug,
                clean=clean_model_text,
                reporter=_issue_author(payload),
                rerun_on_reply=triage and await self._replies_left(trigger),
            )
            if triage:
                outcome = await apply_labels(
                    client, trigger.number, outcome, repo_labels, self.repo_config
                )
        except RateLimited:
            log.warning("rate limited beyond the cap; the job goes back to the queue")
            raise
        except Exception as exc:
            log.exception("the run failed")
            outcome = self.failed_by(exc, run.id, trigger.workflow, details, started)
        await self.publish(publisher, run.id, outcome)
        log.info(
            "run published",
            extra={
                "status": outcome.status,
                "comment_id": publisher.comment_id,
                "seconds": round(self.clock() - started, 3),
            },
        )

    async def _replies_left(self, trigger: Trigger) -> bool:
        """Whether a reply from the reporter would run triage on this issue again (the cap
        counts this run when a reply started it: the worker recorded that before)."""
        replies = await anyio.to_thread.run_sync(
            lambda: self.store.count_runs_for_reason(
                trigger.repo_full_name, "issue", trigger.number, "triage", REPORTER_REPLY
            )
        )
        return replies < MAX_REPORTER_REPLIES

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
    ) -> RunDetails:
        """The workflow on the engine in webhook mode, its progress pumped to the comment.

        `args` is recorded on the run first, so that a `decide` can resume it with the same
        prompts; `resume_from` (a run id) replays that run's journaled read-only agent calls.
        The repository's `.github/bot.yml` gives the run its `language` (added to `args`
        unless they carry one already: a follow-up keeps its blocked run's) and its own agent
        types.
        """
        if run_id in self._resuming:
            await clear_interrupted(git_dir, run_id)
            journaled = await anyio.to_thread.run_sync(self._journaled, run_id)
            if resume_from is None and journaled:
                resume_from = run_id  # replay what the interrupted attempt finished
            # Its arguments too (the context's fence is drawn per attempt): the same prompts
            # are what lets the journaled calls replay.
            record = await anyio.to_thread.run_sync(self.store.get_run, run_id)
            if record is not None and record.args is not None:
                args = record.args
        if resume_from is not None and resume_from != run_id:
            journaled = await anyio.to_thread.run_sync(self._journaled, resume_from)
            if not journaled:  # a run carried in from GitHub (`bot action`): no journal here
                log.info("no journal of the run to resume; its agent calls run again")
                resume_from = None
        config = await self.repo_config(publisher.client)
        if "language" not in args:
            args = {**args, "language": config.language}
        agent_types = self.agent_types(config) if self.agent_types is not None else None
        budget = self.run_budget(config, publisher.client.installation_id)
        saved = args
        await anyio.to_thread.run_sync(lambda: self.store.set_run_args(run_id, saved))
        self._engine_started.add(run_id)
        policy = resolve_run_interaction_policy({"context": {"channel_name": "github"}})
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._pump, publisher, tracker)
            finished = await self.engine.run(
                meta,
                fn,
                args,
                interaction=policy,
                repo=git_dir,
                base=base,
                run_id=run_id,
                resume_from=resume_from,
                on_update=tracker.update,
                agent_types=agent_types,
                budget=budget,
            )
            tasks.cancel_scope.cancel()
        await anyio.to_thread.run_sync(self._record_usage, finished)
        return finished

    def run_budget(self, config: RepoConfig, installation_id: int) -> RunBudget | None:
        """The budget of a run in a repository with this `.github/bot.yml`: its `budget`
        capped by the operator's (None: no limit at all)."""
        caps = self.run_caps
        limits = run_limits(
            repo_tokens=config.budget.max_tokens,
            repo_cost=config.budget.max_cost_usd,
            operator_tokens=caps.max_tokens,
            operator_cost=caps.max_cost_usd,
            daily_tokens=caps.daily_tokens,
        )
        if limits.unlimited:
            return None
        return RunBudget(limits, ledger=self.store, installation_id=installation_id)

    def _record_usage(self, finished: RunDetails) -> None:
        usage = finished.usage or {}

        def count(*kinds: str) -> int:
            return sum(int(usage.get(kind) or 0) for kind in kinds)

        cost = usage.get("cost")
        self.store.record_run_usage(
            finished.run_id,
            input_tokens=count("input", "cache_read", "cache_write"),
            output_tokens=count("output"),
            cost=float(cost) if isinstance(cost, int | float) else None,
            finished_at=finished.finished_at or self.clock(),
        )

    def _journaled(self, run_id: str) -> bool:
        try:
            # From the database when the interrupted attempt ran on another machine.
            return self.engine.store.restore(run_id, JOURNAL)
        except RunNotFound:
            return False

    def facts_of(
        self, finished: RunDetails, run_id: str, workflow: str, started: float
    ) -> RunFacts:
        return RunFacts(
            run_id=run_id,
            workflow=workflow,
            status=finished.status,
            # An agent's error may quote what the model wrote.
            error=None if finished.error is None else clean_model_text(finished.error),
            usage=usage_of(finished, self.clock() - started),
        )

    async def publish(
        self,
        publisher: Publisher,
        run_id: str,
        outcome: Outcome,
        *,
        hidden: str = "",
        conclusion: str | None = None,
    ) -> None:
        """Record the outcome first ("publishing"), then post it: if posting fails, the retried
        job posts the recorded outcome again instead of running the workflow again.

        `hidden` is app-written text appended to the comment unseen (a review's memory
        marker); `conclusion` overrides the check run's conclusion."""
        await self.record(run_id, PUBLISHING, outcome)
        if self.carry_blocked and outcome.status == "blocked":
            line = await anyio.to_thread.run_sync(self._carried, run_id)
            if line:  # before a review's memory, which stays the comment's last line
                hidden = f"{line}\n{hidden}" if hidden else line
        await publisher.finish(outcome, hidden=hidden, conclusion=conclusion)
        if publisher.comment_url:
            posted = json.dumps({"comment_url": publisher.comment_url})
            await anyio.to_thread.run_sync(
                self.store.put_artifact, run_id, PUBLISHED_ARTIFACT, posted
            )
        await self.record(run_id, outcome.status, outcome)

    def _carried(self, run_id: str) -> str:
        """The signed line that carries a BLOCKED run in its comment (`policies.carried_run`)."""
        record = self.store.get_run(run_id)
        if record is None or record.outcome is None:
            return ""
        run = CarriedRun(
            id=record.id,
            workflow=record.workflow,
            target_kind=record.target_kind,
            number=record.number,
            repo=record.repo,
            mode=record.mode,
            outcome=dict(record.outcome),
            args=record.args,
        )
        return carried_line(run, key=self.review_key)

    async def repo_config(self, client: InstallationClient) -> RepoConfig:
        """The repository's `.github/bot.yml` (defaults when no reader is configured), read
        once per run: a run's client is its own, so every step of one run (its flow, its
        language, its agent types) sees the same file for one request, and the next run reads
        it afresh."""
        if self.config_reader is None:
            return parse_repo_config(None)
        config = self._configs.get(client)
        if config is None:
            config = self._configs[client] = await self.config_reader(client)
        return config

    async def _pump(self, publisher: Publisher, tracker: Tracker) -> None:
        """Edit the progress comment while the run goes, at most once per interval.

        A progress edit may fail; the final one matters. Past GitHub's rate limit the pump
        stops editing but lets the run finish: its outcome is recorded before it is posted,
        so a job re-queued by the final post's `RateLimited` posts it without the model.
        """
        tick = min(0.5, self.progress_interval)
        while True:
            await anyio.sleep(tick)
            progress = tracker.progress()
            if progress is None or tracker.version == tracker.published or not publisher.due():
                continue
            version = tracker.version
            try:
                if await publisher.progress(progress):
                    tracker.published = version
            except RateLimited:
                log.warning("rate limited; no more progress edits in this run")
                return
            except Exception as exc:
                log.warning("progress edit failed", extra={"error": self.redactor(str(exc))})

    async def workspace(
        self,
        client: InstallationClient,
        trigger: Trigger,
        payload: Mapping[str, Any] | None,
        head_sha: str | None,
    ) -> tuple[Path, str]:
        """The mirror and the commit the agents read: the PR head, else the default branch."""
        if trigger.target_kind == "pull_request" and head_sha:
            git_dir = await self.mirrors.ensure_commit(client, head_sha, pull_number=trigger.number)
            return git_dir, head_sha
        branch = default_branch_of(payload) or (await client.get_repo()).default_branch
        git_dir = await self.mirrors.fetch(client, [f"+refs/heads/{branch}:refs/heads/{branch}"])
        return git_dir, f"refs/heads/{branch}"

    # -- help, status, stop, unknown commands ----------------------------------------------------

    async def answer_skip(self, event: Event, skip: Skip) -> bool:
        """Answer an unknown command with the help text, or say that `.github/bot.yml` is
        broken where the skip's notice asks (`bot.runs.config_notice`); True when posted.

        Only these skips are answered: the trigger policy gives `UNKNOWN_COMMAND` and a
        command's `INVALID_CONFIG` notice only after the sender's write permission was
        checked, so nobody else can make the app talk.
        The reply's run id is derived from the comment as written (`comment_identity`), so a
        retried job, or the same body sent again under another GUID, edits it, never reposts.
        """
        if skip.reason is SkipReason.INVALID_CONFIG:
            return await answer_config_error(
                event,
                skip,
                github=self.github,
                store=self.store,
                app_slug=self.app_slug,
                redactor=self.redactor,
            )
        limit = skip.reason is SkipReason.RATE_LIMITED
        if limit and skip.extra.get(ANSWER) != "yes":
            return False  # one reply per person and hour: this hour's was given
        if skip.reason is not SkipReason.UNKNOWN_COMMAND and not limit:
            return False
        if event.installation_id is None or not event.repo_full_name or event.number is None:
            return False
        if event.comment_id is None or "/" not in event.repo_full_name:
            return False
        seed = comment_identity(event) or event.delivery_id
        run_id = "wf_" + hashlib.sha256(seed.encode()).hexdigest()[:12]
        owner, repo = event.repo_full_name.split("/", 1)
        publisher = Publisher(
            self.github.installation(event.installation_id, owner, repo),
            run_id=run_id,
            kind="rate_limit" if limit else "help",
            number=event.number,
            bot_login=self.bot_login,
            command_comment_id=event.comment_id,
            command_comment_kind=event.comment_kind or "issue_comment",
            redactor=self.redactor,
        )
        if limit:
            until = time.strftime("%H:%M UTC", time.gmtime(self.store.clock() + WINDOW_S))
            per_hour = int(skip.extra.get("per_hour") or 0)
            text = limit_reply(event.sender_login or "", per_hour, until)
            with bound(run_id=run_id, repo=event.repo_full_name):
                await publisher.reply(render_reply(run_id, "rate_limit", text, sticky=False))
                log.info("commands past the hour's limit answered once")
            return True
        with bound(run_id=run_id, repo=event.repo_full_name):
            await publisher.acknowledge()
            await answer_unknown(
                publisher, run_id=run_id, detail=skip.detail, app_slug=self.app_slug
            )
            log.info("unknown command answered with help")
        return True

    async def _model_free(self, publisher: Publisher, trigger: Trigger, run: RunRecord) -> None:
        await answer_command(
            publisher,
            command=trigger.workflow,
            run_id=run.id,
            repo=trigger.repo_full_name,
            kind=trigger.target_kind,
            number=trigger.number,
            store=self.store,
            engine=self.engine,
            app_slug=self.app_slug,
        )
        await self.record(run.id, "succeeded", None)


def _issue_author(payload: Mapping[str, Any] | None) -> str | None:
    """The login of the issue's author as the delivery gives it (checked before it is shown)."""
    issue = payload.get("issue") if payload else None
    user = issue.get("user") if isinstance(issue, Mapping) else None
    login = user.get("login") if isinstance(user, Mapping) else None
    return login if isinstance(login, str) else None


def _comment_kind(payload: Mapping[str, Any] | None) -> CommentKind:
    """Where the delivery's command was written, read from the payload's shape."""
    comment = payload.get("comment") if payload else None
    if isinstance(comment, Mapping):
        return "review_comment" if "pull_request_review_id" in comment else "issue_comment"
    return "review" if payload and isinstance(payload.get("review"), Mapping) else "issue_comment"


def _titles(meta: Any) -> tuple[str, ...]:
    return tuple(p.title for p in meta.phase_list())
