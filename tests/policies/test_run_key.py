"""`run_key`: what a trigger answers, named the same under every GUID its body comes with."""

from __future__ import annotations

from dataclasses import replace

from policies.config import RepoConfig
from policies.event import Event, Trigger
from policies.triggers import decide, run_key

SLUG = "repo-agent"


def command(delivery_id: str = "g-1", **fields: object) -> Event:
    base = Event(
        name="issue_comment",
        delivery_id=delivery_id,
        action="created",
        repo_full_name="octo/hello",
        repo_id=1296269,
        sender_login="maint",
        sender_type="User",
        target_kind="issue",
        number=7,
        target_id=700,
        comment_id=4242,
        comment_updated_at="2024-05-01T10:00:00Z",
        comment_body=f"@{SLUG} ask where is the config read?",
        comment_kind="issue_comment",
    )
    return replace(base, **fields)  # type: ignore[arg-type]


def pushed(delivery_id: str = "g-1", **fields: object) -> Event:
    base = Event(
        name="pull_request",
        delivery_id=delivery_id,
        action="synchronize",
        repo_full_name="octo/hello",
        repo_id=1296269,
        sender_login="alice",
        sender_type="User",
        target_kind="pull_request",
        number=3,
        target_id=300,
        head_sha="a" * 40,
    )
    return replace(base, **fields)  # type: ignore[arg-type]


def key(event: Event, digest: str = "d1") -> str:
    decision = decide(event, RepoConfig(), app_slug=SLUG, permission="write")
    assert isinstance(decision, Trigger), decision
    return run_key(event, decision, digest)


def test_a_command_is_its_comment_as_last_written_whatever_the_guid() -> None:
    first = key(command("g-1"))
    assert key(command("g-2"), digest="other") == first
    assert first.endswith(":ask") and "4242@2024-05-01T10:00:00Z" in first
    assert key(command(comment_updated_at="2024-05-01T10:05:00Z")) != first
    assert key(command(comment_id=4243)) != first
    assert key(command(comment_kind="review_comment", target_kind="pull_request")) != first


def test_a_repository_renamed_since_is_the_same_repository() -> None:
    assert key(command(repo_full_name="octo/renamed")) == key(command())


def test_an_automatic_trigger_is_its_event_action_target_and_head() -> None:
    first = key(pushed("g-1"))
    assert key(pushed("g-2")) == first
    assert key(pushed(head_sha="b" * 40)) != first
    assert key(pushed(action="opened")) != first
    assert key(pushed(number=4)) != first
    opened = Event(
        name="issues",
        delivery_id="g-1",
        action="opened",
        repo_full_name="octo/hello",
        repo_id=1,
        sender_login="alice",
        target_kind="issue",
        number=9,
        target_id=900,
    )
    assert key(opened).endswith(":id900:triage")
    assert key(replace(opened, delivery_id="g-2")) == key(opened)


def test_without_the_payload_s_own_ids_the_body_stands_in() -> None:
    assert key(command(comment_updated_at=None), "d1") == "body:d1:ask"
    assert key(command(comment_updated_at=None), "d2") == "body:d2:ask"
    assert key(pushed(head_sha=None, target_id=None), "d3") == "body:d3:review"
