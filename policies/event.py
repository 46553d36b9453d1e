"""The values a decision reads from one delivery: Event in, Trigger or Skip out."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

TargetKind = Literal["issue", "pull_request"]


@dataclass(frozen=True, slots=True)
class Event:
    """The parsed payload fields the bot reads; every field but `name` may be missing."""

    name: str
    delivery_id: str
    action: str | None = None
    repo_full_name: str | None = None
    repo_id: int | None = None
    default_branch: str | None = None
    installation_id: int | None = None
    sender_login: str | None = None
    sender_type: str | None = None
    target_kind: TargetKind | None = None
    number: int | None = None
    title: str | None = None
    is_draft: bool = False
    head_sha: str | None = None
    head_ref: str | None = None
    head_repo_full_name: str | None = None
    base_sha: str | None = None
    base_ref: str | None = None
    target_id: int | None = None
    """The issue's or pull request's own id (not its number)."""
    comment_id: int | None = None
    comment_updated_at: str | None = None
    """When the comment was last edited (a review: when it was submitted), as GitHub wrote it."""
    comment_body: str | None = None
    comment_kind: Literal["issue_comment", "review_comment", "review"] | None = None
    comment_author_association: str | None = None
    comment_path: str | None = None
    comment_line: int | None = None
    comment_diff_hunk: str | None = None
    comment_in_reply_to: int | None = None
    """A reply in a review thread: the thread's first comment (GitHub's `in_reply_to_id`)."""
    author_login: str | None = None
    labels: tuple[str, ...] = ()
    html_url: str | None = None
    repositories_added: tuple[str, ...] = ()
    """`installation_repositories.added`: the full names the installation gained."""
    repositories_removed: tuple[str, ...] = ()
    """`installation_repositories.removed`: the full names the installation lost."""
    check_app_id: int | None = None
    """`check_run` / `check_suite`: the id of the App the check belongs to."""
    check_id: int | None = None
    """`check_run` / `check_suite`: the check run's (or the suite's) own id."""
    check_name: str | None = None
    """`check_run`: the check run's name (the app names its own `<slug>: <workflow>`)."""
    check_suite_updated_at: str | None = None
    """`check_run` / `check_suite`: when the check's suite last changed, as GitHub wrote it.
    GitHub resets the suite at every request to run a check again, so this moves with each."""
    merged: bool = False
    """`pull_request.closed`: whether the pull request was merged (closed without it: False)."""
    review_state: str | None = None
    """`pull_request_review`: the review's state as the webhook writes it (`changes_requested`,
    `commented`, `approved`, `dismissed`)."""


class SkipReason(StrEnum):
    """Why a delivery starts no run. Every Skip carries one, and it is always logged."""

    UNSUPPORTED_EVENT = "unsupported_event"
    UNSUPPORTED_ACTION = "unsupported_action"
    NO_REPOSITORY = "no_repository"
    SELF_EVENT = "self_event"
    BOT_SENDER = "bot_sender"
    DRAFT = "draft"
    NO_PERMISSION = "no_permission"
    EDITED_OR_DELETED = "edited_or_deleted"
    NOT_ADDRESSED = "not_addressed"
    UNKNOWN_COMMAND = "unknown_command"
    REPO_DISABLED = "repo_disabled"
    WORKFLOW_DISABLED = "workflow_disabled"
    INVALID_CONFIG = "invalid_config"
    IGNORED_AUTHOR = "ignored_author"
    NO_TARGET = "no_target"
    REPLY_LIMIT = "reply_limit"
    INSTALLATION_INACTIVE = "installation_inactive"
    NOT_OUR_CHECK = "not_our_check"
    """A request to run a check again, for a check that is not this App's (or whose App
    cannot be told)."""
    REPLAYED = "replayed"
    """The same command or automatic trigger already ran under another delivery's GUID."""
    RATE_LIMITED = "rate_limited"
    """The person gave more commands in the repository within an hour than `commands.per_hour`
    allows (`policies.command_rate`)."""
    NOT_CONFIGURED = "not_configured"
    """The deployment lacks a setting the run needs (a model, the App's credentials): nothing
    is posted, and `bot replay --delivery GUID` runs it once the setting is there."""


@dataclass(frozen=True, slots=True)
class Trigger:
    """What is asked of the bot: one workflow on one issue or pull request."""

    workflow: str
    repo_full_name: str
    installation_id: int | None
    target_kind: TargetKind
    number: int
    actor: str
    delivery_id: str
    args: str = ""
    head_sha: str | None = None
    comment_id: int | None = None
    command: str | None = None
    reporter_reply: bool = False
    """Triage again because the issue's author answered its questions (no command)."""


@dataclass(frozen=True, slots=True)
class Skip:
    """Why nothing runs, in a code for machines and a sentence for people."""

    reason: SkipReason
    detail: str = ""
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def message(self) -> str:
        return f"{self.reason.value}: {self.detail}" if self.detail else self.reason.value


Decision = Trigger | Skip
