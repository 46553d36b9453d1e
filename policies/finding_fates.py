"""What became of each finding the app posted, and the resolution rate that sums it up.

Every finding in a pull request's review memory (`policies.review_state.ReviewState`) was
posted in a review; its fate is one of:

- `fixed`: a later push changed its lines and the re-check agreed it is gone ("Fixed in
  <sha>"), or a person with write permission marked it fixed in its thread ("fixed", "done",
  "addressed": `marked_fixed_by`);
- `dismissed`: a person with write permission resolved its thread, answered "won't fix" or
  reacted 👎 (who and how are kept: `dismissal_act`);
- `outdated`: still open when the pull request closed, on lines GitHub marks outdated (they
  changed under it) that no re-check found fixed;
- `open_at_close`: still open when the pull request closed, merged or not;
- `open`: the pull request is still open and the finding stands.

The resolution rate is fixed ÷ posted, counted over closed pull requests only (merged or
not): an open pull request's findings have not met their fate yet. Nothing here reads the
clock or the store: the caller passes the state and the pull request's state in.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from policies.event import Event
from policies.review_state import ReviewState, StoredFinding, ThreadFacts, says_wont_fix

__all__ = [
    "COUNTED",
    "OUTCOMES",
    "FateStats",
    "FateTable",
    "FindingFate",
    "Outcome",
    "PullClosed",
    "PullState",
    "closed_pull",
    "dismissal_act",
    "fates_of",
    "marked_fixed_by",
    "outcome_counts",
    "pull_state",
    "tally",
]

Outcome = Literal["open", "fixed", "dismissed", "outdated", "open_at_close"]
OUTCOMES: tuple[Outcome, ...] = ("open", "fixed", "dismissed", "outdated", "open_at_close")
COUNTED: tuple[str, ...] = ("posted", "fixed", "dismissed", "outdated", "open_at_close")
"""The `outcome` label values of `bot_review_findings_total`: a fixed, small vocabulary."""
PullState = Literal["open", "merged", "closed"]

_DISMISSALS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^thread resolved by @(\S+)$"), "resolved thread"),
    (re.compile(r"^@(\S+) answered that it will not be fixed$"), "won't fix"),
    (re.compile(r"^@(\S+) reacted 👎$"), "👎"),
)
_MARKED_FIXED = re.compile(r"^marked fixed by @(\S+)$")
_FIXED_IN = re.compile(r"^Fixed in ([0-9a-f]{7,64})$")
_SAYS_FIXED = re.compile(
    r"^\W*(?:(?:now |this is |it'?s |is )?(?:fixed|done|addressed|resolved)\b"
    r"|(?:fixed|addressed) in\b)",
    re.IGNORECASE,
)
_NOT = re.compile(r"\bnot\b|n't\b|\?", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class PullClosed:
    """A `pull_request.closed` delivery: the pull request's findings meet their fate."""

    repo: str
    number: int
    installation_id: int | None
    merged: bool

    @property
    def state(self) -> PullState:
        return "merged" if self.merged else "closed"


def pull_state(state: str, merged: bool) -> PullState:
    """The state GitHub gives a pull request (`state`, `merged`) in the words of a fate."""
    if merged:
        return "merged"
    return "open" if state == "open" else "closed"


@dataclass(frozen=True, slots=True)
class ThreadDeclined:
    """A person's reply in a review thread that declines its finding ("intentional: ..."):
    the reason is learned now (`bot.workflows.review.fates.learn_from_reply`), not at the
    next review or the close. Whether the thread is one of the app's findings, and whether
    the person may dismiss it (write permission), is read then."""

    repo: str
    number: int
    installation_id: int | None
    thread: int
    """The thread's first comment (the finding's comment, when it is the app's)."""


def declined_thread(event: Event, app_slug: str) -> ThreadDeclined | None:
    """The thread a reply declines, or None: not a reply, from a bot, a command to the app
    (the command runs instead), or not words that decline."""
    if event.name != "pull_request_review_comment" or event.action != "created":
        return None
    if event.comment_in_reply_to is None or not event.repo_full_name or event.number is None:
        return None
    sender = event.sender_login or ""
    if not sender or event.sender_type == "Bot" or sender.lower().endswith("[bot]"):
        return None
    body = event.comment_body or ""
    if re.search(rf"(?<![\w-])@{re.escape(app_slug)}(?:\[bot\])?(?![\w-])", body, re.I):
        return None
    if not says_wont_fix(body):
        return None
    return ThreadDeclined(
        event.repo_full_name, event.number, event.installation_id, event.comment_in_reply_to
    )


def closed_pull(event: Event) -> PullClosed | None:
    """The pull request this delivery closed, or None when it closed none."""
    if event.name != "pull_request" or event.action != "closed":
        return None
    if not event.repo_full_name or event.number is None:
        return None
    return PullClosed(event.repo_full_name, event.number, event.installation_id, event.merged)


@dataclass(frozen=True, slots=True)
class FindingFate:
    """One posted finding and what became of it."""

    repo: str
    number: int
    fingerprint: str
    path: str
    category: str
    severity: str
    title: str
    outcome: Outcome
    actor: str | None = None
    """Who dismissed it or marked it fixed (a login), or the head that fixed it."""
    how: str | None = None
    """`re-check`, `marked fixed`, `resolved thread`, `won't fix` or `👎`."""
    head: str = ""
    """The head it was posted on."""
    pull: PullState = "open"


def dismissal_act(resolution: str | None) -> tuple[str | None, str | None]:
    """(who, how) of a dismissal as `policies.review_state.dismissal_reason` words it."""
    text = (resolution or "").strip()
    for pattern, how in _DISMISSALS:
        match = pattern.match(text)
        if match:
            return match.group(1), how
    return None, None


def _fixed_act(resolution: str | None) -> tuple[str | None, str]:
    text = (resolution or "").strip()
    match = _MARKED_FIXED.match(text)
    if match:
        return match.group(1), "marked fixed"
    match = _FIXED_IN.match(text)
    return (match.group(1) if match else None), "re-check"


def _says_fixed(body: str) -> bool:
    first = body.strip().split("\n", 1)[0][:200]
    return bool(_SAYS_FIXED.match(first)) and not _NOT.search(first)


def marked_fixed_by(
    thread: ThreadFacts, is_person: Callable[[str], bool], writers: Collection[str]
) -> str | None:
    """The first person with write permission (`writers`, lower-case logins) who answered in
    the thread that the finding is fixed ("Fixed", "Done", "Addressed in abc123"); None when
    nobody who may say so did. A negation or a question ("not fixed?") says nothing.
    `is_person` is False for the app's and other bots' logins."""
    for author, body in thread.replies:
        if author and is_person(author) and author.lower() in writers and _says_fixed(body):
            return author
    return None


def _fate(
    finding: StoredFinding, pull: PullState, outdated: bool
) -> tuple[Outcome, str | None, str | None]:
    if finding.status == "fixed":
        fixer, way = _fixed_act(finding.resolution)
        return "fixed", fixer, way
    if finding.status == "dismissed":
        actor, how = dismissal_act(finding.resolution)
        return "dismissed", actor, how
    if pull == "open":
        return "open", None, None
    return ("outdated" if outdated else "open_at_close"), None, None


def fates_of(
    repo: str,
    number: int,
    state: ReviewState,
    *,
    pull: PullState = "open",
    outdated: Collection[str] = (),
) -> list[FindingFate]:
    """The fate of every finding of the pull request's memory; `outdated`: fingerprints of
    open findings whose lines GitHub marks outdated."""
    out: list[FindingFate] = []
    for finding in state.findings:
        outcome, actor, how = _fate(finding, pull, finding.fingerprint in outdated)
        out.append(
            FindingFate(
                repo=repo,
                number=number,
                fingerprint=finding.fingerprint,
                path=finding.path,
                category=finding.category,
                severity=finding.severity,
                title=finding.title,
                outcome=outcome,
                actor=actor,
                how=how,
                head=finding.head,
                pull=pull,
            )
        )
    return out


@dataclass
class FateStats:
    """Posted findings and their fates; the rate counts closed pull requests only."""

    posted: int = 0
    fixed: int = 0
    dismissed: int = 0
    outdated: int = 0
    open_at_close: int = 0
    open: int = 0
    closed_posted: int = 0
    closed_fixed: int = 0

    def add(self, fate: FindingFate) -> None:
        self.posted += 1
        setattr(self, fate.outcome, getattr(self, fate.outcome) + 1)
        if fate.pull != "open":
            self.closed_posted += 1
            self.closed_fixed += fate.outcome == "fixed"

    @property
    def resolution_rate(self) -> float | None:
        """Fixed ÷ posted of closed pull requests; None before any closed."""
        return self.closed_fixed / self.closed_posted if self.closed_posted else None

    def as_dict(self) -> dict[str, int | float | None]:
        return {
            "posted": self.posted,
            "fixed": self.fixed,
            "dismissed": self.dismissed,
            "outdated": self.outdated,
            "open_at_close": self.open_at_close,
            "open": self.open,
            "resolution_rate": self.resolution_rate,
        }


@dataclass
class FateTable:
    """The figures per repository, per category and per severity, and over everything."""

    total: FateStats = field(default_factory=FateStats)
    repos: dict[str, FateStats] = field(default_factory=dict)
    categories: dict[str, FateStats] = field(default_factory=dict)
    severities: dict[str, FateStats] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        def rows(table: Mapping[str, FateStats]) -> dict[str, object]:
            return {name: stats.as_dict() for name, stats in sorted(table.items())}

        return {
            "total": self.total.as_dict(),
            "repos": rows(self.repos),
            "categories": rows(self.categories),
            "severities": rows(self.severities),
        }


def tally(fates: Iterable[FindingFate]) -> FateTable:
    """Add up `fates` per repository, category and severity."""
    table = FateTable()
    for fate in fates:
        table.total.add(fate)
        table.repos.setdefault(fate.repo, FateStats()).add(fate)
        table.categories.setdefault(fate.category, FateStats()).add(fate)
        table.severities.setdefault(fate.severity, FateStats()).add(fate)
    return table


def outcome_counts(rows: Sequence[tuple[str, int]]) -> dict[str, int]:
    """`COUNTED` from (outcome, count) rows: posted is all of them; `open` is not a label."""
    out = dict.fromkeys(COUNTED, 0)
    for outcome, n in rows:
        out["posted"] += n
        if outcome in out:
            out[outcome] += n
    return out
