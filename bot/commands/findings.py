"""`bot findings`: what became of the findings the app posted, and its resolution rate.

Lists every recorded finding (repository, pull request, severity, category, outcome, who and
how, title) and the figures per repository, category and severity: posted, fixed,
dismissed, outdated, open at close and the resolution rate (fixed ÷ posted, of closed pull
requests). `--repo OWNER/NAME` keeps one repository; `--json` prints one JSON object,
`{"findings": [...], "figures": {...}}`, for scripts.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

from bot.engine.sanitize import strip_terminal
from bot.settings import SettingsError, load_settings
from bot.store.backend import open_store
from bot.store.contract import StoreError
from policies.finding_fates import FateStats, FateTable, FindingFate, tally


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    findings = subparsers.add_parser(
        "findings",
        help="list the review findings the app posted, what became of them, the resolution rate",
    )
    findings.add_argument("--repo", default="", help="only this repository (OWNER/NAME)")
    findings.add_argument("--json", action="store_true", help="print JSON for scripts")
    findings.set_defaults(func=run_findings)


def _plain(text: str) -> str:
    """One line of `text` that cannot repaint the terminal: a title is a model's words and a
    path anything git allows, escape sequences included."""
    return " ".join(strip_terminal(text).split())


def _rate(stats: FateStats) -> str:
    rate = stats.resolution_rate
    return "—" if rate is None else f"{rate:.0%}"


def _figures(title: str, rows: dict[str, FateStats]) -> list[str]:
    lines = [
        f"{title:32} {'posted':>6} {'fixed':>6} {'dismissed':>9} {'outdated':>8}"
        f" {'open at close':>13} {'rate':>5}"
    ]
    for name, s in sorted(rows.items()):
        lines.append(
            f"{_plain(name)[:32]:32} {s.posted:>6} {s.fixed:>6} {s.dismissed:>9} {s.outdated:>8}"
            f" {s.open_at_close:>13} {_rate(s):>5}"
        )
    return lines


def render_text(fates: list[FindingFate], table: FateTable) -> str:
    """The listing and the figures as plain text."""
    if not fates:
        return "No findings recorded yet."
    lines = []
    for f in fates:
        actor = _plain(f.actor or "")
        who = f" by @{actor}" if actor and f.how not in (None, "re-check") else ""
        how = f" ({_plain(f.how)}{who})" if f.how else ""
        where = f"{_plain(f.repo)}#{f.number:<6} {_plain(f.severity):8} {_plain(f.category):12}"
        lines.append(f"{where} {f.outcome}{how}: {_plain(f.title)} ({_plain(f.path)})")
    lines.append("")
    lines += _figures("repository", table.repos)
    lines.append("")
    lines += _figures("category", table.categories)
    lines.append("")
    lines += _figures("severity", table.severities)
    lines.append("")
    lines += _figures("all", {"all": table.total})[1:]
    return "\n".join(lines)


def render_json(fates: list[FindingFate], table: FateTable) -> str:
    return json.dumps(
        {"findings": [dataclasses.asdict(f) for f in fates], "figures": table.as_dict()},
        ensure_ascii=False,
    )


def run_findings(args: argparse.Namespace) -> int:
    try:
        settings = load_settings()
        store = open_store(settings)
    except (SettingsError, StoreError) as exc:
        print(f"bot: {exc}", file=sys.stderr)
        return 1
    try:
        fates = store.finding_fates(args.repo.strip() or None)
    finally:
        store.close()
    table = tally(fates)
    print(render_json(fates, table) if args.json else render_text(fates, table))
    return 0
