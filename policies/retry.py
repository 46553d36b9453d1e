"""Whether a stored delivery may be run again, and under which job kind.

A delivery is run again (by `bot retry`, the operator page's Retry button, or GitHub sending
the same GUID again) when its work ended badly: its newest job is dead (its attempts spent),
or a run it started ended `failed`. It is refused while anything of it is still under way (a
job queued or running, a run not finished), when its newest job was cancelled (the app lost
the installation, or the job was cancelled on purpose), and when nothing of it failed: then a
GitHub redelivery is acknowledged as a duplicate, as before.

Each retry is one more job of the delivery, of kind `retry-<n>`: a delivery has one job per
kind for good (the queue's unique key), so two retries racing each other add one job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from policies.outcome import OUTCOME_STATUSES

__all__ = ["RETRY_PREFIX", "Verdict", "next_kind", "verdict"]

RETRY_PREFIX = "retry-"

_UNDER_WAY = ("queued", "running")


@dataclass(frozen=True, slots=True)
class Verdict:
    """`retry` says whether to run the delivery again; `reason` says why, or why not."""

    retry: bool
    reason: str


def verdict(jobs: Sequence[tuple[str, str]], runs: Sequence[tuple[str, str]]) -> Verdict:
    """The verdict for a delivery whose jobs are `jobs` ((kind, status) oldest first, status
    in the JobQueue's words: queued, running, done, dead, cancelled) and whose runs are
    `runs` ((run id, status))."""
    for kind, status in jobs:
        if status in _UNDER_WAY:
            return Verdict(False, f"its {kind} job is {status}")
    for run_id, status in runs:
        if status not in OUTCOME_STATUSES:
            return Verdict(False, f"run {run_id} is {status}")
    if not jobs:
        return Verdict(False, "it has no job")
    kind, status = jobs[-1]
    if status == "cancelled":
        return Verdict(False, f"its {kind} job was cancelled")
    if status == "dead":
        return Verdict(True, f"its {kind} job is dead")
    failed = [run_id for run_id, status in runs if status == "failed"]
    if failed:
        return Verdict(True, f"run {failed[-1]} failed")
    ended = ", ".join(f"run {run_id} {status}" for run_id, status in runs)
    return Verdict(False, f"nothing failed (job {status}{', ' + ended if ended else ''})")


def next_kind(jobs: Sequence[tuple[str, str]]) -> str:
    """The kind of the delivery's next retry job, given its jobs as `verdict` takes them."""
    used = {kind for kind, _ in jobs}
    n = sum(kind.startswith(RETRY_PREFIX) for kind in used) + 1
    while f"{RETRY_PREFIX}{n}" in used:
        n += 1
    return f"{RETRY_PREFIX}{n}"
