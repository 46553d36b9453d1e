"""The executor's path for `fix` runs: workspace, workflow, then the worker's push and PR.

1. Where the fix goes (`policies.fix_target`): an issue's fix starts from the default branch's
   head, or from this issue's open `bot/fix-*` branch (a second `fix` adds to the same pull
   request); a pull request's fix starts from its head.
2. The workflow (`bot.workflows.fix.workflow`) plans, implements in a worktree and reviews. It stops
   with BLOCKED before anything is written when the request or the plan needs a decision.
3. The app, never the agent, reads the real change from the mirror and classifies it again
   (an agent may change more than it planned) against the risks a maintainer's answer
   approved (`policies.decide.approved_by`, from the blocked run's stored report: nothing
   for free text or a model's option); anything beyond them stops with a new BLOCKED report
   and nothing is pushed. It makes one commit of the change with the requester's
   `Co-authored-by` trailer (on a pull request, with the tests that reproduced its review's
   findings: `bot.workflows.fix.proof_tests`, which must pass), runs `fix.check_command` on
   it in the sandbox, pushes it with
   the installation token as an HTTP header (never forced, never to the default branch or a
   fork) and opens a draft pull request, asking the requester to review it.

Asked in a pull request review thread (`bot.workflows.thread_context`), the thread is the
request: its comments, its code and, for the app's own thread, the finding are in the
context, the answer is a reply in the thread, and the app's own thread is resolved once the
commit is on the pull request's head (`bot.workflows.fix.thread`).

A follow-up (a maintainer's `decide` on a BLOCKED fix, `resume_fix`) runs with the blocked
run's arguments, unchanged so its read-only calls replay, plus the decision, from the commit
the blocked run started on.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from bot.github.errors import GitHubError, RateLimited
from bot.log import get_logger
from bot.publish.markdown_out import END_COLLAPSIBLE, clean_model_markdown, collapsible
from bot.publish.render import Progress
from bot.runs.context import default_branch_of, fetch_context, sanitize
from bot.runs.progress import Tracker, clean_model_text
from bot.workflows.decide.handler import Resumed
from bot.workflows.fix import gitops, proof_tests
from bot.workflows.fix import workflow as fix_workflow
from bot.workflows.fix.thread import THREAD_ARG, close_own_thread, thread_args
from bot.workflows.instructions import with_instructions
from bot.workflows.review.runner import reclaim_run
from bot.workflows.review.suggest import check_commit
from bot.workflows.thread_context import IN_THREAD, thread_request, with_thread
from policies.budget import stopped_summary
from policies.config import FixConfig, RepoConfig, ReviewConfig
from policies.decide import Refused, approved_by, no_arguments
from policies.fix import (
    CheckResult,
    asked_for,
    blocked_for,
    branch_name,
    co_author_trailer,
    is_fix_branch,
    outstanding,
    pull_request_text,
    with_trailer,
)
from policies.fix_target import FixTarget, PullFacts, for_issue, for_pull
from policies.outcome import (
    Asked,
    AskedRisk,
    Outcome,
    RunFacts,
    UsageSummary,
    failed_outcome,
    outcome_from_run,
)
from policies.untrusted_text import code_span

if TYPE_CHECKING:
    from bot.engine.details import RunDetails
    from bot.github.installation import InstallationClient
    from bot.publish.publisher import Publisher
    from bot.runs.flows import RunHost
    from bot.store.sqlite import RunRecord
    from bot.workflows.decide.handler import FollowUp
    from policies.event import Trigger

log = get_logger(__name__)

ConfigReader = Callable[["InstallationClient"], Awaitable[RepoConfig]]
PATCH_SHOWN = 60_000


@dataclasses.dataclass(frozen=True, slots=True)
class Place:
    """Where the fix was made and goes: the mirror, the start commit, the target."""

    git_dir: Path
    start: str
    target: FixTarget
    default: str
    branches: dict[str, str] | None
    """The remote's `bot/fix-<n>*` branches (name -> commit); None when not listed yet."""


@dataclasses.dataclass(frozen=True, slots=True)
class Resume:
    """A maintainer's answer to a BLOCKED fix: the blocked run's arguments, the decision, and
    the risks it approves (read from the blocked run's stored report, never from the answer)."""

    blocked_run: str
    args: Mapping[str, Any]
    decision: Mapping[str, Any]
    approved: frozenset[AskedRisk] = frozenset()


def _requester(payload: Mapping[str, Any] | None, login: str) -> dict[str, Any]:
    sender = payload.get("sender") if payload else None
    user_id = sender.get("id") if isinstance(sender, Mapping) else None
    return {"login": login, "id": user_id if isinstance(user_id, int) else 0}


def _fence_block(text: str, info: str = "") -> str:
    """A code block no backtick run inside `text` can close."""
    ticks = "`" * max(3, _longest_ticks(text) + 1)
    return f"{ticks}{info}\n{text}\n{ticks}"


def _longest_ticks(text: str) -> int:
    best = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        best = max(best, run)
    return best


def patch_section(diff: str) -> list[str]:
    """The change as a collapsed `diff` block (cut, and said so, when long)."""
    shown = diff if len(diff) <= PATCH_SHOWN else diff[:PATCH_SHOWN] + "\n… (cut)"
    return [
        "",
        collapsible("The patch (apply with `git apply`)"),
        "",
        _fence_block(shown, "diff"),
        "",
        END_COLLAPSIBLE,
    ]


async def _target(
    ex: RunHost,
    client: InstallationClient,
    trigger: Trigger,
    default: str,
    branches: dict[str, str],
) -> FixTarget:
    """Where the fix goes; `branches` is the remote's `bot/fix-<n>*` listing, filled for an
    issue (a pull request's fix lists them only if it needs a new branch name)."""
    if trigger.target_kind == "pull_request":
        pull = await client.get_pull(trigger.number)
        facts = PullFacts(
            number=pull.number,
            head_ref=pull.head.ref,
            head_sha=pull.head.sha,
            head_repo=pull.head.repo.full_name if pull.head.repo else None,
            base_ref=pull.base.ref,
        )
        return for_pull(facts, trigger.repo_full_name, default)
    branches.update(await ex.mirrors.remote_branches(client, f"bot/fix-{trigger.number}"))
    open_ones: dict[str, str] = {}
    for name in sorted(branches):
        if is_fix_branch(name, trigger.number) and await client.find_open_pull_by_head(name):
            open_ones[name] = branches[name]
            break
    return for_issue(trigger.number, default, open_ones)


async def _workspace(
    ex: RunHost,
    client: InstallationClient,
    trigger: Trigger,
    target: FixTarget,
    default: str,
    stored_start: str | None,
) -> tuple[Path, str]:
    """The mirror and the commit the fix starts from."""
    if target.start_sha is not None:
        pull = trigger.number if trigger.target_kind == "pull_request" else None
        branch = target.branch if pull is None else None
        git_dir = await ex.mirrors.ensure_commit(
            client, target.start_sha, pull_number=pull, branch=branch
        )
        return git_dir, target.start_sha
    if stored_start:
        # A follow-up starts where the blocked run started, so its workspace matches and its
        # read-only calls replay; the pull request shows if the default branch moved since.
        git_dir = await ex.mirrors.ensure_commit(client, stored_start, branch=default)
        return git_dir, stored_start
    git_dir = await ex.mirrors.fetch(client, [f"+refs/heads/{default}:refs/heads/{default}"])
    return git_dir, await gitops.resolve(git_dir, f"refs/heads/{default}")


async def run_fix(
    ex: RunHost,
    client: InstallationClient,
    trigger: Trigger,
    run: RunRecord,
    payload: Mapping[str, Any] | None,
    publisher: Publisher,
    started: float,
) -> None:
    """A `fix` command's run, published: see the module docstring."""
    outcome, _ = await fix_outcome(
        ex, client, trigger, run, payload, publisher, started, ex.repo_config
    )
    record = await anyio.to_thread.run_sync(ex.store.get_run, run.id)
    if record is not None and record.args:
        # Asked in the app's own thread: resolved now that the fix is on the head.
        await close_own_thread(
            client, trigger, record.args, outcome, store=ex.store, bot_login=ex.bot_login
        )
    await ex.publish(publisher, run.id, outcome)


async def resume_fix(ex: RunHost, fu: FollowUp) -> Resumed | Refused:
    """`decide`'s handler for a BLOCKED fix (`bot.workflows.decide.flow.FOLLOW_UPS`): the blocked run's
    arguments plus the decision, resumed from it; the caller publishes the outcome."""
    if fu.args is None:
        return no_arguments(fu.blocked.id)
    approved = approved_by(fu.question, fu.decision.get("option"))
    resume = Resume(fu.blocked.id, fu.args, fu.decision, approved)
    outcome, details = await fix_outcome(
        ex,
        fu.client,
        fu.trigger,
        fu.run,
        fu.payload,
        fu.publisher,
        fu.started,
        ex.repo_config,
        resume=resume,
    )
    # A fix asked in the app's own thread and blocked there: resolved once the decision's
    # fix is on the head, as a first run's would be.
    await close_own_thread(
        fu.client, fu.trigger, fu.args, outcome, store=ex.store, bot_login=ex.bot_login
    )
    return Resumed(outcome, details)


def app_committer(app_slug: str) -> tuple[str, str]:
    """The name and e-mail the app's commits are made by (GitHub shows them as the App)."""
    name = f"{app_slug}[bot]"
    return name, f"{name}@users.noreply.github.com"


async def fix_outcome(
    ex: RunHost,
    client: InstallationClient,
    trigger: Trigger,
    run: RunRecord,
    payload: Mapping[str, Any] | None,
    publisher: Publisher,
    started: float,
    read_config: ConfigReader,
    *,
    resume: Resume | None = None,
    extra: Mapping[str, Any] | None = None,
) -> tuple[Outcome, RunDetails | None]:
    """Run the fix and push its result; the outcome, not yet published, and the run's details.

    `extra` is added to a first run's recorded arguments (an iteration's facts: see
    `bot.workflows.fix.iterate`). Every failure becomes a `failed` outcome that says what
    failed, except GitHub's rate limit beyond the client's cap, which propagates so the job
    is retried."""
    facts = RunFacts(run_id=run.id, workflow="fix", status="failed")
    tracker = Tracker("fix", started, clock=ex.clock)
    details: RunDetails | None = None
    git_dir: Path | None = None
    try:
        repo_config = await read_config(client)
        config = repo_config.fix
        default = default_branch_of(payload) or (await client.get_repo()).default_branch
        branches: dict[str, str] = {}
        target = await _target(ex, client, trigger, default, branches)
        stored = dict(resume.args) if resume is not None else {}
        phases = tuple(p.title for p in fix_workflow.meta.phase_list())
        await publisher.start(Progress(run_id=run.id, workflow="fix", phases=phases), defer=True)
        git_dir, start = await _workspace(
            ex, client, trigger, target, default, stored.get("fix_start")
        )
        if resume is not None:
            args = {**stored, "decision": dict(resume.decision)}
        else:
            args = await _arguments(
                ex, client, trigger, run, payload, publisher, default, config, start
            )
            args.update(extra or {})
        bound_git = git_dir

        async def diff_of(commit: str) -> str:
            return await gitops.diff_text(bound_git, start, commit)

        fn = functools.partial(fix_workflow.workflow, diff_of=diff_of)
        finished = details = await ex.run_workflow(
            fix_workflow.meta,
            fn,
            args,
            git_dir=git_dir,
            base=start,
            run_id=run.id,
            publisher=publisher,
            tracker=tracker,
            resume_from=resume.blocked_run if resume is not None else None,
        )
        facts = ex.facts_of(finished, run.id, "fix", started)
        if finished.budget_reached is not None:
            # A change its reviewer or check never saw is not pushed.
            summary = stopped_summary("fix", finished.budget_reached)
            return failed_outcome(facts, finished.budget_reached, summary=summary), details
        listed = branches if trigger.target_kind == "issue" else None
        place = Place(git_dir, start, target, default, listed)
        approved = resume.approved if resume is not None else frozenset()
        outcome = await _conclude(
            ex,
            client,
            trigger,
            finished,
            facts,
            args,
            place,
            config,
            approved=approved,
            review_config=repo_config.review,
        )
    except RateLimited:
        raise
    except Exception as exc:
        log.exception("the fix failed")
        outcome = ex.failed_by(exc, run.id, "fix", details, started)
    finally:
        if git_dir is not None:
            await reclaim_run(git_dir, details)
    return outcome, details


async def _arguments(
    ex: RunHost,
    client: InstallationClient,
    trigger: Trigger,
    run: RunRecord,
    payload: Mapping[str, Any] | None,
    publisher: Publisher,
    default: str,
    config: FixConfig,
    start: str,
) -> dict[str, Any]:
    """The workflow's arguments for a first run (a follow-up reuses the blocked run's)."""
    context = await fetch_context(
        client,
        trigger,
        actor_permission="write",
        run_id=run.id,
        payload=payload,
        default_branch=default,
    )
    if context.comments_fetched:
        publisher.know_comments(context.comments)
    # Asked in a review thread: the thread is the request (`bot.workflows.fix.thread`).
    context, thread = await with_thread(
        client, trigger, payload, context, store=ex.store, bot_login=ex.bot_login
    )
    kind = "pull request" if trigger.target_kind == "pull_request" else "issue"
    question = sanitize(trigger.args)
    extra: dict[str, Any] = {}
    if thread is not None:
        question = thread_request(thread, question)
        extra[THREAD_ARG] = thread_args(thread, bot_login=ex.bot_login)
    return {
        **extra,
        "target": f"{kind} #{trigger.number}" + (IN_THREAD if thread is not None else ""),
        "kind": trigger.target_kind,
        "fence": context.fence,
        "context": await with_instructions(client, context.text, context.fence),
        "question": question,
        "fix_config": config.model_dump(),
        "fix_start": start,
        "requester": _requester(payload, trigger.actor),
        "title": context.issue_title,
    }


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


async def _conclude(
    ex: RunHost,
    client: InstallationClient,
    trigger: Trigger,
    finished: RunDetails,
    facts: RunFacts,
    args: Mapping[str, Any],
    place: Place,
    config: FixConfig,
    *,
    approved: frozenset[AskedRisk] = frozenset(),
    review_config: ReviewConfig | None = None,
) -> Outcome:
    """Turn the workflow's result into an outcome, pushing and opening the PR when it is done.

    `approved` is what the answer this run follows up approved; the real change may carry no
    risk beyond it."""
    result = finished.result if isinstance(finished.result, dict) else None
    git_dir, start, target = place.git_dir, place.start, place.target

    def mapped(value: object, summary: str | None = None, asked: Asked | None = None) -> Outcome:
        """The outcome of `value`; `summary` (app-written around cleaned model text) replaces
        its summary after the mapping, so the app's own collapsed sections survive. `asked`
        is what the app's own BLOCKED report asks to approve."""
        outcome = outcome_from_run(
            value, facts, app_slug=ex.app_slug, clean=clean_model_text, asked=asked
        )
        return dataclasses.replace(outcome, summary=summary) if summary else outcome

    if finished.status != "completed" or result is None:
        return mapped(result)
    info = _mapping(result.get("fix"))
    commit = info.get("commit")
    if result.get("blocked") or result.get("status") in ("failed", "no_changes") or not commit:
        # The workflow records `asked` only beside its own risk report, never a model's.
        asked = Asked.from_json(info.get("asked")) if result.get("blocked") else None
        return mapped({k: v for k, v in result.items() if k != "fix"}, asked=asked)

    change = await gitops.change_facts(git_dir, start, str(commit))
    base = {"assumptions": result.get("assumptions") or []}
    if not change.changes:
        return mapped(
            {**base, "status": "no_changes", "summary": "The agent's commit changes nothing."}
        )
    choice = info.get("choice")
    risk = change.risk(config)
    if risk is not None and (
        outstanding(risk, approved) is not None
        or not (choice == "patch" or (choice == "proceed" and risk.pushable))
    ):
        summary = "The change the agent made needs a maintainer's decision before it is pushed."
        if approved:
            summary = (
                "The change the agent made goes beyond what was approved, so nothing was "
                "pushed: it needs a new decision."
            )
        blocked = blocked_for(risk, approved)
        return mapped({**base, "summary": summary, "blocked": blocked}, asked=asked_for(risk))

    diff = await gitops.diff_text(git_dir, start, str(commit))
    review = _mapping(info.get("review"))
    summary = clean_model_text(str(result.get("summary") or "")).strip()
    reviewed = fix_workflow.review_lines(review)
    if not review.get("accepted"):
        lines = [
            "The change was made but did not pass its review, so nothing was pushed.",
            "",
            summary,
            "",
            "**Review**",
            "",
            *(reviewed or [f"- {clean_model_text(str(review.get('error') or 'no verdict'))}"]),
            *patch_section(diff),
        ]
        return mapped({**base, "status": "no_changes", "summary": "-"}, "\n".join(lines))

    requester = _mapping(args.get("requester"))
    message = await gitops.commit_message(git_dir, start, str(commit))
    login, user_id = str(requester.get("login") or ""), int(requester.get("id") or 0)
    try:
        message = with_trailer(message, co_author_trailer(login, user_id))
    except ValueError:
        log.warning("no Co-authored-by trailer: the requester's id is unknown")
    name, email = app_committer(ex.app_slug)
    sha = await gitops.squash(git_dir, start, str(commit), message, name=name, email=email)
    proof_line = ""
    proving = review_config.test_command if review_config is not None else None
    if trigger.target_kind == "pull_request" and review_config is not None and proving:
        tests = await proof_tests.reproduced_tests(
            ex.store, trigger.repo_full_name, trigger.number, start, bot_login=ex.bot_login
        )
        if tests:
            sha = await proof_tests.with_tests(git_dir, sha, tests, name=name, email=email)
            ran = await proof_tests.tests_pass(
                git_dir, sha, list(tests), proving, time_limit=review_config.check_timeout
            )
            names = ", ".join(code_span(p) for p in sorted(tests))
            if not ran.passed:
                lines = [
                    f"The fix does not pass the test{'s' if len(tests) > 1 else ''} that "
                    f"reproduced the review's findings ({names}): {ran.what}. Nothing was pushed.",
                    "",
                    summary,
                    *patch_section(diff),
                ]
                return mapped({**base, "status": "no_changes", "summary": "-"}, "\n".join(lines))
            proof_line = f"**Reproducing tests:** {names} added; {ran.what}."
    check: CheckResult | None = None
    check_line = "No check command is configured (`fix.check_command` in `.github/bot.yml`)."
    if config.check_command:
        done = await check_commit(
            git_dir, sha, config.check_command, time_limit=config.check_timeout
        )
        check = CheckResult(config.check_command, done.exit_code, config.check_timeout)
        check_line = f"**Check:** {done.what}."
    lines = [summary or "The change is in the commit below.", "", check_line]
    if proof_line:
        lines += ["", proof_line]
    if reviewed:
        lines += ["", "**Review**", "", *reviewed]

    if target.where == "patch_only" or choice == "patch":
        first = (
            f"Nothing was pushed: {target.reason}. The change is attached as a patch."
            if target.reason
            else "Nothing was pushed, as decided: the change is attached as a patch."
        )
        lines = [first, "", *lines]
        lines += patch_section(diff)
        return mapped({**base, "summary": "-"}, "\n".join(lines))

    title = str(args.get("title") or "")
    if target.branch is not None:
        branch = target.branch
    else:
        taken = place.branches
        if taken is None:
            taken = await ex.mirrors.remote_branches(client, f"bot/fix-{trigger.number}")
        branch = branch_name(trigger.number, title or summary[:60], taken)
    await ex.mirrors.push_branch(client, sha, branch, default_branch=place.default)
    text = PullText(title, summary, check, [str(a) for a in base["assumptions"]], facts.usage)
    pull_line = await _pull_request(ex, client, trigger, target, branch, text, login)
    lines = [f"Pushed `{sha[:12]}` to {code_span(branch)}. {pull_line}", "", *lines]
    return mapped({**base, "summary": "-", "branches": [branch]}, "\n".join(lines))


@dataclasses.dataclass(frozen=True, slots=True)
class PullText:
    """What the draft pull request says (model-written parts already cleaned)."""

    title: str
    summary: str
    check: CheckResult | None
    assumptions: list[str]
    usage: UsageSummary


async def _pull_request(
    ex: RunHost,
    client: InstallationClient,
    trigger: Trigger,
    target: FixTarget,
    branch: str,
    text: PullText,
    requester: str,
) -> str:
    """Open the draft pull request (or find the one the branch already has); a line about it."""
    existing = await client.find_open_pull_by_head(branch)
    if existing is not None:
        return f"The commit is on pull request #{existing.number}."
    if target.pull_base is None:
        return "No pull request was opened."
    head, body = pull_request_text(
        number=trigger.number,
        title=text.title or f"#{trigger.number}",
        summary=clean_model_markdown(text.summary),
        check=text.check,
        assumptions=[clean_model_markdown(clean_model_text(a)) for a in text.assumptions],
        usage=text.usage,
        closes=target.closes,
    )
    pull = await client.create_pull(
        head=branch,
        base=target.pull_base,
        title=ex.redactor(head),
        body=ex.redactor(body),
        draft=True,
    )
    if requester:
        try:
            await client.request_reviewers(pull.number, [requester])
        except GitHubError as exc:
            log.info("could not request a review", extra={"error": str(exc)[:200]})
    return f"Opened draft pull request #{pull.number}."
