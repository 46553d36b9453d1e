"""The installation lifecycle policy, from the real payloads in fixtures/github-payloads."""

from __future__ import annotations

import dataclasses
import json

import pytest

from bot.events import parse_event
from policies.event import Event, SkipReason
from policies.lifecycle import (
    LIFECYCLE_ROUTES,
    InstallationState,
    LifecycleChange,
    LifecycleKind,
    Target,
    affected,
    inactive_skip,
    lifecycle_change,
    next_state,
)
from tests.conftest import PAYLOADS


def load(event: str, action: str) -> Event:
    payload = json.loads((PAYLOADS / event / f"{action}.payload.json").read_text())
    return parse_event(event, f"g-{event}.{action}", payload)


CHANGES = [
    pytest.param("installation", "deleted", LifecycleChange(LifecycleKind.DELETED, 2, True, None, InstallationState.DELETED), id="deleted"),
    pytest.param("installation", "suspend", LifecycleChange(LifecycleKind.SUSPENDED, 16598467, True, None, InstallationState.SUSPENDED), id="suspend"),
    pytest.param("installation", "unsuspend", LifecycleChange(LifecycleKind.UNSUSPENDED, 16598467, False, None, InstallationState.ACTIVE), id="unsuspend"),
    pytest.param("installation_repositories", "removed", LifecycleChange(LifecycleKind.REPOSITORIES_REMOVED, 2, True, frozenset({"octocat/hello-world"})), id="repositories-removed"),
    pytest.param("installation_repositories", "added", LifecycleChange(LifecycleKind.REPOSITORIES_ADDED, 957387, False, frozenset({"codertocat/space"})), id="repositories-added"),
]  # fmt: skip


@pytest.mark.parametrize(("event", "action", "expected"), CHANGES)
def test_each_lifecycle_payload_makes_its_change(
    event: str, action: str, expected: LifecycleChange
) -> None:
    assert lifecycle_change(load(event, action)) == expected


def test_every_route_has_a_payload_case() -> None:
    assert {(p.values[0], p.values[1]) for p in CHANGES} == set(LIFECYCLE_ROUTES)


@pytest.mark.parametrize(
    "event",
    [
        pytest.param(load("issues", "opened"), id="issues-opened"),
        pytest.param(dataclasses.replace(load("installation", "suspend"), action="created"), id="installation-created"),
        pytest.param(dataclasses.replace(load("installation", "suspend"), installation_id=None), id="no-installation"),
    ],
)  # fmt: skip
def test_other_deliveries_change_nothing(event: Event) -> None:
    assert lifecycle_change(event) is None


def test_messages_name_the_installation_and_repositories() -> None:
    suspended = lifecycle_change(load("installation", "suspend"))
    removed = lifecycle_change(load("installation_repositories", "removed"))
    assert suspended is not None and removed is not None
    assert suspended.message == "installation_suspended: installation 16598467 was suspended"
    assert removed.message == "repositories_removed: octocat/hello-world of installation 2"
    nothing = dataclasses.replace(removed, repos=frozenset())
    assert nothing.message == "repositories_removed: no repositories of installation 2"
    deleted = lifecycle_change(load("installation", "deleted"))
    unsuspended = lifecycle_change(load("installation", "unsuspend"))
    assert deleted is not None and deleted.message.endswith("installation 2 was deleted")
    assert unsuspended is not None and unsuspended.message.endswith("was unsuspended")


def change(kind: str) -> LifecycleChange:
    found = {p.id: p.values[2] for p in CHANGES}[kind]
    assert isinstance(found, LifecycleChange)
    return found


S, A, D = InstallationState.SUSPENDED, InstallationState.ACTIVE, InstallationState.DELETED


@pytest.mark.parametrize(
    ("current", "kind", "expected"),
    [
        pytest.param(None, "suspend", S, id="suspend-unknown"),
        pytest.param(A, "suspend", S, id="suspend-active"),
        pytest.param(S, "suspend", None, id="suspend-again"),
        pytest.param(S, "unsuspend", A, id="unsuspend"),
        pytest.param(None, "unsuspend", A, id="unsuspend-unknown"),
        pytest.param(A, "unsuspend", None, id="unsuspend-active"),
        pytest.param(S, "deleted", D, id="delete-suspended"),
        pytest.param(D, "unsuspend", None, id="deletion-is-final"),
        pytest.param(D, "suspend", None, id="deleted-not-suspended"),
        pytest.param(S, "repositories-removed", None, id="repositories-keep-the-state"),
    ],
)
def test_next_state(
    current: InstallationState | None, kind: str, expected: InstallationState | None
) -> None:
    assert next_state(current, change(kind)) == expected


def test_inactive_installations_skip_with_a_reason() -> None:
    suspended = inactive_skip(7, S)
    deleted = inactive_skip(7, D)
    assert suspended is not None and suspended.reason is SkipReason.INSTALLATION_INACTIVE
    assert suspended.message.startswith("installation_inactive: installation 7 is suspended")
    assert deleted is not None and "installation 7 was deleted" in deleted.detail
    assert inactive_skip(7, A) is None
    assert inactive_skip(7, None) is None
    assert inactive_skip(None, S) is None


TARGETS = [
    Target("own-repo", "issues", 2, "octocat/Hello-World"),
    Target("own-other-repo", "pull_request", 2, "octocat/Other"),
    Target("own-no-repo", "ping", 2, None),
    Target("other-installation", "issues", 3, "octocat/Hello-World"),
    Target("no-installation", "issues", None, "octocat/Hello-World"),
    Target("lifecycle", "installation", 2, None),
    Target("lifecycle-repos", "installation_repositories", 2, None),
]


def test_losing_the_installation_stops_all_of_its_work_but_lifecycle_deliveries() -> None:
    deleted = change("deleted")
    assert affected(deleted, TARGETS) == ["own-repo", "own-other-repo", "own-no-repo"]


def test_losing_repositories_stops_only_their_work() -> None:
    removed = change("repositories-removed")
    assert affected(removed, TARGETS) == ["own-repo"]


def test_a_payload_naming_another_installations_repository_stops_nothing_of_it() -> None:
    # Installation 2 says it lost a repository that installation 3 also works on: only
    # installation 2's work on it stops.
    removed = change("repositories-removed")
    only_other = [t for t in TARGETS if t.key == "other-installation"]
    assert affected(removed, only_other) == []


def test_access_coming_back_stops_nothing() -> None:
    back = dataclasses.replace(change("unsuspend"), installation_id=2)
    assert affected(back, TARGETS) == []
    assert (
        affected(dataclasses.replace(change("repositories-added"), installation_id=2), TARGETS)
        == []
    )
