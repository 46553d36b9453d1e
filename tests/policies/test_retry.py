"""policies.retry: what runs again, and under which job kind."""

from __future__ import annotations

import pytest

from policies.retry import Verdict, next_kind, verdict


@pytest.mark.parametrize(
    ("jobs", "runs", "expected"),
    [
        ([("delivery", "dead")], [], Verdict(True, "its delivery job is dead")),
        ([("delivery", "done")], [("wf_1", "failed")], Verdict(True, "run wf_1 failed")),
        ([("delivery", "done"), ("retry-1", "dead")], [], Verdict(True, "its retry-1 job is dead")),
        ([("delivery", "running")], [], Verdict(False, "its delivery job is running")),
        (
            [("delivery", "dead"), ("retry-1", "queued")],
            [],
            Verdict(False, "its retry-1 job is queued"),
        ),
        ([("delivery", "done")], [("wf_1", "running")], Verdict(False, "run wf_1 is running")),
        (
            [("delivery", "done")],
            [("wf_1", "publishing")],
            Verdict(False, "run wf_1 is publishing"),
        ),
        (
            [("delivery", "cancelled")],
            [("wf_1", "failed")],
            Verdict(False, "its delivery job was cancelled"),
        ),
        ([], [], Verdict(False, "it has no job")),
        (
            [("delivery", "done")],
            [("wf_1", "succeeded")],
            Verdict(False, "nothing failed (job done, run wf_1 succeeded)"),
        ),
        ([("delivery", "done")], [], Verdict(False, "nothing failed (job done)")),
    ],
)
def test_verdict(
    jobs: list[tuple[str, str]], runs: list[tuple[str, str]], expected: Verdict
) -> None:
    assert verdict(jobs, runs) == expected


def test_next_kind_counts_retries_and_skips_taken_kinds() -> None:
    assert next_kind([("delivery", "dead")]) == "retry-1"
    assert next_kind([("delivery", "dead"), ("replay-0", "dead"), ("retry-1", "dead")]) == "retry-2"
    assert next_kind([("delivery", "dead"), ("retry-2", "dead")]) == "retry-3"
