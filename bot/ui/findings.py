"""The operator page's view of review findings: what became of each, and the resolution rate.

`findings_view` turns the store's fates (`bot.store.findings`) into what `findings.html`
prints: the figures per repository, category and severity (`policies.finding_fates.tally`)
with each rate as a percentage ("—" before any pull request closed), and the newest findings
first, at most `MAX_LISTED`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policies.finding_fates import FateStats, FindingFate, tally

MAX_LISTED = 200
"""Findings listed at most; the figures count all of them."""


def _rate(stats: FateStats) -> str:
    rate = stats.resolution_rate
    return "—" if rate is None else f"{rate:.0%}"


def _rows(table: Mapping[str, FateStats]) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "posted": s.posted,
            "fixed": s.fixed,
            "dismissed": s.dismissed,
            "outdated": s.outdated,
            "open_at_close": s.open_at_close,
            "open": s.open,
            "rate": _rate(s),
        }
        for name, s in sorted(table.items())
    ]


def _how(fate: FindingFate) -> str:
    if fate.how is None:
        return ""
    if fate.how == "re-check":
        return f"re-check at {fate.actor[:12]}" if fate.actor else "re-check"
    return f"{fate.how} by @{fate.actor}" if fate.actor else fate.how


def findings_view(fates: Sequence[FindingFate], repo: str) -> dict[str, Any]:
    """The template's context for the findings page."""
    table = tally(fates)
    listed = list(reversed(fates))[:MAX_LISTED]
    return {
        "repo": repo,
        "total": _rows({"all": table.total})[0],
        "repos": _rows(table.repos),
        "categories": _rows(table.categories),
        "severities": _rows(table.severities),
        "listed": [
            {
                "repo": f.repo,
                "number": f.number,
                "severity": f.severity,
                "category": f.category,
                "outcome": f.outcome.replace("_", " "),
                "how": _how(f),
                "title": f.title,
                "path": f.path,
                "pull": f.pull,
            }
            for f in listed
        ],
        "more": max(0, len(fates) - MAX_LISTED),
    }
