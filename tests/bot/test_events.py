"""Lenient payload parsing: every real payload parses, drifted fields become None."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from bot.events import parse_event
from policies.config import RepoConfig
from policies.event import Event, Skip, Trigger
from policies.github_events import GITHUB_EVENTS
from policies.triggers import decide
from tests.conftest import FIXTURES, PAYLOADS

WEBHOOKS = FIXTURES / "webhooks"
HEAD = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
TARGET_EVENTS = {
    "issues",
    "issue_comment",
    "pull_request",
    "pull_request_review",
    "pull_request_review_comment",
}


def fixture(name: str) -> Event:
    payload = json.loads((WEBHOOKS / f"{name}.json").read_text())
    return parse_event(name.split(".")[0], "guid-1", payload)


def test_every_shared_payload_parses_and_gets_a_decision(shared_payloads_dir: Path) -> None:
    paths = sorted(shared_payloads_dir.glob("*/*.json"))
    assert len(paths) == 273
    events = set()
    for path in paths:
        name = path.parent.name
        payload = json.loads(path.read_text())
        event = parse_event(name, path.name, payload)
        events.add(name)
        assert (event.name, event.delivery_id) == (name, path.name)
        assert event.action == payload.get("action")
        repository = payload.get("repository")
        if isinstance(repository, dict):
            assert event.repo_full_name == repository["full_name"], path
            assert event.repo_id == repository["id"], path
        sender = payload.get("sender")
        if isinstance(sender, dict):
            assert (event.sender_login, event.sender_type) == (sender["login"], sender["type"])
        if name in TARGET_EVENTS:
            assert event.target_kind is not None and event.number is not None, path
        elif name in ("check_run", "check_suite"):  # the pull request listed at its head
            assert event.target_kind in (None, "pull_request"), path
            assert event.check_app_id is not None and event.head_sha is not None, path
        else:
            assert event.target_kind is None, path
        decision = decide(event, RepoConfig(), app_slug="repo-bot", permission="write")
        assert isinstance(decision, Trigger | Skip)
    assert len(events) == 60


def test_every_event_of_the_payload_corpus_is_one_the_intake_takes(
    shared_payloads_dir: Path,
) -> None:
    corpus = {path.name for path in shared_payloads_dir.iterdir() if path.is_dir()}
    assert len(corpus) == 60
    assert corpus - GITHUB_EVENTS == set()


def test_the_project_s_own_payloads_are_of_events_the_intake_takes() -> None:
    own = {path.name for path in PAYLOADS.iterdir() if path.is_dir()}
    assert own and own <= GITHUB_EVENTS
    assert {path.name.split(".")[0] for path in WEBHOOKS.glob("*.json")} <= GITHUB_EVENTS


def test_comment_ids_times_and_target_ids_are_read_for_replay_keys() -> None:
    payload = json.loads((PAYLOADS / "issue_comment" / "created.payload.json").read_text())
    event = parse_event("issue_comment", "g", payload)
    assert (event.comment_id, event.comment_updated_at) == (
        payload["comment"]["id"],
        payload["comment"]["updated_at"],
    )
    assert event.target_id == payload["issue"]["id"]
    review = {"action": "submitted", "review": {"id": 5, "submitted_at": "2024-01-02T03:04:05Z"}}
    assert parse_event("pull_request_review", "g", review).comment_updated_at == (
        "2024-01-02T03:04:05Z"
    )


FIELDS = [
    pytest.param(
        "pull_request.opened",
        {
            "action": "opened", "target_kind": "pull_request", "number": 2, "is_draft": False,
            "head_sha": HEAD, "head_ref": "changes", "head_repo_full_name": "Codertocat/Hello-World",
            "base_sha": "f95f852bd8fca8fcc58a9a2d6c842781e32a215e", "base_ref": "master",
            "title": "Update the README with new information.", "author_login": "Codertocat",
            "labels": ("bug",), "html_url": "https://github.com/Codertocat/Hello-World/pull/2",
            "comment_kind": None, "comment_id": None, "installation_id": 1,
            "default_branch": "master", "repo_id": 186853002,
        },
        id="pull-request",
    ),
    pytest.param("pull_request.opened.draft", {"is_draft": True}, id="draft"),
    pytest.param(
        "pull_request.opened.bot-sender",
        {"sender_login": "dependabot[bot]", "sender_type": "Bot", "author_login": "dependabot[bot]"},
        id="bot-sender",
    ),
    pytest.param(
        "issues.opened",
        {"target_kind": "issue", "number": 1, "title": "Spelling error in the README file",
         "head_sha": None, "is_draft": False, "comment_body": None},
        id="issue",
    ),
    pytest.param(
        "issue_comment.created.plain",
        {"target_kind": "issue", "number": 1, "comment_kind": "issue_comment",
         "comment_id": 492700400, "comment_body": "You are totally right! I'll get this fixed right away.",
         "comment_author_association": "OWNER"},
        id="comment-on-issue",
    ),
    pytest.param(
        "issue_comment.created.review",
        {"target_kind": "pull_request", "number": 2, "comment_body": "@repo-bot review",
         "head_sha": None, "html_url": "https://github.com/Codertocat/Hello-World/pull/2"},
        id="comment-on-pull-request",
    ),
    pytest.param(
        "pull_request_review_comment.created",
        {"target_kind": "pull_request", "comment_kind": "review_comment", "comment_id": 284312630,
         "comment_path": "README.md", "comment_line": 265, "comment_diff_hunk": "@@ -1 +1 @@\n-# Hello-World",
         "head_sha": HEAD},
        id="review-comment",
    ),
    pytest.param(
        "pull_request_review.submitted",
        {"target_kind": "pull_request", "comment_kind": "review", "comment_id": 237895671,
         "comment_body": "Two small things.\n\n@repo-bot fix the typos I marked", "head_sha": HEAD},
        id="review",
    ),
    pytest.param("ping", {"target_kind": None, "number": None, "action": None}, id="ping"),
    pytest.param(
        "issues.opened.no-repository",
        {"repo_full_name": None, "repo_id": None, "default_branch": None, "number": 1},
        id="no-repository",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("name", "expected"), FIELDS)
def test_fixture_fields(name: str, expected: dict[str, object]) -> None:
    event = fixture(name)
    assert {key: getattr(event, key) for key in expected} == expected


DRIFT = [
    pytest.param({"repository": "Codertocat/Hello-World"}, {"repo_full_name": None}, id="repository-is-text"),
    pytest.param({"repository": {"full_name": 7, "id": "x"}}, {"repo_full_name": None, "repo_id": None}, id="repository-fields-wrong"),
    pytest.param({"sender": None}, {"sender_login": None, "sender_type": None}, id="sender-null"),
    pytest.param({"sender": {"login": ["a"], "type": "User"}}, {"sender_login": None, "sender_type": "User"}, id="login-is-list"),
    pytest.param({"installation": {"id": None}}, {"installation_id": None}, id="installation-id-null"),
    pytest.param({"action": {"x": 1}}, {"action": None}, id="action-is-object"),
    pytest.param({"issue": {"number": "seven"}}, {"number": None}, id="number-not-a-number"),
    pytest.param({"issue": {"number": 3, "labels": [{"name": "a"}, "b", None, {"name": 5}, {}]}}, {"labels": ("a",)}, id="labels-mixed"),
    pytest.param({"issue": {"number": 3, "labels": "bug"}}, {"labels": ()}, id="labels-is-text"),
    pytest.param({"issue": {"number": 3, "pull_request": None}}, {"target_kind": "issue"}, id="pull-request-null"),
    pytest.param({"issue": {"number": 3, "pull_request": {}}}, {"target_kind": "pull_request"}, id="pull-request-empty"),
    pytest.param({"issue": {"number": 3}, "comment": {"id": 1, "body": 12}}, {"comment_id": 1, "comment_body": None}, id="body-not-text"),
    pytest.param({"issue": {"number": 3}, "comment": "hello"}, {"comment_kind": None, "comment_body": None}, id="comment-is-text"),
    pytest.param({"issue": [1, 2]}, {"number": None, "title": None}, id="issue-is-list"),
    pytest.param({"issue": {"number": 3, "extra": {"deep": [1, {"x": None}]}}, "new_field": True}, {"number": 3}, id="unknown-fields"),
]  # fmt: skip


@pytest.mark.parametrize(("payload", "expected"), DRIFT)
def test_drifted_payload(payload: dict[str, object], expected: dict[str, object]) -> None:
    event = parse_event("issue_comment", "guid-2", payload)
    assert {key: getattr(event, key) for key in expected} == expected


def test_pull_request_fields_drift() -> None:
    payload = {
        "number": 9,
        "pull_request": {"head": "abc", "base": {"sha": 1, "ref": "main"}, "draft": "maybe"},
    }
    event = parse_event("pull_request", "guid-3", payload)
    assert (event.number, event.head_sha, event.base_sha, event.base_ref) == (9, None, None, "main")
    assert event.is_draft is False


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param({}, id="empty"),
        pytest.param([], id="list"),
        pytest.param("text", id="text"),
        pytest.param(None, id="null"),
    ],
)
def test_payload_without_fields(payload: object) -> None:
    event = parse_event("pull_request", "guid-4", payload)  # type: ignore[arg-type]
    assert event == Event(name="pull_request", delivery_id="guid-4", target_kind="pull_request")


def test_unsupported_event_names_no_target() -> None:
    event = parse_event("push", "guid-5", json.loads((WEBHOOKS / "push.json").read_text()))
    assert (event.target_kind, event.number, event.comment_kind) == (None, None, None)
    assert event.repo_full_name == "Codertocat/Hello-World"


ODD_VALUES: list[object] = [None, 1, "s", [], {}, [1, "a"], {"x": 1}, True, 1.5, -1, 2**70]


def _mutate(value: object, rnd: random.Random) -> object:
    if isinstance(value, dict):
        return {
            key: rnd.choice(ODD_VALUES) if rnd.random() < 0.15 else _mutate(item, rnd)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_mutate(item, rnd) for item in value]
    return value


def test_randomly_drifted_fixtures_still_parse() -> None:
    """Seeded: replace random fields of every fixture with values of other types."""
    rnd = random.Random(3)
    paths = sorted(WEBHOOKS.glob("*.json"))
    for _ in range(20):
        for path in paths:
            payload = _mutate(json.loads(path.read_text()), rnd)
            assert isinstance(payload, dict)
            event = parse_event(path.stem.split(".")[0], "guid-6", payload)
            assert event.name == path.stem.split(".")[0]
