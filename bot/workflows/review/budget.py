"""What a review says when its budget stopped it: how far it got, and what it left out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.untrusted_text import code_span

SHOWN_PATHS = 50


def budget_of(review: Mapping[str, Any]) -> dict[str, Any] | None:
    """The workflow's `review.budget` (see `bot.workflows.review.workflow`), checked."""
    raw = review.get("budget")
    if not isinstance(raw, Mapping) or not isinstance(raw.get("reason"), str):
        return None
    left = raw.get("not_reviewed")
    undone = raw.get("not_done")
    return {
        "not_done": [str(p) for p in undone if isinstance(p, str)]
        if isinstance(undone, list)
        else [],
        "reason": str(raw["reason"]),
        "units": _count(raw.get("units")),
        "reviewed": _count(raw.get("reviewed")),
        "not_reviewed": [str(p) for p in left if isinstance(p, str)]
        if isinstance(left, list)
        else [],
    }


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def budget_line(budget: Mapping[str, Any]) -> str:
    """`**Budget reached:** 3 of 7 units reviewed; not reviewed: `a.py`, `b.py`. (why)`"""
    left = list(budget["not_reviewed"])
    shown = ", ".join(code_span(p) for p in left[:SHOWN_PATHS])
    if len(left) > SHOWN_PATHS:
        shown += f" and {len(left) - SHOWN_PATHS} more"
    done = f"{budget['reviewed']} of {budget['units']} units reviewed"
    missing = f"; not reviewed: {shown}" if left else ""
    undone = list(budget["not_done"])
    if undone:
        missing += "; not done: " + ", ".join(undone)
    return (
        f"**Budget reached:** {done}{missing}. The run stopped starting model calls at its "
        f"budget ({budget['reason']}); nothing unverified is posted. Raise `budget` in "
        "`.github/bot.yml` (within the operator's caps) or comment `review` again later."
    )
