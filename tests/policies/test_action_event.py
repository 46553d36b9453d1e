"""Which job events `bot action` delivers, and what it declines before asking GitHub anything."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from policies.action_event import (
    FORK_REASON,
    TOKEN_INSTALLATION,
    ActionDelivery,
    ActionSkip,
    plan_delivery,
)

PAYLOADS = Path(__file__).resolve().parents[2] / "fixtures" / "github-payloads"


def recorded(name: str) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads((PAYLOADS / name).read_text())
    return payload


def without_installation(payload: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in payload.items() if k != "installation"}


def test_a_pull_request_job_is_a_pull_request_delivery_with_the_token_as_installation() -> None:
    payload = without_installation(recorded("pull_request/opened.payload.json"))
    plan = plan_delivery("pull_request", payload, "Codertocat/Hello-World")
    assert isinstance(plan, ActionDelivery)
    assert plan.event == "pull_request"
    assert plan.payload["installation"] == {"id": TOKEN_INSTALLATION}
    assert "installation" not in payload  # the job's file is not changed


def test_an_app_tokens_installation_is_kept() -> None:
    payload = recorded("pull_request/opened.payload.json")
    plan = plan_delivery("pull_request", payload, "codertocat/hello-world")
    assert isinstance(plan, ActionDelivery)
    assert plan.payload["installation"] == payload["installation"]


def test_pull_request_target_is_delivered_as_pull_request_even_from_a_fork() -> None:
    payload = recorded("pull_request/opened.payload.json")
    payload["pull_request"]["head"]["repo"]["full_name"] = "mallory/Hello-World"
    plan = plan_delivery("pull_request_target", payload, "Codertocat/Hello-World")
    assert isinstance(plan, ActionDelivery) and plan.event == "pull_request"


@pytest.mark.parametrize(
    "event", ["pull_request", "pull_request_review", "pull_request_review_comment"]
)
def test_a_forks_pull_request_on_a_read_only_event_is_declined(event: str) -> None:
    payload = recorded("pull_request/opened.payload.json")
    payload["pull_request"]["head"]["repo"]["full_name"] = "mallory/Hello-World"
    assert plan_delivery(event, payload, "Codertocat/Hello-World") == ActionSkip(FORK_REASON)


def test_a_deleted_forks_pull_request_is_declined_too() -> None:
    payload = recorded("pull_request/opened.payload.json")
    payload["pull_request"]["head"]["repo"] = None
    assert plan_delivery("pull_request", payload, "Codertocat/Hello-World") == ActionSkip(
        FORK_REASON
    )


def test_a_comment_on_a_forks_pull_request_runs_in_the_base_repository() -> None:
    payload = recorded("issue_comment/created.payload.json")
    plan = plan_delivery("issue_comment", payload, "Codertocat/Hello-World")
    assert isinstance(plan, ActionDelivery) and plan.event == "issue_comment"


def test_an_event_the_app_does_not_act_on_is_a_skip_not_a_failure() -> None:
    plan = plan_delivery("push", {"repository": {"full_name": "o/r"}}, "o/r")
    assert isinstance(plan, ActionSkip) and not plan.failed
    assert "`push`" in plan.reason and "pull_request_target" in plan.reason


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        ([1, 2], "JSON object"),
        ({"action": "opened"}, "names no repository"),
        ({"repository": {"full_name": "someone/else"}}, "runs in o/r"),
    ],
)
def test_an_event_that_cannot_be_this_jobs_fails(payload: object, words: str) -> None:
    plan = plan_delivery("issues", payload, "o/r")
    assert isinstance(plan, ActionSkip) and plan.failed and words in plan.reason
