"""Lenient models of the webhook payload fields the bot reads, turned into an Event."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Annotated, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)

from policies.event import Event, TargetKind

__all__ = ["parse_event"]

T = TypeVar("T")


def _or_none(value: object, handler: ValidatorFunctionWrapHandler) -> object:
    """Keep a value that fits the field, drop one that does not: payloads drift."""
    try:
        return handler(value)
    except ValidationError:
        return None


Lenient = Annotated[T | None, WrapValidator(_or_none)]
"""A field that becomes None instead of failing when GitHub sends something unexpected."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class _Account(_Model):
    login: Lenient[str] = None
    type: Lenient[str] = None


class _Repository(_Model):
    id: Lenient[int] = None
    full_name: Lenient[str] = None
    default_branch: Lenient[str] = None


class _Installation(_Model):
    id: Lenient[int] = None


class _Label(_Model):
    name: Lenient[str] = None


class _Ref(_Model):
    sha: Lenient[str] = None
    ref: Lenient[str] = None
    repo: Lenient[_Repository] = None


class _Issue(_Model):
    id: Lenient[int] = None
    number: Lenient[int] = None
    title: Lenient[str] = None
    html_url: Lenient[str] = None
    user: Lenient[_Account] = None
    labels: Lenient[list[Lenient[_Label]]] = None
    draft: Lenient[bool] = None
    # Present (an object of links) only when the issue is a pull request.
    pull_request: Lenient[dict[str, object]] = None


class _PullRequest(_Model):
    id: Lenient[int] = None
    number: Lenient[int] = None
    title: Lenient[str] = None
    html_url: Lenient[str] = None
    user: Lenient[_Account] = None
    labels: Lenient[list[Lenient[_Label]]] = None
    draft: Lenient[bool] = None
    head: Lenient[_Ref] = None
    base: Lenient[_Ref] = None
    merged: Lenient[bool] = None


class _Comment(_Model):
    id: Lenient[int] = None
    body: Lenient[str] = None
    html_url: Lenient[str] = None
    author_association: Lenient[str] = None
    path: Lenient[str] = None
    line: Lenient[int] = None
    diff_hunk: Lenient[str] = None
    in_reply_to_id: Lenient[int] = None  # a review comment's: the thread's first comment
    updated_at: Lenient[str] = None
    submitted_at: Lenient[str] = None  # a review's (it has no updated_at)
    state: Lenient[str] = None  # a review's


class _App(_Model):
    id: Lenient[int] = None


class _CheckPull(_Model):
    """An entry of a check's `pull_requests`: the open pull requests at its head branch."""

    id: Lenient[int] = None
    number: Lenient[int] = None
    head: Lenient[_Ref] = None
    base: Lenient[_Ref] = None


class _CheckSuite(_Model):
    id: Lenient[int] = None
    head_sha: Lenient[str] = None
    head_branch: Lenient[str] = None
    updated_at: Lenient[str] = None
    app: Lenient[_App] = None
    pull_requests: Lenient[list[Lenient[_CheckPull]]] = None


class _CheckRun(_Model):
    id: Lenient[int] = None
    name: Lenient[str] = None
    head_sha: Lenient[str] = None
    app: Lenient[_App] = None
    check_suite: Lenient[_CheckSuite] = None
    pull_requests: Lenient[list[Lenient[_CheckPull]]] = None


class _Payload(_Model):
    action: Lenient[str] = None
    repositories_added: Lenient[list[Lenient[_Repository]]] = None
    repositories_removed: Lenient[list[Lenient[_Repository]]] = None
    number: Lenient[int] = None
    repository: Lenient[_Repository] = None
    installation: Lenient[_Installation] = None
    sender: Lenient[_Account] = None
    issue: Lenient[_Issue] = None
    pull_request: Lenient[_PullRequest] = None
    comment: Lenient[_Comment] = None
    review: Lenient[_Comment] = None
    check_run: Lenient[_CheckRun] = None
    check_suite: Lenient[_CheckSuite] = None


_COMMENT_KINDS: Mapping[str, Literal["issue_comment", "review_comment", "review"]] = {
    "issue_comment": "issue_comment",
    "pull_request_review_comment": "review_comment",
    "pull_request_review": "review",
}
_PULL_REQUEST_EVENTS = frozenset(
    {"pull_request", "pull_request_review", "pull_request_review_comment"}
)


def _target_kind(name: str, payload: _Payload) -> TargetKind | None:
    if name in _PULL_REQUEST_EVENTS:
        return "pull_request"
    if name == "issue_comment" and payload.issue is not None:
        return "pull_request" if payload.issue.pull_request is not None else "issue"
    if name == "issues":
        return "issue"
    return None


def _labels(labels: list[_Label | None] | None) -> tuple[str, ...]:
    return tuple(label.name for label in labels or () if label is not None and label.name)


def _full_names(repos: list[_Repository | None] | None) -> tuple[str, ...]:
    return tuple(repo.full_name for repo in repos or () if repo is not None and repo.full_name)


def _event(name: str, delivery_id: str, p: _Payload) -> Event:
    kind = _target_kind(name, p)
    pr = p.pull_request if kind == "pull_request" else None
    issue = p.issue
    target: _Issue | _PullRequest | None = pr or issue
    head = pr.head if pr else None
    base = pr.base if pr else None
    comment = p.review if name == "pull_request_review" else p.comment
    comment_kind = _COMMENT_KINDS.get(name) if comment is not None else None
    draft = (pr.draft if pr else None) or (
        issue.draft if issue and kind == "pull_request" else None
    )
    number = target.number if target and target.number is not None else None
    if number is None and kind is not None:
        number = p.number
    return Event(
        name=name,
        delivery_id=delivery_id,
        action=p.action,
        repo_full_name=p.repository.full_name if p.repository else None,
        repo_id=p.repository.id if p.repository else None,
        default_branch=p.repository.default_branch if p.repository else None,
        installation_id=p.installation.id if p.installation else None,
        sender_login=p.sender.login if p.sender else None,
        sender_type=p.sender.type if p.sender else None,
        target_kind=kind,
        number=number,
        title=target.title if target else None,
        is_draft=bool(draft),
        head_sha=head.sha if head else None,
        head_ref=head.ref if head else None,
        head_repo_full_name=head.repo.full_name if head and head.repo else None,
        base_sha=base.sha if base else None,
        base_ref=base.ref if base else None,
        target_id=target.id if target else None,
        comment_id=comment.id if comment else None,
        comment_updated_at=(comment.updated_at or comment.submitted_at) if comment else None,
        comment_body=comment.body if comment else None,
        comment_kind=comment_kind,
        comment_author_association=comment.author_association if comment else None,
        comment_path=comment.path if comment else None,
        comment_line=comment.line if comment else None,
        comment_diff_hunk=comment.diff_hunk if comment else None,
        comment_in_reply_to=comment.in_reply_to_id if comment else None,
        author_login=target.user.login if target and target.user else None,
        labels=_labels(target.labels) if target else (),
        html_url=target.html_url if target else None,
        repositories_added=_full_names(p.repositories_added),
        repositories_removed=_full_names(p.repositories_removed),
        merged=bool(pr.merged) if pr else False,
        review_state=p.review.state if name == "pull_request_review" and p.review else None,
    )


def _based_in(pull: _CheckPull, repo_id: int | None) -> bool:
    base = pull.base.repo.id if pull.base is not None and pull.base.repo is not None else None
    return repo_id is None or base is None or base == repo_id


def _check_pull(
    pulls: list[_CheckPull | None] | None, head_sha: str | None, repo_id: int | None
) -> _CheckPull | None:
    """The listed pull request of this repository whose head is the check's commit.

    GitHub lists the open pull requests whose head *branch* matches, so one that has moved on
    since is listed too: it is not the check's. A fork's head lists none at all.
    """
    found = [
        pull
        for pull in pulls or ()
        if pull is not None
        and pull.number is not None
        and pull.head is not None
        and head_sha is not None
        and pull.head.sha == head_sha
        and _based_in(pull, repo_id)
    ]
    return min(found, key=lambda pull: pull.number or 0, default=None)


def _with_check(event: Event, p: _Payload) -> Event:
    """A `check_run` or `check_suite` event: the check, its App and head, and the pull
    request at that head when the payload lists it."""
    run = p.check_run if event.name == "check_run" else None
    suite = run.check_suite if run is not None else p.check_suite
    check: _CheckRun | _CheckSuite | None = run if event.name == "check_run" else suite
    if check is None:
        return event
    pull = _check_pull(check.pull_requests, check.head_sha, event.repo_id)
    return dataclasses.replace(
        event,
        check_app_id=check.app.id if check.app else None,
        check_id=check.id,
        check_name=run.name if run is not None else None,
        check_suite_updated_at=suite.updated_at if suite else None,
        head_sha=check.head_sha,
        head_ref=suite.head_branch if suite else None,
        target_kind="pull_request" if pull is not None else None,
        number=pull.number if pull is not None else None,
        target_id=pull.id if pull is not None else None,
    )


_CHECK_EVENTS = frozenset({"check_run", "check_suite"})


def parse_event(name: str, delivery_id: str, payload: Mapping[str, object]) -> Event:
    """Read the fields the bot uses from one delivery's payload.

    Never raises for a payload GitHub could send: a field that is missing or has an
    unexpected shape is simply None in the Event (only `name` and `delivery_id` are sure).
    """
    fields = dict(payload) if isinstance(payload, Mapping) else {}
    # Cannot raise: every field is Lenient, so a misfit becomes None where it sits.
    parsed = _Payload.model_validate(fields)
    event = _event(name, delivery_id, parsed)
    return _with_check(event, parsed) if name in _CHECK_EVENTS else event
