"""`policies.review_noise`: where a finding goes, when a follow-up is quiet, when reviews pause."""

from __future__ import annotations

import pytest

from policies.review_noise import (
    FollowUp,
    Placement,
    auto_pause_note,
    auto_pause_step,
    earlier_below,
    is_quiet,
    place,
)
from policies.review_state import StoredFinding


@pytest.mark.parametrize(
    ("severity", "anchored", "so_far", "min_severity", "cap", "expected"),
    [
        pytest.param("high", True, 0, "low", 10, "inline", id="anchored-with-room"),
        pytest.param("high", True, 10, "low", 10, "overflow", id="past-the-cap"),
        pytest.param("critical", True, 0, "low", 0, "overflow", id="cap-of-zero"),
        pytest.param("high", False, 0, "low", 10, "outside", id="no-anchor"),
        pytest.param("info", True, 0, "low", 10, "below", id="info-below-the-default"),
        pytest.param("info", True, 0, "info", 10, "inline", id="info-when-info-is-asked-for"),
        pytest.param("medium", True, 0, "high", 10, "below", id="medium-below-high"),
        pytest.param("medium", False, 0, "high", 10, "below", id="below-wins-over-outside"),
        pytest.param("high", True, 0, "high", 10, "inline", id="at-the-threshold"),
        pytest.param("weird", True, 0, "info", 10, "below", id="unknown-ranks-lowest"),
    ],
)
def test_place(
    severity: str,
    anchored: bool,
    so_far: int,
    min_severity: str,
    cap: int,
    expected: Placement,
) -> None:
    where = place(
        severity,
        anchored=anchored,
        inline_so_far=so_far,
        min_severity=min_severity,
        max_comments=cap,
    )
    assert where == expected


QUIET = FollowUp(automatic=True, follow_up=True, new=0, fixed=0, dismissed=0)


@pytest.mark.parametrize(
    ("facts", "quiet", "expected"),
    [
        pytest.param(QUIET, True, True, id="nothing-new-nothing-changed"),
        pytest.param(QUIET, False, False, id="quiet-off"),
        pytest.param(FollowUp(True, True, 1, 0, 0), True, False, id="a-new-finding"),
        pytest.param(FollowUp(True, True, 0, 1, 0), True, False, id="a-finding-fixed"),
        pytest.param(FollowUp(True, True, 0, 0, 1), True, False, id="a-finding-dismissed"),
        pytest.param(FollowUp(False, True, 0, 0, 0), True, False, id="asked-for"),
        pytest.param(FollowUp(True, False, 0, 0, 0), True, False, id="first-review"),
        pytest.param(FollowUp(True, True, 0, 0, 0, stale=True), True, False, id="stale"),
        pytest.param(FollowUp(True, True, 0, 0, 0, blocked=True), True, False, id="blocked"),
    ],
)
def test_is_quiet(facts: FollowUp, quiet: bool, expected: bool) -> None:
    assert is_quiet(facts, quiet=quiet) is expected


@pytest.mark.parametrize(
    ("count", "pushes", "expected"),
    [
        pytest.param(1, 3, "review", id="first"),
        pytest.param(3, 3, "review", id="the-nth"),
        pytest.param(4, 3, "pause", id="the-one-after"),
        pytest.param(5, 3, "paused", id="a-racing-one-after-that"),
        pytest.param(2, 1, "pause", id="one-push-allowed"),
    ],
)
def test_auto_pause_step(count: int, pushes: int, expected: str) -> None:
    assert auto_pause_step(count, pushes=pushes) == expected


def test_the_note_says_why_and_how_to_resume_or_ask() -> None:
    note = auto_pause_note("repo-agent", pushes=3, minutes=10)
    assert "3 automatic reviews within 10 minutes" in note
    assert "`@repo-agent resume`" in note and "`@repo-agent review`" in note
    assert "1 automatic review within a minute" in auto_pause_note("a", pushes=1, minutes=1)


def test_earlier_below_lists_the_open_uncommented_ones_under_the_threshold() -> None:
    def found(fp: str, severity: str, **extra: object) -> StoredFinding:
        return StoredFinding.model_validate(
            {"fingerprint": fp, "path": "a.py", "severity": severity, **extra}
        )

    findings = [
        found("low-open", "low"),
        found("info-open", "info"),
        found("high-open", "high"),  # at the threshold: not below it
        found("low-commented", "low", comment_id=7),  # it has its own comment
        found("low-fixed", "low", status="fixed"),
        found("low-dismissed", "low", status="dismissed"),
        found("low-this-run", "low"),
    ]
    listed = earlier_below(findings, min_severity="medium", exclude={"low-this-run"})
    assert [f.fingerprint for f in listed] == ["low-open", "info-open"]
    assert earlier_below(findings, min_severity="info", exclude=()) == []
