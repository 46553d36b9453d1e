"""Re-run on the app's own check: routes, whose check it is, which pull request, the key.

From payloads in fixtures/webhooks (edited from octokit's `check_run` and `check_suite`
examples: `check_run.rerequested` lists pull request #2 at the check's head, `.fork` lists
none, as GitHub does for a fork's head, `.other-app` is another App's check) and the real
examples in fixtures/github-payloads. The App's id in them is 2.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from bot.events import parse_event
from policies.config import RepoConfig, parse_repo_config
from policies.event import Event, Skip, SkipReason, Trigger
from policies.rerun import check_workflow, foreign_check, needs_pull_lookup, with_pull
from policies.triggers import (
    decide,
    needs_permission,
    on_check_rerequested,
    route,
    run_key,
)
from tests.conftest import PAYLOADS

WEBHOOKS = Path(__file__).resolve().parents[2] / "fixtures" / "webhooks"
SLUG = "repo-bot"
APP_ID = 2
HEAD = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"


def payload(fixture: str) -> dict[str, object]:
    data = json.loads((WEBHOOKS / f"{fixture}.json").read_text())
    assert isinstance(data, dict)
    return data


def load(fixture: str, guid: str | None = None) -> Event:
    return parse_event(fixture.split(".")[0], guid or f"delivery-{fixture}", payload(fixture))


def config(text: str = "") -> RepoConfig:
    return parse_repo_config(text)


def prepared(event: Event, looked_up: int | None = None) -> Event | Skip:
    """What the worker hands decide(): whose check, then the pull request looked up."""
    refused = foreign_check(event, APP_ID)
    if refused is not None:
        return refused
    return with_pull(event, looked_up) if needs_pull_lookup(event) else event


def decided(event: Event, permission: str | None = "write", cfg: str = "") -> object:
    ready = prepared(event, looked_up=2)
    if isinstance(ready, Skip):
        return ready
    return decide(ready, config(cfg), app_slug=SLUG, permission=permission)


# --- routes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "action", "expected"),
    [
        pytest.param("check_run", "rerequested", on_check_rerequested, id="check-run"),
        pytest.param("check_suite", "rerequested", on_check_rerequested, id="check-suite"),
        pytest.param("check_run", "created", Skip(SkipReason.UNSUPPORTED_ACTION, "check_run.created"), id="created"),
        pytest.param("check_run", "completed", Skip(SkipReason.UNSUPPORTED_ACTION, "check_run.completed"), id="completed"),
        pytest.param("check_run", "requested_action", Skip(SkipReason.UNSUPPORTED_ACTION, "check_run.requested_action"), id="requested-action"),
        pytest.param("check_suite", "requested", Skip(SkipReason.UNSUPPORTED_ACTION, "check_suite.requested"), id="suite-requested"),
    ],
)  # fmt: skip
def test_route(name: str, action: str, expected: object) -> None:
    found = route(Event(name=name, delivery_id="d", action=action))
    assert found == expected if isinstance(expected, Skip) else found is expected


# --- what the payload says ------------------------------------------------------------------


def test_a_check_run_names_its_app_head_pull_and_suite() -> None:
    event = load("check_run.rerequested")
    assert (event.check_app_id, event.check_id) == (2, 128620228)
    assert event.check_name == "repo-bot: review"
    assert (event.head_sha, event.target_kind, event.number) == (HEAD, "pull_request", 2)
    assert event.check_suite_updated_at == "2019-05-15T15:21:14Z"
    assert event.repo_full_name == "Codertocat/Hello-World" and event.sender_login == "Codertocat"


def test_a_check_suite_names_its_app_head_and_pull() -> None:
    event = load("check_suite.rerequested")
    assert (event.check_app_id, event.check_id, event.check_name) == (2, 118578147, None)
    assert (event.head_sha, event.target_kind, event.number) == (HEAD, "pull_request", 2)
    assert event.check_suite_updated_at == "2019-05-15T15:21:14Z"


def test_a_pull_request_that_moved_on_is_not_the_checks() -> None:
    data = payload("check_run.rerequested")
    check = data["check_run"]
    assert isinstance(check, dict)
    check["pull_requests"][0]["head"]["sha"] = "f" * 40
    event = parse_event("check_run", "d", data)
    assert (event.target_kind, event.number) == (None, None)
    assert needs_pull_lookup(event)


def test_a_pull_request_of_another_repository_is_not_the_checks() -> None:
    data = payload("check_run.rerequested")
    check = data["check_run"]
    assert isinstance(check, dict)
    check["pull_requests"][0]["base"]["repo"]["id"] = 1
    assert parse_event("check_run", "d", data).number is None


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("repo-bot: review", "review", id="review"),
        pytest.param("renamed-app: review", "review", id="renamed-app"),
        pytest.param("repo-bot: ask", "ask", id="ask"),
        pytest.param("Octocoders-linter", None, id="no-workflow"),
        pytest.param(None, "review", id="suite"),
    ],
)
def test_check_workflow(name: str | None, expected: str | None) -> None:
    assert check_workflow(name) == expected


# --- whose check ----------------------------------------------------------------------------


def test_another_apps_check_is_not_ours() -> None:
    skip = foreign_check(load("check_run.rerequested.other-app"), APP_ID)
    assert skip == Skip(SkipReason.NOT_OUR_CHECK, "check_run 128620228 belongs to App 29310")


@pytest.mark.parametrize(
    ("event", "app_id", "detail"),
    [
        pytest.param(dataclasses.replace(load("check_run.rerequested"), check_app_id=None), APP_ID, "check_run 128620228 names no App", id="no-app-in-payload"),
        pytest.param(load("check_run.rerequested"), None, "this App's id is not configured (BOT_APP_ID)", id="own-id-unknown"),
        pytest.param(load("check_suite.rerequested"), 29310, "check_suite 118578147 belongs to App 2", id="suite-other"),
    ],
)  # fmt: skip
def test_whose_check_fails_closed(event: Event, app_id: int | None, detail: str) -> None:
    assert foreign_check(event, app_id) == Skip(SkipReason.NOT_OUR_CHECK, detail)


def test_our_check_and_every_other_event_pass() -> None:
    assert foreign_check(load("check_run.rerequested"), APP_ID) is None
    assert foreign_check(load("check_suite.rerequested"), APP_ID) is None
    assert foreign_check(Event(name="pull_request", delivery_id="d", action="opened"), None) is None
    completed = dataclasses.replace(load("check_run.rerequested.other-app"), action="completed")
    assert foreign_check(completed, APP_ID) is None  # not a re-run: routed as unsupported


# --- which pull request ---------------------------------------------------------------------


def test_a_fork_lists_no_pull_request_so_it_is_looked_up() -> None:
    event = load("check_run.rerequested.fork")
    assert (event.target_kind, event.number) == (None, None)
    assert needs_pull_lookup(event)
    assert not needs_pull_lookup(load("check_run.rerequested"))
    assert not needs_pull_lookup(dataclasses.replace(event, head_sha=None))
    assert not needs_pull_lookup(dataclasses.replace(event, action="created"))
    found = with_pull(event, 7)
    assert isinstance(found, Event)
    assert (found.target_kind, found.number, found.head_sha) == ("pull_request", 7, HEAD)


def test_no_open_pull_request_at_the_head() -> None:
    skip = with_pull(load("check_run.rerequested.fork"), None)
    assert skip == Skip(SkipReason.NO_TARGET, f"no open pull request has head {HEAD[:12]}")


# --- the decision ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fixture", ["check_run.rerequested", "check_run.rerequested.fork", "check_suite.rerequested"]
)
@pytest.mark.parametrize("permission", ["write", "maintain", "admin"])
def test_rerun_of_our_check_reviews_that_head_as_a_writers_review(
    fixture: str, permission: str
) -> None:
    decision = decided(load(fixture), permission)
    assert isinstance(decision, Trigger), decision
    assert (decision.workflow, decision.command, decision.args) == ("review", "review", "")
    assert (decision.target_kind, decision.number, decision.head_sha) == ("pull_request", 2, HEAD)
    assert (decision.actor, decision.comment_id) == ("Codertocat", None)
    assert decision.installation_id == 1


def test_the_sender_needs_write_permission() -> None:
    event = prepared(load("check_run.rerequested"))
    assert isinstance(event, Event)
    assert needs_permission(event, config(), SLUG)
    for permission in ("read", "triage", "none"):
        skip = decided(load("check_run.rerequested"), permission)
        assert isinstance(skip, Skip) and skip.reason is SkipReason.NO_PERMISSION, skip
    unknown = decided(load("check_run.rerequested"), None)
    assert isinstance(unknown, Skip) and unknown.reason is SkipReason.NO_PERMISSION
    assert "could not read Codertocat's permission" in unknown.detail


@pytest.mark.parametrize(
    ("fixture", "changes", "cfg", "reason", "detail"),
    [
        pytest.param("check_run.rerequested.other-app", {}, "", SkipReason.NOT_OUR_CHECK, "belongs to App 29310", id="other-app"),
        pytest.param("check_run.rerequested", {"check_name": "repo-bot: ask"}, "", SkipReason.UNSUPPORTED_ACTION, "the ask check", id="ask-check"),
        pytest.param("check_run.rerequested", {"check_name": "renamed"}, "", SkipReason.UNSUPPORTED_ACTION, "the renamed check", id="unnamed-check"),
        pytest.param("check_run.rerequested", {}, "review: {enabled: false}", SkipReason.WORKFLOW_DISABLED, "review", id="review-off"),
        pytest.param("check_run.rerequested", {}, "enabled: false", SkipReason.REPO_DISABLED, "Codertocat/Hello-World", id="repo-off"),
        pytest.param("check_run.rerequested", {"sender_login": "repo-bot[bot]", "sender_type": "Bot"}, "", SkipReason.SELF_EVENT, "repo-bot[bot]", id="self"),
        pytest.param("check_run.rerequested", {"sender_login": "ci[bot]", "sender_type": "Bot"}, "", SkipReason.BOT_SENDER, "ci[bot]", id="bot"),
        pytest.param("check_run.rerequested", {"sender_login": "Codertocat"}, "ignore_authors: [Codertocat]", SkipReason.IGNORED_AUTHOR, "Codertocat", id="ignored"),
    ],
)  # fmt: skip
def test_skips(
    fixture: str, changes: dict[str, object], cfg: str, reason: SkipReason, detail: str
) -> None:
    event = dataclasses.replace(load(fixture), **changes)  # type: ignore[arg-type]
    skip = decided(event, "admin", cfg)
    assert isinstance(skip, Skip) and skip.reason is reason, skip
    assert detail in skip.detail


def test_review_runs_again_when_automatic_reviews_are_off() -> None:
    """A person pressed the button: like their `review` command, not like a push."""
    decision = decided(load("check_run.rerequested"), "write", "review: {auto: false}")
    assert isinstance(decision, Trigger)


def test_the_real_octokit_examples() -> None:
    """Unchanged octokit payloads: App 2's check run on a branch without a pull request, and
    App 29310's suite re-requested by its own bot."""
    run = json.loads((PAYLOADS / "check_run" / "rerequested.payload.json").read_text())
    event = parse_event("check_run", "d-run", run)
    assert (event.check_app_id, event.check_id, event.check_name) == (2, 4, "randscape")
    assert needs_pull_lookup(event) and foreign_check(event, 2) is None
    suite = json.loads((PAYLOADS / "check_suite" / "rerequested.payload.json").read_text())
    event = parse_event("check_suite", "d-suite", suite)
    assert (event.check_app_id, event.number) == (29310, 2)
    skip = decide(event, config(), app_slug="octocoders-linter", permission="admin")
    assert skip == Skip(SkipReason.SELF_EVENT, "sent by octocoders-linter[bot]")


# --- the key that tells a second click from a replayed body ---------------------------------


def key(event: Event, digest: str = "digest") -> str:
    ready = prepared(event, looked_up=2)
    assert isinstance(ready, Event)
    decision = decide(ready, config(), app_slug=SLUG, permission="write")
    assert isinstance(decision, Trigger), decision
    return run_key(ready, decision, digest)


def test_a_replayed_body_has_the_same_key_under_any_guid() -> None:
    first = key(load("check_run.rerequested", "g-1"))
    assert key(load("check_run.rerequested", "g-2")) == first
    assert first.startswith("check_run.rerequested:186853002/pull_request/2:")
    assert "check_run/128620228@2019-05-15T15:21:14Z" in first and first.endswith(":review")


def test_every_click_has_a_key_of_its_own() -> None:
    """GitHub resets the check's suite at each request (its `updated_at` moves), and the
    review it starts posts a new check run, which the next click is on."""
    first = load("check_run.rerequested")
    again = dataclasses.replace(first, check_suite_updated_at="2019-05-15T15:30:00Z")
    newer = dataclasses.replace(first, check_id=128620999)
    keys = {key(first), key(again), key(newer), key(load("check_suite.rerequested"))}
    assert len(keys) == 4
    # Never the key of the push that started the first review, nor of a `review` command.
    opened = Event(
        name="pull_request",
        delivery_id="g",
        action="synchronize",
        repo_full_name="Codertocat/Hello-World",
        repo_id=186853002,
        sender_login="Codertocat",
        target_kind="pull_request",
        number=2,
        head_sha=HEAD,
    )
    pushed = decide(opened, config(), app_slug=SLUG, permission=None)
    assert isinstance(pushed, Trigger)
    assert run_key(opened, pushed, "digest") not in keys


def test_without_the_suites_time_the_body_is_the_key() -> None:
    event = dataclasses.replace(load("check_run.rerequested"), check_suite_updated_at=None)
    assert key(event, "d1") == "body:d1:review"
    assert key(event, "d2") == "body:d2:review"
