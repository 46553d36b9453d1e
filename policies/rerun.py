"""Re-run on a check: whose check it is and which pull request it is for, before decide().

GitHub shows a "Re-run" button on a check run, and "Re-run all checks" on a check suite, and
sends the check's App `check_run.rerequested` or `check_suite.rerequested`. For the app's own
checks that runs the check's workflow again for the check's head: the review of the pull
request at that head (`policies.triggers.on_check_rerequested` routes it), as a writer's
`review` command would. Two facts come from outside the payload, so the worker asks these
functions around its own look-ups, before it calls decide():

1. `foreign_check(event, app_id)`: the check must be this App's; `app_id` is the App's id from
   the settings. Another App's check, a payload without its App, or an unknown own id is
   skipped (`not_our_check`): nothing is looked up for it.
2. `needs_pull_lookup(event)`: the payload names the pull request at the check's head when
   GitHub lists it, and lists none for a fork's head; then the worker looks the open pull
   requests up by the head's SHA, and `with_pull(event, number)` gives decide() the event with
   that pull request, or skips (`no_target`) when none is open at that head.
"""

from __future__ import annotations

import dataclasses

from policies.event import Event, Skip, SkipReason

__all__ = [
    "CHECK_EVENTS",
    "check_workflow",
    "foreign_check",
    "is_rerequest",
    "needs_pull_lookup",
    "with_pull",
]

CHECK_EVENTS = frozenset({"check_run", "check_suite"})
"""The events whose `rerequested` action asks for a check to run again."""


def is_rerequest(event: Event) -> bool:
    """Whether someone asked for a check run (or a whole check suite) to run again."""
    return event.name in CHECK_EVENTS and event.action == "rerequested"


def check_workflow(check_name: str | None) -> str | None:
    """The workflow a check of the app's runs: its own are named `<slug>: <workflow>`.

    A suite (no name) holds the app's checks of one head, and what runs again for a head is
    its review. A name of another shape names no workflow (None).
    """
    if check_name is None:
        return "review"
    _, colon, workflow = check_name.rpartition(": ")
    return (workflow.strip() or None) if colon else None


def foreign_check(event: Event, app_id: int | None) -> Skip | None:
    """Why a request to run a check again is not this App's to answer, if it is not.

    Fails closed: a payload that names no App, or an App whose own id is not configured,
    cannot tell the check is its own. Every other event passes (None).
    """
    if not is_rerequest(event):
        return None
    check = f"{event.name} {event.check_id}"
    if app_id is None:
        return Skip(SkipReason.NOT_OUR_CHECK, "this App's id is not configured (BOT_APP_ID)")
    if event.check_app_id is None:
        return Skip(SkipReason.NOT_OUR_CHECK, f"{check} names no App")
    if event.check_app_id != app_id:
        return Skip(SkipReason.NOT_OUR_CHECK, f"{check} belongs to App {event.check_app_id}")
    return None


def needs_pull_lookup(event: Event) -> bool:
    """Whether the pull request at the check's head must be looked up by its SHA: the
    payload listed none (a fork's head, or a pull request that moved on since)."""
    return is_rerequest(event) and event.number is None and bool(event.head_sha)


def with_pull(event: Event, number: int | None) -> Event | Skip:
    """The event with the open pull request found at its head (`number`), or why not."""
    if number is None:
        head = (event.head_sha or "")[:12]
        return Skip(SkipReason.NO_TARGET, f"no open pull request has head {head}")
    return dataclasses.replace(event, target_kind="pull_request", number=number, target_id=None)
