"""The trigger policy: every rule and every skip reason, from payloads in fixtures/webhooks."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from bot.events import parse_event
from policies.config import RepoConfig, parse_repo_config
from policies.event import Event, Skip, SkipReason, Trigger
from policies.triggers import (
    MAX_REPORTER_REPLIES,
    ROUTES,
    WRITE_PERMISSIONS,
    AwaitingReporter,
    bot_login,
    decide,
    is_app_account,
    is_reporter_comment,
    needs_permission,
    on_comment,
    on_comment_changed,
    on_issue_opened,
    on_pull_request,
    route,
)

WEBHOOKS = Path(__file__).resolve().parents[2] / "fixtures" / "webhooks"
SLUG = "repo-bot"
HEAD = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"


def load(fixture: str, *, body: str | None = None) -> Event:
    """The Event for fixtures/webhooks/<fixture>.json; the event name is its first part."""
    payload = json.loads((WEBHOOKS / f"{fixture}.json").read_text())
    event = parse_event(fixture.split(".")[0], f"delivery-{fixture}", payload)
    return event if body is None else dataclasses.replace(event, comment_body=body)


def config(text: str = "") -> RepoConfig:
    return parse_repo_config(text)


# --- rules that start a run -------------------------------------------------------------

TRIGGERS = [
    pytest.param("pull_request.opened", None, "", None, ("review", "pull_request", 2, ""), id="pr-opened"),
    pytest.param("pull_request.reopened", None, "", None, ("review", "pull_request", 2, ""), id="pr-reopened"),
    pytest.param("pull_request.ready_for_review", None, "", None, ("review", "pull_request", 2, ""), id="pr-ready"),
    pytest.param("pull_request.synchronize", None, "", None, ("review", "pull_request", 2, ""), id="pr-synchronize"),
    pytest.param("pull_request.opened.draft", None, "review: {drafts: true}", None, ("review", "pull_request", 2, ""), id="pr-draft-when-enabled"),
    pytest.param("issues.opened", None, "", None, ("triage", "issue", 1, ""), id="issue-opened"),
    pytest.param("issue_comment.created.review", None, "", "write", ("review", "pull_request", 2, ""), id="comment-review-on-pr"),
    pytest.param("issue_comment.created.review", None, "review: {auto: false}", "write", ("review", "pull_request", 2, ""), id="comment-review-when-auto-off"),
    pytest.param("issue_comment.created.fix", None, "", "admin", ("fix", "issue", 1, "please keep the wording short"), id="comment-fix-on-issue"),
    pytest.param("issue_comment.created.ask", None, "", "maintain", ("ask", "pull_request", 2, "where is the greeting printed?\nI looked in `main.py` already."), id="comment-ask"),
    pytest.param("issue_comment.created.plain", "@repo-bot stop", "", "write", ("stop", "issue", 1, ""), id="comment-stop"),
    pytest.param("issue_comment.created.plain", "@Repo-Bot status", "", "write", ("status", "issue", 1, ""), id="comment-status"),
    pytest.param("issue_comment.created.plain", "@repo-bot help", "", "write", ("help", "issue", 1, ""), id="comment-help"),
    pytest.param("issue_comment.created.plain", "thanks @repo-bot!", "", "write", ("help", "issue", 1, ""), id="comment-bare-mention-is-help"),
    pytest.param("issue_comment.created.plain", "/fix the typo", "slash_commands: true", "write", ("fix", "issue", 1, "the typo"), id="comment-slash-when-enabled"),
    pytest.param("issue_comment.created.review", "@repo-bot review", "review: {drafts: false}", "WRITE", ("review", "pull_request", 2, ""), id="permission-case-insensitive"),
    pytest.param("pull_request_review_comment.created", None, "", "write", ("ask", "pull_request", 2, "why does this line need more emoji?"), id="review-comment-ask"),
    pytest.param("pull_request_review.submitted", None, "", "write", ("fix", "pull_request", 2, "the typos I marked"), id="review-submitted-fix"),
    pytest.param("issue_comment.created.plain", "@repo-bot decide 2", "", "write", ("decide", "issue", 1, "2"), id="decide-number"),
    pytest.param("issue_comment.created.plain", '@repo-bot decide "the cache"', "", "maintain", ("decide", "issue", 1, '"the cache"'), id="decide-own-words"),
]  # fmt: skip


@pytest.mark.parametrize(("fixture", "body", "cfg", "permission", "expected"), TRIGGERS)
def test_trigger(
    fixture: str,
    body: str | None,
    cfg: str,
    permission: str | None,
    expected: tuple[str, str, int, str],
) -> None:
    event = load(fixture, body=body)
    decision = decide(event, config(cfg), app_slug=SLUG, permission=permission)
    assert isinstance(decision, Trigger), decision
    assert (decision.workflow, decision.target_kind, decision.number, decision.args) == expected
    assert decision.repo_full_name == "Codertocat/Hello-World"
    assert decision.actor == "Codertocat"
    assert decision.delivery_id == f"delivery-{fixture}"
    assert decision.installation_id == event.installation_id is not None


def test_pull_request_trigger_carries_head_sha_and_no_command() -> None:
    decision = decide(load("pull_request.synchronize"), config(), app_slug=SLUG, permission=None)
    assert isinstance(decision, Trigger)
    assert decision.head_sha is not None and len(decision.head_sha) == 40
    assert (decision.command, decision.comment_id) == (None, None)


@pytest.mark.parametrize(
    ("fixture", "comment_id", "head_sha"),
    [
        pytest.param("issue_comment.created.review", 492700400, None, id="issue-comment"),
        pytest.param("pull_request_review_comment.created", 284312630, HEAD, id="review-comment"),
        pytest.param("pull_request_review.submitted", 237895671, HEAD, id="review"),
    ],
)
def test_command_trigger_names_its_comment(
    fixture: str, comment_id: int, head_sha: str | None
) -> None:
    decision = decide(load(fixture), config(), app_slug=SLUG, permission="write")
    assert isinstance(decision, Trigger)
    assert decision.command == decision.workflow
    assert decision.comment_id == comment_id
    assert decision.head_sha == head_sha


# --- every skip reason ------------------------------------------------------------------

SKIPS = [
    pytest.param("ping", None, "", "admin", SkipReason.UNSUPPORTED_EVENT, "ping", id="ping"),
    pytest.param("installation.created", None, "", "admin", SkipReason.UNSUPPORTED_EVENT, "installation", id="installation"),
    pytest.param("push", None, "", "admin", SkipReason.UNSUPPORTED_EVENT, "push", id="push"),
    pytest.param("pull_request.closed", None, "", "admin", SkipReason.UNSUPPORTED_ACTION, "pull_request.closed", id="pr-closed"),
    pytest.param("issues.labeled", None, "", "admin", SkipReason.UNSUPPORTED_ACTION, "issues.labeled", id="issue-labeled"),
    pytest.param("pull_request_review.dismissed", None, "", "admin", SkipReason.UNSUPPORTED_ACTION, "pull_request_review.dismissed", id="review-dismissed"),
    pytest.param("issues.opened.no-repository", None, "", "admin", SkipReason.NO_REPOSITORY, "issues.opened", id="no-repository"),
    pytest.param("pull_request.synchronize.self", None, "", "admin", SkipReason.SELF_EVENT, "repo-bot[bot]", id="self-push"),
    pytest.param("issue_comment.created.self", None, "", "admin", SkipReason.SELF_EVENT, "repo-bot[bot]", id="self-comment"),
    pytest.param("pull_request.opened.bot-sender", None, "", "admin", SkipReason.BOT_SENDER, "dependabot[bot]", id="bot-pr"),
    pytest.param("issue_comment.created.bot-sender", None, "", "admin", SkipReason.BOT_SENDER, "dependabot[bot]", id="bot-comment"),
    pytest.param("pull_request.opened.draft", None, "", None, SkipReason.DRAFT, "#2 is a draft", id="draft"),
    pytest.param("issue_comment.created.review", None, "", "read", SkipReason.NO_PERMISSION, "'read' permission", id="perm-read"),
    pytest.param("issue_comment.created.review", None, "", "triage", SkipReason.NO_PERMISSION, "'triage' permission", id="perm-triage"),
    pytest.param("issue_comment.created.fix", None, "", "none", SkipReason.NO_PERMISSION, "'none' permission", id="perm-none"),
    pytest.param("issue_comment.created.fix", None, "", None, SkipReason.NO_PERMISSION, "could not read Codertocat's permission", id="perm-unknown-fails-closed"),
    pytest.param("issue_comment.created.unknown", None, "", "read", SkipReason.NO_PERMISSION, "'read' permission", id="unknown-command-from-reader"),
    pytest.param("issue_comment.edited", None, "", "admin", SkipReason.EDITED_OR_DELETED, "issue_comment.edited", id="comment-edited"),
    pytest.param("issue_comment.deleted", None, "", "admin", SkipReason.EDITED_OR_DELETED, "issue_comment.deleted", id="comment-deleted"),
    pytest.param("pull_request_review_comment.edited", None, "", "admin", SkipReason.EDITED_OR_DELETED, "pull_request_review_comment.edited", id="review-comment-edited"),
    pytest.param("pull_request_review_comment.deleted", None, "", "admin", SkipReason.EDITED_OR_DELETED, "pull_request_review_comment.deleted", id="review-comment-deleted"),
    pytest.param("issue_comment.created.plain", None, "", "admin", SkipReason.NOT_ADDRESSED, "", id="plain-comment"),
    pytest.param("issue_comment.created.quoted", None, "", "admin", SkipReason.NOT_ADDRESSED, "", id="quoted-command"),
    pytest.param("issue_comment.created.plain", "", "", "admin", SkipReason.NOT_ADDRESSED, "empty comment", id="empty-comment"),
    pytest.param("issue_comment.created.plain", "/fix it", "", "admin", SkipReason.NOT_ADDRESSED, "", id="slash-when-disabled"),
    pytest.param("issue_comment.created.plain", "ping @repo-bot-dev review", "", "admin", SkipReason.NOT_ADDRESSED, "", id="other-app"),
    pytest.param("issue_comment.created.unknown", None, "", "write", SkipReason.UNKNOWN_COMMAND, "frobnicate", id="unknown-command"),
    pytest.param("issue_comment.created.plain", "@repo-bot ask", "", "write", SkipReason.UNKNOWN_COMMAND, "ask needs a question", id="ask-without-question"),
    pytest.param("issue_comment.created.plain", "@repo-bot review", "", "write", SkipReason.UNKNOWN_COMMAND, "pull requests only", id="review-on-issue"),
    pytest.param("issue_comment.created.plain", "@repo-bot decide", "", "write", SkipReason.UNKNOWN_COMMAND, "decide needs an option's number or your own answer", id="decide-bare"),
    pytest.param("issue_comment.created.plain", '@repo-bot decide ""', "", "write", SkipReason.UNKNOWN_COMMAND, "decide needs", id="decide-empty-quotes"),
    pytest.param("issue_comment.created.plain", "@repo-bot decide 1", "", "read", SkipReason.NO_PERMISSION, "'read' permission", id="decide-from-reader"),
    pytest.param("issue_comment.created.plain", "@repo-bot decide", "", "read", SkipReason.NO_PERMISSION, "'read' permission", id="bare-decide-from-reader"),
    pytest.param("pull_request.opened", None, "enabled: false", None, SkipReason.REPO_DISABLED, "Codertocat/Hello-World", id="repo-disabled-pr"),
    pytest.param("issue_comment.created.review", None, "enabled: false", "admin", SkipReason.REPO_DISABLED, "Codertocat/Hello-World", id="repo-disabled-command"),
    pytest.param("pull_request.opened", None, "review: {enabled: false}", None, SkipReason.WORKFLOW_DISABLED, "review", id="review-disabled"),
    pytest.param("pull_request.opened", None, "review: {auto: false}", None, SkipReason.WORKFLOW_DISABLED, "review", id="auto-review-off"),
    pytest.param("issue_comment.created.review", None, "review: {enabled: false}", "write", SkipReason.WORKFLOW_DISABLED, "review", id="review-command-disabled"),
    pytest.param("issues.opened", None, "triage: {enabled: false}", None, SkipReason.WORKFLOW_DISABLED, "triage", id="triage-disabled"),
    pytest.param("issue_comment.created.fix", None, "fix: {enabled: false}", "write", SkipReason.WORKFLOW_DISABLED, "fix", id="fix-disabled"),
    pytest.param("issue_comment.created.fix", None, "commands: {enabled: false}", None, SkipReason.WORKFLOW_DISABLED, "commands", id="commands-disabled"),
    pytest.param("issue_comment.created.fix", None, "ignore_authors: [codertocat]", "admin", SkipReason.IGNORED_AUTHOR, "Codertocat is in ignore_authors", id="ignored-sender"),
    pytest.param("pull_request.opened", None, "ignore_authors: [CODERTOCAT]", None, SkipReason.IGNORED_AUTHOR, "Codertocat", id="ignored-sender-case"),
]  # fmt: skip


@pytest.mark.parametrize(("fixture", "body", "cfg", "permission", "reason", "detail"), SKIPS)
def test_skip(
    fixture: str,
    body: str | None,
    cfg: str,
    permission: str | None,
    reason: SkipReason,
    detail: str,
) -> None:
    decision = decide(load(fixture, body=body), config(cfg), app_slug=SLUG, permission=permission)
    assert isinstance(decision, Skip), decision
    assert decision.reason is reason
    assert detail in decision.detail
    assert decision.message.startswith(reason.value)


ERROR = '.github/bot.yml line 4: review.drafts: expected true or false, got "sometimes"'


@pytest.mark.parametrize(
    ("fixture", "body", "permission", "expected"),
    [
        pytest.param("issues.opened", None, None, Skip(SkipReason.INVALID_CONFIG, ERROR), id="issue-says-nothing"),
        pytest.param("pull_request.opened", None, None, Skip(SkipReason.INVALID_CONFIG, ERROR, {"notice": "check"}), id="pr-opened-check"),
        pytest.param("pull_request.synchronize", None, None, Skip(SkipReason.INVALID_CONFIG, ERROR, {"notice": "check"}), id="pr-push-check"),
        pytest.param("pull_request.opened.draft", None, None, Skip(SkipReason.INVALID_CONFIG, ERROR, {"notice": "check"}), id="pr-draft-check"),
        pytest.param("issue_comment.created.review", None, "admin", Skip(SkipReason.INVALID_CONFIG, ERROR, {"command": "review", "notice": "reply"}), id="writer-command-reply"),
        pytest.param("issue_comment.created.ask", None, "write", Skip(SkipReason.INVALID_CONFIG, ERROR, {"command": "ask", "notice": "reply"}), id="writer-ask-reply"),
        pytest.param("issue_comment.created.unknown", None, "write", Skip(SkipReason.INVALID_CONFIG, ERROR, {"command": "frobnicate", "notice": "reply"}), id="writer-unknown-reply"),
        pytest.param("pull_request_review.submitted", None, "maintain", Skip(SkipReason.INVALID_CONFIG, ERROR, {"command": "fix", "notice": "reply"}), id="review-body-reply"),
        pytest.param("issue_comment.created.plain", None, "write", Skip(SkipReason.INVALID_CONFIG, ERROR), id="not-addressed-says-nothing"),
        pytest.param("issue_comment.created.plain", "/fix it", "write", Skip(SkipReason.INVALID_CONFIG, ERROR), id="slash-unknown-with-broken-config"),
        pytest.param("issue_comment.edited", None, "write", Skip(SkipReason.INVALID_CONFIG, ERROR), id="edited-says-nothing"),
    ],
)  # fmt: skip
def test_invalid_config_skips_with_the_error_text(
    fixture: str, body: str | None, permission: str | None, expected: Skip
) -> None:
    event = load(fixture, body=body)
    decision = decide(event, config(), app_slug=SLUG, permission=permission, config_error=ERROR)
    assert decision == expected
    wanted = needs_permission(event, config(), SLUG, config_error=ERROR)
    assert wanted is (expected.extra.get("notice") == "reply")


@pytest.mark.parametrize("permission", ["read", "triage", None])
def test_invalid_config_answers_no_command_of_someone_without_write_access(
    permission: str | None,
) -> None:
    decision = decide(
        load("issue_comment.created.ask"),
        config(),
        app_slug=SLUG,
        permission=permission,
        config_error=ERROR,
    )
    assert isinstance(decision, Skip) and decision.reason is SkipReason.NO_PERMISSION
    assert "notice" not in decision.extra


def test_invalid_config_on_a_pull_request_without_a_head_posts_no_check() -> None:
    event = dataclasses.replace(load("pull_request.opened"), head_sha=None)
    decision = decide(event, config(), app_slug=SLUG, permission=None, config_error=ERROR)
    assert decision == Skip(SkipReason.INVALID_CONFIG, ERROR)


def test_invalid_config_does_not_hide_a_bot_or_self_event() -> None:
    reasons = []
    for fixture in ("pull_request.opened.bot-sender", "pull_request.synchronize.self"):
        decision = decide(
            load(fixture), config(), app_slug=SLUG, permission="admin", config_error="broken"
        )
        assert isinstance(decision, Skip)
        reasons.append(decision.reason)
    assert reasons == [SkipReason.BOT_SENDER, SkipReason.SELF_EVENT]


def test_ignored_pull_request_author_is_skipped_but_may_still_be_asked() -> None:
    pr = dataclasses.replace(load("pull_request.opened"), author_login="renovate-user")
    cfg = config("ignore_authors: [renovate-user]")
    skipped = decide(pr, cfg, app_slug=SLUG, permission=None)
    assert isinstance(skipped, Skip) and skipped.reason is SkipReason.IGNORED_AUTHOR
    assert "renovate-user" in skipped.detail
    issue = dataclasses.replace(load("issues.opened"), author_login="renovate-user")
    triage = decide(issue, cfg, app_slug=SLUG, permission=None)
    assert isinstance(triage, Skip) and triage.reason is SkipReason.IGNORED_AUTHOR
    asked = decide(load("issue_comment.created.review"), cfg, app_slug=SLUG, permission="write")
    assert isinstance(asked, Trigger)


def test_unknown_and_disabled_commands_name_the_command() -> None:
    unknown = decide(
        load("issue_comment.created.unknown"), config(), app_slug=SLUG, permission="write"
    )
    fix_off = decide(
        load("issue_comment.created.fix"),
        config("fix: {enabled: false}"),
        app_slug=SLUG,
        permission="write",
    )
    assert isinstance(unknown, Skip) and isinstance(fix_off, Skip)
    assert unknown.extra == {"command": "frobnicate"}
    assert fix_off.extra == {"command": "fix"}


@pytest.mark.parametrize(
    "event",
    [
        pytest.param(dataclasses.replace(load("issue_comment.created.fix"), number=None), id="no-number"),
        pytest.param(dataclasses.replace(load("issues.opened"), target_kind=None), id="no-target-kind"),
    ],
)  # fmt: skip
def test_no_target(event: Event) -> None:
    decision = decide(event, config(), app_slug=SLUG, permission="admin")
    assert isinstance(decision, Skip) and decision.reason is SkipReason.NO_TARGET
    assert decision.detail.endswith("names no issue or PR")


def test_every_skip_reason_is_covered() -> None:
    reasons = {param.values[4] for param in SKIPS} | {
        SkipReason.INVALID_CONFIG,
        SkipReason.NO_TARGET,
        SkipReason.REPLY_LIMIT,  # the reporter's replies, below
        SkipReason.INSTALLATION_INACTIVE,  # policies.lifecycle (tests/policies/test_lifecycle.py)
        SkipReason.REPLAYED,  # the store's trigger keys (tests/policies/test_run_key.py)
        SkipReason.NOT_CONFIGURED,  # policies.readiness (tests/policies/test_readiness.py)
        SkipReason.NOT_OUR_CHECK,  # policies.rerun (tests/policies/test_rerun_routes.py)
        SkipReason.RATE_LIMITED,  # policies.command_rate (tests/policies/test_command_rate.py)
    }
    assert reasons == set(SkipReason)


# --- the reporter's reply -----------------------------------------------------------------

# Codertocat's plain comment on Codertocat's issue #1: the reporter answering.
REPLY = "issue_comment.created.plain"
WAITING = AwaitingReporter("needs_info", 0)


def reply(**changes: object) -> Event:
    return dataclasses.replace(load(REPLY), **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize("permission", ["read", "none", None, "admin"])
@pytest.mark.parametrize("replies", range(MAX_REPORTER_REPLIES))
def test_the_reporters_reply_triages_again_without_permission(
    permission: str | None, replies: int
) -> None:
    event = load(REPLY)
    awaiting = AwaitingReporter("needs_info", replies)
    assert is_reporter_comment(event)
    assert needs_permission(event, config(), SLUG, awaiting_reporter=awaiting) is False
    decision = decide(
        event, config(), app_slug=SLUG, permission=permission, awaiting_reporter=awaiting
    )
    assert isinstance(decision, Trigger), decision
    assert (decision.workflow, decision.target_kind, decision.number) == ("triage", "issue", 1)
    assert (decision.command, decision.args, decision.reporter_reply) == (None, "", True)
    assert decision.comment_id == event.comment_id is not None
    assert decision.actor == "Codertocat"


def test_a_reply_past_the_cap_does_nothing() -> None:
    for replies in (MAX_REPORTER_REPLIES, MAX_REPORTER_REPLIES + 5):
        decision = decide(
            load(REPLY),
            config(),
            app_slug=SLUG,
            permission=None,
            awaiting_reporter=AwaitingReporter("needs_info", replies),
        )
        assert isinstance(decision, Skip) and decision.reason is SkipReason.REPLY_LIMIT
        assert f"already ran triage {replies} times on #1" in decision.detail


REPLY_SKIPS = [
    pytest.param(reply(), None, "", SkipReason.NOT_ADDRESSED, id="no-store-facts"),
    pytest.param(reply(), AwaitingReporter(None, 0), "", SkipReason.NOT_ADDRESSED, id="never-triaged"),
    pytest.param(reply(), AwaitingReporter("succeeded", 0), "", SkipReason.NOT_ADDRESSED, id="triage-answered"),
    pytest.param(reply(), AwaitingReporter("blocked", 0), "", SkipReason.NOT_ADDRESSED, id="triage-blocked"),
    pytest.param(reply(), AwaitingReporter("running", 1), "", SkipReason.NOT_ADDRESSED, id="triage-running"),
    pytest.param(reply(), AwaitingReporter("failed", 0), "", SkipReason.NOT_ADDRESSED, id="triage-failed"),
    pytest.param(reply(sender_login="someone-else"), WAITING, "", SkipReason.NOT_ADDRESSED, id="other-reader"),
    pytest.param(reply(author_login=None), WAITING, "", SkipReason.NOT_ADDRESSED, id="author-unknown"),
    pytest.param(reply(target_kind="pull_request"), WAITING, "", SkipReason.NOT_ADDRESSED, id="on-a-pull-request"),
    pytest.param(reply(comment_body="  \n "), WAITING, "", SkipReason.NOT_ADDRESSED, id="blank-reply"),
    pytest.param(reply(comment_body=""), WAITING, "", SkipReason.NOT_ADDRESSED, id="empty-reply"),
    pytest.param(reply(sender_login="ci[bot]", author_login="ci[bot]"), WAITING, "", SkipReason.BOT_SENDER, id="bot-reporter"),
    pytest.param(reply(sender_type="Bot"), WAITING, "", SkipReason.BOT_SENDER, id="bot-type"),
    pytest.param(reply(sender_login="repo-bot[bot]", author_login="repo-bot[bot]"), WAITING, "", SkipReason.SELF_EVENT, id="the-app-itself"),
    pytest.param(reply(action="edited"), WAITING, "", SkipReason.EDITED_OR_DELETED, id="edited-reply"),
    pytest.param(reply(), WAITING, "triage: {enabled: false}", SkipReason.WORKFLOW_DISABLED, id="triage-disabled"),
    pytest.param(reply(), WAITING, "ignore_authors: [codertocat]", SkipReason.IGNORED_AUTHOR, id="ignored-reporter"),
    pytest.param(reply(), WAITING, "enabled: false", SkipReason.REPO_DISABLED, id="repo-disabled"),
]  # fmt: skip


@pytest.mark.parametrize(("event", "awaiting", "cfg", "reason"), REPLY_SKIPS)
def test_a_comment_that_is_not_the_reporters_reply_does_nothing(
    event: Event, awaiting: AwaitingReporter | None, cfg: str, reason: SkipReason
) -> None:
    decision = decide(
        event, config(cfg), app_slug=SLUG, permission="admin", awaiting_reporter=awaiting
    )
    assert isinstance(decision, Skip), decision
    assert decision.reason is reason
    assert needs_permission(event, config(cfg), SLUG, awaiting_reporter=awaiting) is False


def test_a_command_from_the_reporter_keeps_the_command_path() -> None:
    event = reply(comment_body="@repo-bot ask where is the greeting printed?")
    assert needs_permission(event, config(), SLUG, awaiting_reporter=WAITING) is True
    refused = decide(event, config(), app_slug=SLUG, permission="read", awaiting_reporter=WAITING)
    assert isinstance(refused, Skip) and refused.reason is SkipReason.NO_PERMISSION
    asked = decide(event, config(), app_slug=SLUG, permission="write", awaiting_reporter=WAITING)
    assert isinstance(asked, Trigger)
    assert (asked.workflow, asked.command, asked.reporter_reply) == ("ask", "ask", False)
    unknown = decide(
        reply(comment_body="@repo-bot thanks, see above"),
        config(),
        app_slug=SLUG,
        permission="read",
        awaiting_reporter=WAITING,
    )
    assert isinstance(unknown, Skip) and unknown.reason is SkipReason.NO_PERMISSION


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        pytest.param(reply(), True, id="reporter"),
        pytest.param(reply(sender_login="CODERTOCAT"), True, id="case"),
        pytest.param(reply(sender_login="someone-else"), False, id="other"),
        pytest.param(reply(sender_login=None), False, id="no-sender"),
        pytest.param(reply(author_login=None, sender_login=None), False, id="neither"),
        pytest.param(reply(target_kind="pull_request"), False, id="pull-request"),
        pytest.param(reply(action="edited"), False, id="edited"),
        pytest.param(reply(name="pull_request_review_comment"), False, id="review-comment"),
        pytest.param(load("issues.opened"), False, id="issue-opened"),
    ],
)
def test_is_reporter_comment(event: Event, expected: bool) -> None:
    assert is_reporter_comment(event) is expected


# --- accounts, permissions and routing ----------------------------------------------------


def test_bot_login() -> None:
    assert bot_login("repo-bot") == "repo-bot[bot]"


@pytest.mark.parametrize(
    ("login", "expected"),
    [
        pytest.param("repo-bot[bot]", True, id="bot-login"),
        pytest.param("Repo-Bot[BOT]", True, id="case"),
        pytest.param("repo-bot", True, id="no-suffix"),
        pytest.param("repo-bot-dev[bot]", False, id="other-app"),
        pytest.param("dependabot[bot]", False, id="other-bot"),
        pytest.param(None, False, id="missing"),
    ],
)
def test_is_app_account(login: str | None, expected: bool) -> None:
    assert is_app_account(login, SLUG) is expected


def test_sender_named_like_a_bot_is_a_bot_even_without_type() -> None:
    event = dataclasses.replace(
        load("pull_request.opened"), sender_login="ci[bot]", sender_type=None
    )
    decision = decide(event, config(), app_slug=SLUG, permission=None)
    assert isinstance(decision, Skip) and decision.reason is SkipReason.BOT_SENDER


def test_write_permissions_are_githubs_write_levels() -> None:
    assert {"admin", "maintain", "write"} == WRITE_PERMISSIONS


@pytest.mark.parametrize(
    ("fixture", "cfg", "expected"),
    [
        pytest.param("issue_comment.created.review", "", True, id="command"),
        pytest.param("issue_comment.created.unknown", "", True, id="unknown-command"),
        pytest.param("pull_request_review.submitted", "", True, id="review-body-command"),
        pytest.param("issue_comment.created.plain", "", False, id="not-addressed"),
        pytest.param("issue_comment.created.bot-sender", "", False, id="bot"),
        pytest.param("issue_comment.created.fix", "commands: {enabled: false}", False, id="commands-off"),
        pytest.param("issue_comment.created.fix", "enabled: false", False, id="repo-off"),
        pytest.param("issue_comment.edited", "", False, id="edited"),
        pytest.param("pull_request.opened", "", False, id="auto-review"),
        pytest.param("issues.opened", "", False, id="triage"),
        pytest.param("ping", "", False, id="ping"),
    ],
)  # fmt: skip
def test_needs_permission(fixture: str, cfg: str, expected: bool) -> None:
    assert needs_permission(load(fixture), config(cfg), SLUG) is expected


def test_needs_permission_matches_decide() -> None:
    """Where no permission is needed, decide() gives the same answer whatever it is."""
    for path in sorted(WEBHOOKS.glob("*.json")):
        event = load(path.stem)
        answers = {
            permission: decide(event, config(), app_slug=SLUG, permission=permission)
            for permission in ("admin", "read", None)
        }
        varies = len({repr(answer) for answer in answers.values()}) > 1
        assert varies is needs_permission(event, config(), SLUG), path.name


@pytest.mark.parametrize(
    ("name", "action", "expected"),
    [
        pytest.param("pull_request", "opened", on_pull_request, id="pr-opened"),
        pytest.param("pull_request", "synchronize", on_pull_request, id="pr-sync"),
        pytest.param("issues", "opened", on_issue_opened, id="issue-opened"),
        pytest.param("issue_comment", "created", on_comment, id="comment"),
        pytest.param("pull_request_review", "submitted", on_comment, id="review"),
        pytest.param("pull_request_review_comment", "created", on_comment, id="review-comment"),
        pytest.param("issue_comment", "deleted", on_comment_changed, id="comment-deleted"),
        pytest.param("pull_request_review", "edited", on_comment_changed, id="review-edited"),
    ],
)
def test_route(name: str, action: str, expected: object) -> None:
    assert route(Event(name=name, delivery_id="d", action=action)) is expected


@pytest.mark.parametrize(
    ("name", "action", "reason", "detail"),
    [
        pytest.param("ping", None, SkipReason.UNSUPPORTED_EVENT, "ping", id="ping"),
        pytest.param("workflow_run", "completed", SkipReason.UNSUPPORTED_EVENT, "workflow_run", id="workflow-run"),
        pytest.param("issues", "closed", SkipReason.UNSUPPORTED_ACTION, "issues.closed", id="issue-closed"),
        pytest.param("pull_request", None, SkipReason.UNSUPPORTED_ACTION, "pull_request.None", id="no-action"),
    ],
)  # fmt: skip
def test_route_skips(name: str, action: str | None, reason: SkipReason, detail: str) -> None:
    assert route(Event(name=name, delivery_id="d", action=action)) == Skip(reason, detail)


def test_routes_are_plain_data() -> None:
    assert all(isinstance(key, tuple) and len(key) == 2 for key in ROUTES)
    assert {name for name, _ in ROUTES} == {
        "pull_request",
        "issues",
        "issue_comment",
        "pull_request_review",
        "pull_request_review_comment",
        "check_run",
        "check_suite",
    }
