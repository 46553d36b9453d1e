"""An installation's lifecycle: which deliveries take the app's access away or give it back,
the state that leaves the installation in, and which pending work that change stops.

GitHub says the app lost access with `installation.deleted` (uninstalled),
`installation.suspend` (suspended by the account's owner or by GitHub) and
`installation_repositories.removed` (repositories taken out of a "selected" installation);
it says access came back with `installation.unsuspend` and `installation_repositories.added`.
Only these five are routed here; every other `installation*` delivery decides as before
(an unsupported event).

A suspended or deleted installation's deliveries are skipped (`inactive_skip`) instead of run:
nothing could be read or posted with its tokens. Deletion is final: installation ids are never
reused, so no later delivery (an old `unsuspend` redelivered, say) brings one back.

Every change is scoped to the installation that sent it. Which queued or running work a
change stops is decided from each item's own installation id (`affected`): a payload that
names repositories another installation holds stops nothing of that installation's.
Lifecycle deliveries themselves are never stopped, so an `unsuspend` queued behind its
`suspend` still runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from policies.event import Event, Skip, SkipReason

__all__ = [
    "LIFECYCLE_EVENTS",
    "LIFECYCLE_ROUTES",
    "InstallationState",
    "LifecycleChange",
    "LifecycleKind",
    "Target",
    "affected",
    "inactive_skip",
    "lifecycle_change",
    "next_state",
]

LIFECYCLE_EVENTS = frozenset({"installation", "installation_repositories"})
"""Events about the installation itself; no lifecycle change ever stops one of them."""


class InstallationState(StrEnum):
    """What the store remembers of an installation (none remembered: active)."""

    ACTIVE = "active"
    SUSPENDED = "suspended"
    DELETED = "deleted"


class LifecycleKind(StrEnum):
    DELETED = "installation_deleted"
    SUSPENDED = "installation_suspended"
    UNSUSPENDED = "installation_unsuspended"
    REPOSITORIES_REMOVED = "repositories_removed"
    REPOSITORIES_ADDED = "repositories_added"


@dataclass(frozen=True, slots=True)
class LifecycleChange:
    """One change of the app's access to an installation's repositories.

    `revoke` is True when access was lost: its tokens are dropped and its pending work stopped;
    False when it came back. `repos` holds lower-case full names, or is None for every
    repository of the installation. `state` is where the installation moves (None: the
    installation's state does not change, only some repositories').
    """

    kind: LifecycleKind
    installation_id: int
    revoke: bool
    repos: frozenset[str] | None = None
    state: InstallationState | None = None

    @property
    def message(self) -> str:
        """The reason recorded on the delivery and on everything the change stops."""
        where = f"installation {self.installation_id}"
        if self.repos is not None:
            names = ", ".join(sorted(self.repos)) or "no repositories"
            return f"{self.kind.value}: {names} of {where}"
        verb = {
            LifecycleKind.DELETED: "was deleted",
            LifecycleKind.SUSPENDED: "was suspended",
            LifecycleKind.UNSUSPENDED: "was unsuspended",
        }.get(self.kind, "changed")
        return f"{self.kind.value}: {where} {verb}"


def _names(names: Iterable[str]) -> frozenset[str]:
    return frozenset(name.strip().lower() for name in names if name.strip())


def _deleted(event: Event, installation_id: int) -> LifecycleChange:
    return LifecycleChange(
        LifecycleKind.DELETED, installation_id, True, state=InstallationState.DELETED
    )


def _suspended(event: Event, installation_id: int) -> LifecycleChange:
    return LifecycleChange(
        LifecycleKind.SUSPENDED, installation_id, True, state=InstallationState.SUSPENDED
    )


def _unsuspended(event: Event, installation_id: int) -> LifecycleChange:
    return LifecycleChange(
        LifecycleKind.UNSUSPENDED, installation_id, False, state=InstallationState.ACTIVE
    )


def _removed(event: Event, installation_id: int) -> LifecycleChange:
    repos = _names(event.repositories_removed)
    return LifecycleChange(LifecycleKind.REPOSITORIES_REMOVED, installation_id, True, repos)


def _added(event: Event, installation_id: int) -> LifecycleChange:
    repos = _names(event.repositories_added)
    return LifecycleChange(LifecycleKind.REPOSITORIES_ADDED, installation_id, False, repos)


LIFECYCLE_ROUTES: Mapping[tuple[str, str], Callable[[Event, int], LifecycleChange]] = {
    ("installation", "deleted"): _deleted,
    ("installation", "suspend"): _suspended,
    ("installation", "unsuspend"): _unsuspended,
    ("installation_repositories", "removed"): _removed,
    ("installation_repositories", "added"): _added,
}
"""(event, action) -> the change it makes. Every other pair is no lifecycle change."""


def lifecycle_change(event: Event) -> LifecycleChange | None:
    """The change this delivery makes to the app's access, or None when it makes none (any
    other event, or a lifecycle event that names no installation: nothing to change)."""
    build = LIFECYCLE_ROUTES.get((event.name, event.action or ""))
    if build is None or event.installation_id is None:
        return None
    return build(event, event.installation_id)


def next_state(
    current: InstallationState | None, change: LifecycleChange
) -> InstallationState | None:
    """The state to record after `change`, or None when the recorded one stays.

    A deleted installation stays deleted whatever comes after it.
    """
    if current is InstallationState.DELETED or change.state is None:
        return None
    return None if change.state == current else change.state


def inactive_skip(installation_id: int | None, state: InstallationState | None) -> Skip | None:
    """Why a delivery of an installation in `state` runs nothing, or None when it may run."""
    if installation_id is None:
        return None
    if state is InstallationState.SUSPENDED:
        detail = (
            f"installation {installation_id} is suspended; nothing runs until it is unsuspended"
        )
        return Skip(SkipReason.INSTALLATION_INACTIVE, detail)
    if state is InstallationState.DELETED:
        detail = f"installation {installation_id} was deleted; the app has no access to it"
        return Skip(SkipReason.INSTALLATION_INACTIVE, detail)
    return None


@dataclass(frozen=True, slots=True)
class Target:
    """A piece of pending work as a lifecycle change sees it: `key` names it for the caller
    (a delivery id), the rest is read from its own delivery."""

    key: str
    event: str
    installation_id: int | None
    repo: str | None


def affected(change: LifecycleChange, targets: Iterable[Target]) -> list[str]:
    """The keys of the targets `change` stops, in the order given: the work of the change's
    own installation (only on its `repos` when it names some), never a lifecycle delivery,
    and nothing at all when access came back."""
    if not change.revoke:
        return []
    keys: list[str] = []
    for target in targets:
        if target.event in LIFECYCLE_EVENTS or target.installation_id != change.installation_id:
            continue
        if change.repos is not None and (target.repo or "").lower() not in change.repos:
            continue
        keys.append(target.key)
    return keys
