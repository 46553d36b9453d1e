"""How loud a review is: where each finding goes, when a follow-up stays quiet, when the
automatic reviews of a pull request pause (`review.min_severity`, `review.max_comments`,
`review.quiet`, `review.auto_pause` of `.github/bot.yml`).

- A finding below `min_severity` is never an inline comment, wherever it is: the summary
  lists it, collapsed, with the findings past `max_comments`. Of the others, one the diff
  cannot anchor goes into the review's body ("Outside the diff"); the rest are inline comments,
  the most severe first (the caller ranks them), until `max_comments` are placed; then they
  overflow (the review's body and the summary's list).
- A quiet follow-up is an automatic review of a pull request reviewed before that found
  nothing new and changed no finding's state (none fixed, none dismissed), posted on the head
  it reviewed. A review someone asked for always answers.
- Automatic reviews are counted per pull request (in the store, from the last `resume` on):
  the one whose count within the window passes `pushes` pauses the pull request and posts the
  one note; any later one while paused is skipped without a word, so the note is never posted
  twice for one pause.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Literal

from policies.review_state import StoredFinding

__all__ = [
    "SEVERITY_RANK",
    "AutoPauseStep",
    "FollowUp",
    "Placement",
    "auto_pause_note",
    "auto_pause_step",
    "below_threshold",
    "earlier_below",
    "is_quiet",
    "place",
]

SEVERITY_RANK: dict[str, int] = {"critical": 0, "high": 1, "medium": 2, "low": 3, "info": 4}
"""Severities, the most severe first; an unknown one ranks below `info`."""

Placement = Literal["inline", "outside", "below", "overflow"]
AutoPauseStep = Literal["review", "pause", "paused"]


def below_threshold(severity: str, min_severity: str) -> bool:
    """Whether a finding of `severity` is under `min_severity` (never commented inline)."""
    return SEVERITY_RANK.get(severity, len(SEVERITY_RANK)) > SEVERITY_RANK[min_severity]


def earlier_below(
    findings: Iterable[StoredFinding], *, min_severity: str, exclude: Collection[str]
) -> list[StoredFinding]:
    """The still open findings of earlier reviews under `min_severity` that have no comment of
    their own, but those in `exclude` (this review's): a later summary lists them again, so
    they are not lost from sight when it replaces the one that first listed them."""
    return [
        f
        for f in findings
        if f.status == "open"
        and f.comment_id is None
        and f.fingerprint not in exclude
        and below_threshold(f.severity, min_severity)
    ]


def place(
    severity: str, *, anchored: bool, inline_so_far: int, min_severity: str, max_comments: int
) -> Placement:
    """Where one finding goes, given how many inline comments the more severe ones took."""
    if below_threshold(severity, min_severity):
        return "below"
    if not anchored:
        return "outside"
    return "inline" if inline_so_far < max_comments else "overflow"


@dataclass(frozen=True, slots=True)
class FollowUp:
    """What a finished review found, for `is_quiet`."""

    automatic: bool
    follow_up: bool
    new: int
    fixed: int
    dismissed: int
    stale: bool = False
    blocked: bool = False


def is_quiet(facts: FollowUp, *, quiet: bool) -> bool:
    """Whether this review posts nothing but its check run (`review.quiet`)."""
    return (
        quiet
        and facts.automatic
        and facts.follow_up
        and not facts.stale
        and not facts.blocked
        and facts.new == 0
        and facts.fixed == 0
        and facts.dismissed == 0
    )


def auto_pause_step(count: int, *, pushes: int) -> AutoPauseStep:
    """`count`: this automatic review's place among those counted in the window, itself
    included. The first `pushes` review; the next pauses (and notes it); later ones are
    skipped (a review that raced the pause)."""
    if count <= pushes:
        return "review"
    return "pause" if count == pushes + 1 else "paused"


def auto_pause_note(app_slug: str, *, pushes: int, minutes: int) -> str:
    """The one short note a pause posts."""
    times = f"{pushes} automatic review{'' if pushes == 1 else 's'}"
    window = "a minute" if minutes == 1 else f"{minutes} minutes"
    return (
        f"Automatic reviews of this pull request are paused: {times} within {window} "
        f"(`review.auto_pause`). Comment `@{app_slug} resume` to turn them on again, or "
        f"`@{app_slug} review` to have this push reviewed."
    )
