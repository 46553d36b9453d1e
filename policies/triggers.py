"""The trigger policy: an Event, the RepoConfig and the actor's permission -> Trigger or Skip.

One path needs facts from the store, which the caller looks up and passes in: a plain comment
by an issue's author while the latest triage of that issue asked them questions (`needs_info`)
runs triage again, without any permission (the reporter need not be a writer), at most
`MAX_REPORTER_REPLIES` times per issue.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from policies import iterate
from policies.commands import UNKNOWN, Command, parse_command, parse_forget
from policies.config import RepoConfig
from policies.config_notice import CHECK, NOTICE, REPLY
from policies.decide import parse_answer
from policies.event import Decision, Event, Skip, SkipReason, Trigger
from policies.iterate import ITERATE, Iteration
from policies.rerun import CHECK_EVENTS, check_workflow

__all__ = [
    "MAX_REPORTER_REPLIES",
    "ROUTES",
    "WRITE_PERMISSIONS",
    "AwaitingReporter",
    "Handler",
    "Request",
    "bot_login",
    "comment_identity",
    "decide",
    "is_app_account",
    "is_reporter_comment",
    "needs_permission",
    "on_check_rerequested",
    "on_comment",
    "on_comment_changed",
    "on_issue_opened",
    "on_pull_request",
    "route",
    "run_key",
]

WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})
"""GitHub collaborator permissions that may give the app commands."""

MAX_REPORTER_REPLIES = 3
"""How many times the reporter's replies may run triage again on one issue."""


def bot_login(app_slug: str) -> str:
    """The login of the app's own account: `<slug>[bot]`."""
    return f"{app_slug}[bot]"


def _account(login: str) -> str:
    return login.strip().lower().removesuffix("[bot]")


def is_app_account(login: str | None, app_slug: str) -> bool:
    """Whether `login` is the app itself, ignoring case and any `[bot]` suffix."""
    return login is not None and _account(login) == _account(app_slug)


@dataclass(frozen=True, slots=True)
class Request:
    """What an event asks for, before the actor's permission is known.

    `needs_permission` marks work asked for by a person (a comment command): it runs only
    for actors with write access. `then` is a skip that applies once the permission has
    passed (an unknown or disabled command), so people without access get no reply at all.
    """

    workflow: str
    args: str = ""
    command: str | None = None
    needs_permission: bool = False
    then: Skip | None = None
    reporter_reply: bool = False


@dataclass(frozen=True, slots=True)
class AwaitingReporter:
    """What the store knows about triage on the issue a reporter's comment is on.

    `latest_triage` is the status of the newest triage run on the issue (None when it has
    none); `replies` counts the triage runs the reporter's replies have started so far.
    """

    latest_triage: str | None
    replies: int


Handler = Callable[[Event, RepoConfig, str], Request | Skip]
"""A route's target: reads the event and config (and the app slug) and says what is asked."""


def _is_ignored(login: str | None, config: RepoConfig) -> bool:
    ignored = {_account(name) for name in config.ignore_authors}
    return login is not None and _account(login) in ignored


def on_pull_request(event: Event, config: RepoConfig, app_slug: str) -> Request | Skip:
    """A pull request was opened, reopened, marked ready or pushed to: review it."""
    if not config.review.enabled or not config.review.auto:
        return Skip(SkipReason.WORKFLOW_DISABLED, "review")
    if event.is_draft and not config.review.drafts:
        return Skip(SkipReason.DRAFT, f"pull request #{event.number} is a draft")
    if _is_ignored(event.author_login, config):
        return Skip(SkipReason.IGNORED_AUTHOR, f"{event.author_login} is in ignore_authors")
    return Request("review")


def on_issue_opened(event: Event, config: RepoConfig, app_slug: str) -> Request | Skip:
    """An issue was opened: triage it."""
    if not config.triage.enabled:
        return Skip(SkipReason.WORKFLOW_DISABLED, "triage")
    if _is_ignored(event.author_login, config):
        return Skip(SkipReason.IGNORED_AUTHOR, f"{event.author_login} is in ignore_authors")
    return Request("triage")


def on_comment_changed(event: Event, config: RepoConfig, app_slug: str) -> Request | Skip:
    """A comment or review was edited or deleted: commands count only when first posted."""
    return Skip(SkipReason.EDITED_OR_DELETED, f"{event.name}.{event.action}")


def on_check_rerequested(event: Event, config: RepoConfig, app_slug: str) -> Request | Skip:
    """Someone asked for one of the app's checks to run again (Re-run, or Re-run all checks on
    its suite): review the pull request at the check's head again, as a writer's `review`
    command would, paused or not; the person needs write permission, as for a command.

    The worker has made sure the check is this App's and found its pull request first
    (`policies.rerun`). Only a review runs again this way: `ask` and `fix` need the words of
    their command.
    """
    workflow = check_workflow(event.check_name)
    if workflow != "review":
        detail = f"the {workflow or event.check_name} check does not run again; only a review does"
        return Skip(SkipReason.UNSUPPORTED_ACTION, detail)
    if not config.review.enabled:
        return Skip(SkipReason.WORKFLOW_DISABLED, "review")
    return Request("review", command="review", needs_permission=True)


def _command_skip(command: Command, event: Event, config: RepoConfig) -> Skip | None:
    """Why a command that reached the app does not run, if it does not."""
    extra = {"command": command.raw or command.name}
    if command.name == UNKNOWN:
        return Skip(SkipReason.UNKNOWN_COMMAND, command.raw, extra)
    if command.name == "ask" and not command.args:
        return Skip(SkipReason.UNKNOWN_COMMAND, "ask needs a question", extra)
    if command.name == "learn" and not command.args:
        return Skip(SkipReason.UNKNOWN_COMMAND, "learn needs the point to keep", extra)
    if command.name == "forget" and parse_forget(command.args) is None:
        return Skip(SkipReason.UNKNOWN_COMMAND, "forget needs a learning's number", extra)
    if command.name == "decide" and parse_answer(command.args) is None:
        detail = "decide needs an option's number or your own answer"
        return Skip(SkipReason.UNKNOWN_COMMAND, detail, extra)
    if command.name in ("review", "pause", "resume") and event.target_kind != "pull_request":
        return Skip(
            SkipReason.UNKNOWN_COMMAND, f"{command.name} works on pull requests only", extra
        )
    if command.name == "review" and not config.review.enabled:
        return Skip(SkipReason.WORKFLOW_DISABLED, "review", extra)
    if command.name == "fix" and not config.fix.enabled:
        return Skip(SkipReason.WORKFLOW_DISABLED, "fix", extra)
    return None


def _iteration(config: RepoConfig, iteration: Iteration) -> Request:
    """A writer's review of (or words to) the app's own pull request: one more commit
    (`policies.iterate`), as a `fix` run that only writers can start."""
    off = not config.fix.enabled or (iteration.source == "comment" and not config.commands.enabled)
    return Request(
        workflow="fix",
        args=iteration.text,
        command=ITERATE,
        needs_permission=True,
        then=Skip(SkipReason.WORKFLOW_DISABLED, "fix", {"command": ITERATE}) if off else None,
    )


def on_comment(event: Event, config: RepoConfig, app_slug: str) -> Request | Skip:
    """A comment or review was posted: run the command it gives the app, if any."""
    command = None
    if event.comment_body:
        command = parse_command(
            event.comment_body, app_slug=app_slug, slash_commands=config.slash_commands
        )
    iteration = iterate.asked(event, command, app_slug=app_slug)
    if iteration is not None:
        return _iteration(config, iteration)
    if not event.comment_body:
        return Skip(SkipReason.NOT_ADDRESSED, "empty comment")
    if command is None:
        return Skip(SkipReason.NOT_ADDRESSED)
    if not config.commands.enabled:
        return Skip(SkipReason.WORKFLOW_DISABLED, "commands", {"command": command.name})
    return Request(
        workflow=command.name,
        args=command.args,
        command=command.name,
        needs_permission=True,
        then=_command_skip(command, event, config),
    )


def is_reporter_comment(event: Event) -> bool:
    """Whether the event is a new comment by the author of the issue it is on (not a PR).

    Only for these does decide() read `awaiting_reporter`, so the caller looks the store up
    only then. Logins compare without regard to case, as GitHub's do.
    """
    sender, author = event.sender_login, event.author_login
    return (
        event.name == "issue_comment"
        and event.action == "created"
        and event.target_kind == "issue"
        and bool(sender)
        and bool(author)
        and (sender or "").lower() == (author or "").lower()
    )


def _reporter_reply(
    event: Event, config: RepoConfig, awaiting: AwaitingReporter | None, skip: Skip
) -> Request | Skip:
    """The reporter answered (a plain comment): triage again while it waits on them.

    `skip` is what the comment gets otherwise (not addressed to the app). Bots and the app
    itself never get here (`_request` skips them first); a comment on a pull request, an
    edited one or one by anybody else is not a reporter's reply.
    """
    if not is_reporter_comment(event) or not (event.comment_body or "").strip():
        return skip
    if awaiting is None or awaiting.latest_triage != "needs_info":
        return skip
    if not config.triage.enabled:
        return Skip(SkipReason.WORKFLOW_DISABLED, "triage")
    if awaiting.replies >= MAX_REPORTER_REPLIES:
        detail = (
            f"the reporter's replies already ran triage {awaiting.replies} times on #{event.number}"
        )
        return Skip(SkipReason.REPLY_LIMIT, detail)
    return Request("triage", reporter_reply=True)


ROUTES: Mapping[tuple[str, str], Handler] = {
    ("pull_request", "opened"): on_pull_request,
    ("pull_request", "reopened"): on_pull_request,
    ("pull_request", "ready_for_review"): on_pull_request,
    ("pull_request", "synchronize"): on_pull_request,
    ("issues", "opened"): on_issue_opened,
    ("issue_comment", "created"): on_comment,
    ("issue_comment", "edited"): on_comment_changed,
    ("issue_comment", "deleted"): on_comment_changed,
    ("pull_request_review_comment", "created"): on_comment,
    ("pull_request_review_comment", "edited"): on_comment_changed,
    ("pull_request_review_comment", "deleted"): on_comment_changed,
    ("pull_request_review", "submitted"): on_comment,
    ("pull_request_review", "edited"): on_comment_changed,
    ("check_run", "rerequested"): on_check_rerequested,
    ("check_suite", "rerequested"): on_check_rerequested,
}
"""(event, action) -> handler. Every pair not listed is skipped with a reason."""

_SUPPORTED_EVENTS = frozenset(name for name, _ in ROUTES)


def route(event: Event) -> Handler | Skip:
    """The handler for this event and action, or why there is none."""
    if event.name not in _SUPPORTED_EVENTS:
        return Skip(SkipReason.UNSUPPORTED_EVENT, event.name)
    handler = ROUTES.get((event.name, event.action or ""))
    if handler is None:
        return Skip(SkipReason.UNSUPPORTED_ACTION, f"{event.name}.{event.action}")
    return handler


def _config_broken(event: Event, handler: Handler, app_slug: str, error: str) -> Request | Skip:
    """`.github/bot.yml` cannot be used: the app is off here, and says so where it matters.

    A command (as the defaults read it: the file's own `slash_commands` is unknown) goes
    through the permission check like any other, then skips with a REPLY notice: only a
    writer is answered. An automatic pull request event with a head skips with a CHECK
    notice (one neutral check run on the head). Everything else skips without a notice.
    """
    skip = Skip(SkipReason.INVALID_CONFIG, error)
    if handler is on_comment and event.comment_body:
        command = parse_command(event.comment_body, app_slug=app_slug, slash_commands=False)
        if command is None:
            return skip
        notice = {"command": command.raw or command.name, NOTICE: REPLY}
        return Request(
            workflow=command.name,
            command=command.name,
            needs_permission=True,
            then=Skip(SkipReason.INVALID_CONFIG, error, notice),
        )
    if handler is on_pull_request and event.head_sha and event.number is not None:
        return Skip(SkipReason.INVALID_CONFIG, error, {NOTICE: CHECK})
    return skip


def _request(
    event: Event,
    config: RepoConfig,
    app_slug: str,
    config_error: str | None,
    awaiting: AwaitingReporter | None,
) -> Request | Skip:
    """Every check that does not need the actor's permission, in order."""
    handler = route(event)
    if isinstance(handler, Skip):
        return handler
    if not event.repo_full_name:
        return Skip(SkipReason.NO_REPOSITORY, f"{event.name}.{event.action}")
    if is_app_account(event.sender_login, app_slug):
        return Skip(SkipReason.SELF_EVENT, f"sent by {event.sender_login}")
    sender = event.sender_login or ""
    if event.sender_type == "Bot" or sender.lower().endswith("[bot]"):
        return Skip(SkipReason.BOT_SENDER, f"sent by {event.sender_login}")
    if config_error is not None:
        return _config_broken(event, handler, app_slug, config_error)
    if not config.enabled:
        return Skip(SkipReason.REPO_DISABLED, event.repo_full_name)
    if _is_ignored(event.sender_login, config):
        return Skip(SkipReason.IGNORED_AUTHOR, f"{event.sender_login} is in ignore_authors")
    if event.target_kind is None or event.number is None:
        return Skip(SkipReason.NO_TARGET, f"{event.name}.{event.action} names no issue or PR")
    request = handler(event, config, app_slug)
    if isinstance(request, Skip) and request.reason is SkipReason.NOT_ADDRESSED:
        return _reporter_reply(event, config, awaiting, request)
    return request


def needs_permission(
    event: Event,
    config: RepoConfig,
    app_slug: str,
    *,
    config_error: str | None = None,
    awaiting_reporter: AwaitingReporter | None = None,
) -> bool:
    """Whether decide() will read the actor's permission, so the caller should fetch it.

    True only for a comment that gives the app a command and passes every check before
    it: a command is the one way a person asks for work, and `fix` writes code. Every
    command needs write access, `help`, `stop`, `status` and unknown words included, so
    people without it get no reply at all (nothing to spam with). Automatic reviews and
    triage need no permission: they follow from opening a pull request or issue, which
    anyone may do, and they only read; so does the triage a reporter's reply starts again.
    Reading the permission costs an API call, so the caller fetches it only when this says
    so and passes None otherwise.
    """
    request = _request(event, config, app_slug, config_error, awaiting_reporter)
    return isinstance(request, Request) and request.needs_permission


def _permission_skip(event: Event, permission: str | None) -> Skip | None:
    actor = event.sender_login or "the sender"
    if permission is None:
        detail = f"could not read {actor}'s permission on {event.repo_full_name}; not running"
        return Skip(SkipReason.NO_PERMISSION, detail)
    if permission.strip().lower() not in WRITE_PERMISSIONS:
        detail = f"{actor} has {permission!r} permission; commands need write, maintain or admin"
        return Skip(SkipReason.NO_PERMISSION, detail)
    return None


def decide(
    event: Event,
    config: RepoConfig,
    *,
    app_slug: str,
    permission: str | None,
    config_error: str | None = None,
    awaiting_reporter: AwaitingReporter | None = None,
) -> Decision:
    """Turn one event into a Trigger, or a Skip that says why nothing runs.

    `permission` is the sender's collaborator permission on the repository (`admin`,
    `maintain`, `write`, `triage`, `read`, `none`), or None when it could not be read;
    it is consulted only where needs_permission() is True, and None then fails closed.
    `config_error` is the text of a ConfigError for `.github/bot.yml`: events that pass
    the routing, self and bot checks then skip with INVALID_CONFIG, and the two that are
    answered say so in the skip's `extra` (`policies.config_notice`): a command, once its
    author's write permission passed, and an automatic pull request event.
    `awaiting_reporter` is read only where is_reporter_comment() is True: the store's facts
    about triage on that issue (None: no reporter's reply runs anything).
    """
    request = _request(event, config, app_slug, config_error, awaiting_reporter)
    if isinstance(request, Skip):
        return request
    if request.needs_permission:
        refused = _permission_skip(event, permission)
        if refused is not None:
            return refused
    if request.then is not None:
        return request.then
    # _request() returns a Request only when the repository and target are known.
    assert event.repo_full_name is not None and event.target_kind is not None
    assert event.number is not None
    return Trigger(
        workflow=request.workflow,
        repo_full_name=event.repo_full_name,
        installation_id=event.installation_id,
        target_kind=event.target_kind,
        number=event.number,
        actor=event.sender_login or "",
        delivery_id=event.delivery_id,
        args=request.args,
        head_sha=event.head_sha,
        comment_id=event.comment_id if request.command or request.reporter_reply else None,
        command=request.command,
        reporter_reply=request.reporter_reply,
    )


def comment_identity(event: Event) -> str | None:
    """The event's comment (or review) as last written: kind, id and `updated_at`; None when
    the payload lacks one of them. The same under every GUID a captured body is sent with."""
    if event.comment_id is None or not event.comment_updated_at:
        return None
    return f"{event.comment_kind}/{event.comment_id}@{event.comment_updated_at}"


def run_key(event: Event, trigger: Trigger, body_digest: str) -> str:
    """What a trigger answers, named the same whatever GUID its delivery came under.

    The signature of a delivery covers its body, not its `X-GitHub-Delivery` header, so a
    captured body can be sent again under new GUIDs; the store lets one delivery hold each
    key, and the others are skipped as replayed. A command (or a reporter's reply) is its
    comment as last written: (kind, id, `updated_at`). An automatic trigger is (event,
    action, target, head sha), or the target's own id where there is no head (an issue
    opened). Where a payload lacks those, the body's digest stands in: the same bytes ask
    for the same thing. The workflow ends every key, so two workflows never share one.

    A request to run a check again is the check as its suite last changed: (check run or
    suite id, the suite's `updated_at`). Every click on Re-run is a new request with a body of
    its own (GitHub resets the suite at each, and the review it starts posts a new check run,
    which the next click is on), while the same body is the same request, replayed.
    """
    repo = str(event.repo_id) if event.repo_id is not None else trigger.repo_full_name
    target = f"{repo}/{trigger.target_kind}/{trigger.number}"
    if event.name in CHECK_EVENTS:
        if event.check_id is None or not event.check_suite_updated_at:
            return f"body:{body_digest}:{trigger.workflow}"
        check = f"{event.name}/{event.check_id}@{event.check_suite_updated_at}"
        return f"{event.name}.{event.action}:{target}:{check}:{trigger.workflow}"
    if trigger.comment_id is not None:
        comment = comment_identity(event)
        if comment is not None:
            return f"comment:{target}:{comment}:{trigger.workflow}"
        return f"body:{body_digest}:{trigger.workflow}"
    own = trigger.head_sha or (None if event.target_id is None else f"id{event.target_id}")
    if own is None:
        return f"body:{body_digest}:{trigger.workflow}"
    return f"{event.name}.{event.action}:{target}:{own}:{trigger.workflow}"
