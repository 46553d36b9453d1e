"""Which GitHub Actions events `bot action` turns into a delivery, and which it declines.

A workflow job hands the app one event: its name (`GITHUB_EVENT_NAME`) and the webhook
payload GitHub wrote to `GITHUB_EVENT_PATH`. Most of those payloads are the webhook's own, so
the job's event becomes one delivery and goes through the same `decide()` as a server's. What
differs is decided here, before anything is stored or asked of GitHub:

- `pull_request_target` is a `pull_request` delivery (same payload; the job runs on the base
  branch's workflow with a token that can write). The app never checks out the head's code in
  the job: it reads the head from its own mirror, as data.
- A `pull_request` (or a review of one) from a fork runs with a read-only token and no secrets: nothing could be
  posted, so the run is declined with a reason the job log and step summary show.
- The payload's repository must be the one the job runs in (`GITHUB_REPOSITORY`): the token
  belongs to that one.
- A payload without `installation` (every `GITHUB_TOKEN` job's) gets installation 0: the job's
  token stands for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["HANDLED", "TOKEN_INSTALLATION", "ActionDelivery", "ActionSkip", "plan_delivery"]

HANDLED: Mapping[str, str] = {
    "pull_request": "pull_request",
    "pull_request_target": "pull_request",
    "issues": "issues",
    "issue_comment": "issue_comment",
    "pull_request_review": "pull_request_review",
    "pull_request_review_comment": "pull_request_review_comment",
}
"""Actions event name -> the webhook event it is delivered as."""

TOKEN_INSTALLATION = 0
"""The installation id of a payload that names none: the job's own token."""

FORK_READ_ONLY = frozenset({"pull_request", "pull_request_review", "pull_request_review_comment"})
"""The events whose jobs get a read-only token and no secrets for a fork's pull request."""

FORK_REASON = (
    "this pull request comes from a fork; on these events GitHub gives its job a read-only "
    "token and no secrets, so the app can post nothing. Run the app on `pull_request_target` "
    "for forks (it reads the head's code as data and never runs it with the job's secrets)"
)


@dataclass(frozen=True, slots=True)
class ActionDelivery:
    """The job's event as the delivery the app decides: the webhook event and its payload."""

    event: str
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ActionSkip:
    """Nothing to run. `failed` when the job itself is wrong (a nonzero exit), else a skip."""

    reason: str
    failed: bool = False


def _full_name(repo: object) -> str | None:
    if isinstance(repo, Mapping):
        name = repo.get("full_name")
        if isinstance(name, str) and "/" in name:
            return name
    return None


def _from_fork(payload: Mapping[str, Any]) -> bool:
    pull = payload.get("pull_request")
    if not isinstance(pull, Mapping):
        return False
    head = pull.get("head")
    base_repo = _full_name(payload.get("repository"))
    head_repo = _full_name(head.get("repo")) if isinstance(head, Mapping) else None
    # A deleted fork leaves `head.repo` null: still not this repository.
    return head_repo is None or base_repo is None or head_repo.lower() != base_repo.lower()


def plan_delivery(event_name: str, payload: object, repository: str) -> ActionDelivery | ActionSkip:
    """The delivery for the job's event `event_name` with `payload`, in `repository`."""
    event = HANDLED.get(event_name)
    if event is None:
        handled = ", ".join(sorted(HANDLED))
        return ActionSkip(f"the app does not act on `{event_name}` events (it acts on {handled})")
    if not isinstance(payload, dict):
        return ActionSkip("the event file does not hold a JSON object", failed=True)
    named = _full_name(payload.get("repository"))
    if named is None:
        return ActionSkip("the event names no repository", failed=True)
    if named.lower() != repository.lower():
        return ActionSkip(
            f"the event is about {named} but the job runs in {repository}; its token is for "
            f"{repository} only",
            failed=True,
        )
    if event_name in FORK_READ_ONLY and _from_fork(payload):
        return ActionSkip(FORK_REASON)
    if not isinstance(payload.get("installation"), Mapping):
        payload = {**payload, "installation": {"id": TOKEN_INSTALLATION}}
    return ActionDelivery(event, payload)
