"""The fate of every finding the app posted, kept per (repository, pull request, fingerprint).

`review_findings` holds one row per finding of a pull request's review memory, written
again whenever the memory changes (`put_finding_fates`) and when the pull request closes: its
outcome (`policies.finding_fates.Outcome`), who and how for a dismissal or a fix marked by
hand, the head it was posted on and the pull request's state (open, merged, closed). A
row keeps the time it was first posted. Both backends share these queries (`Storage` mixes
them in); their migrations add the table (`SQLITE_TABLE`, `POSTGRES_TABLE`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, cast

from policies.finding_fates import FindingFate, Outcome, PullState, outcome_counts

if TYPE_CHECKING:
    from bot.store.contract import Sql

__all__ = ["POSTGRES_TABLE", "SQLITE_TABLE", "FindingFates"]

SQLITE_TABLE = """
CREATE TABLE review_findings (
    repo TEXT NOT NULL,
    number INTEGER NOT NULL,
    fingerprint TEXT NOT NULL,
    path TEXT NOT NULL,
    category TEXT NOT NULL,
    severity TEXT NOT NULL,
    title TEXT NOT NULL,
    outcome TEXT NOT NULL,
    actor TEXT,
    how TEXT,
    head TEXT NOT NULL,
    pull_state TEXT NOT NULL,
    posted_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (repo, number, fingerprint)
);
CREATE INDEX review_findings_outcome ON review_findings (outcome)
"""
"""The SQLite migration step that adds the table."""

POSTGRES_TABLE = """
CREATE TABLE review_findings (
    repo text NOT NULL,
    number integer NOT NULL,
    fingerprint text NOT NULL,
    path text NOT NULL,
    category text NOT NULL,
    severity text NOT NULL,
    title text NOT NULL,
    outcome text NOT NULL,
    actor text,
    how text,
    head text NOT NULL,
    pull_state text NOT NULL,
    posted_at double precision NOT NULL,
    updated_at double precision NOT NULL,
    PRIMARY KEY (repo, number, fingerprint)
);
CREATE INDEX review_findings_outcome ON review_findings (outcome);
"""
"""The Postgres migration step that adds the table."""

_COLUMNS = (
    "repo, number, fingerprint, path, category, severity, title, outcome, actor, how, head,"
    " pull_state"
)


class FindingFates:
    """The `review_findings` queries; `Storage` supplies the connections and the clock."""

    clock: Callable[[], float]

    def _session(self) -> AbstractContextManager[Sql]:
        raise NotImplementedError

    def _transaction(self) -> AbstractContextManager[Sql]:
        raise NotImplementedError

    def put_finding_fates(self, repo: str, number: int, fates: Sequence[FindingFate]) -> None:
        """Record the fates of the pull request's findings (a row per fingerprint, its first
        posting time kept); rows of the pull request not among `fates` stay as they were."""
        now = self.clock()
        with self._transaction() as db:
            for f in fates:
                db.run(
                    f"INSERT INTO review_findings ({_COLUMNS}, posted_at, updated_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (repo, number, fingerprint) DO UPDATE SET"
                    " path = excluded.path, category = excluded.category,"
                    " severity = excluded.severity, title = excluded.title,"
                    " outcome = excluded.outcome, actor = excluded.actor, how = excluded.how,"
                    " head = excluded.head, pull_state = excluded.pull_state,"
                    " updated_at = excluded.updated_at",
                    (
                        repo,
                        number,
                        f.fingerprint,
                        f.path,
                        f.category,
                        f.severity,
                        f.title,
                        f.outcome,
                        f.actor,
                        f.how,
                        f.head,
                        f.pull,
                        now,
                        now,
                    ),
                )

    def finding_fates(self, repo: str | None = None) -> list[FindingFate]:
        """Every recorded finding (of `repo` only, when given), by repository, pull request
        and the time it was posted."""
        where, params = ("WHERE lower(repo) = lower(?)", [repo]) if repo else ("", [])
        with self._session() as db:
            rows = db.all(
                f"SELECT {_COLUMNS} FROM review_findings {where}"
                " ORDER BY repo, number, posted_at, fingerprint",
                params,
            )
        return [
            FindingFate(
                repo=str(r[0]),
                number=int(r[1]),
                fingerprint=str(r[2]),
                path=str(r[3]),
                category=str(r[4]),
                severity=str(r[5]),
                title=str(r[6]),
                outcome=cast(Outcome, str(r[7])),
                actor=None if r[8] is None else str(r[8]),
                how=None if r[9] is None else str(r[9]),
                head=str(r[10]),
                pull=cast(PullState, str(r[11])),
            )
            for r in rows
        ]

    def finding_outcome_counts(self) -> dict[str, int]:
        """Posted findings and each outcome's count, over every repository (`/metrics`)."""
        with self._session() as db:
            rows = db.all("SELECT outcome, count(*) FROM review_findings GROUP BY outcome")
        return outcome_counts([(str(r[0]), int(r[1])) for r in rows])
