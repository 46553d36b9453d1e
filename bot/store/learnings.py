"""The learnings each repository keeps (`policies.learnings.Learning`), numbered per repository.

`learnings` holds one row per learning: the repository (lower-case), its number there (shown
by `@app learnings`, removed by `@app forget <n>`; never given twice in a repository, even
after a forget, from the per-repository counter in `learning_numbers`), the
text, its author, where it came from, and for a dismissal the finding's category, title and
paths. A source is learned once: the same comment read again (the next review, the close,
a retried job) adds nothing. Both backends share these queries (`Storage` mixes them in);
their migrations add the tables (`SQLITE_TABLE`, `POSTGRES_TABLE`, then `NUMBERS_TABLE`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from policies.learnings import Learning, clean_text

if TYPE_CHECKING:
    from bot.store.contract import Sql

__all__ = ["NUMBERS_TABLE", "POSTGRES_TABLE", "SQLITE_TABLE", "Learnings"]

SQLITE_TABLE = """
CREATE TABLE learnings (
    repo TEXT NOT NULL,
    number INTEGER NOT NULL,
    text TEXT NOT NULL,
    author TEXT NOT NULL,
    source TEXT NOT NULL,
    category TEXT NOT NULL,
    title TEXT NOT NULL,
    paths TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (repo, number)
);
CREATE UNIQUE INDEX learnings_source ON learnings (repo, source)
"""
"""The SQLite migration step that adds the table."""

POSTGRES_TABLE = """
CREATE TABLE learnings (
    repo text NOT NULL,
    number integer NOT NULL,
    text text NOT NULL,
    author text NOT NULL,
    source text NOT NULL,
    category text NOT NULL,
    title text NOT NULL,
    paths text NOT NULL,
    created_at double precision NOT NULL,
    PRIMARY KEY (repo, number)
);
CREATE UNIQUE INDEX learnings_source ON learnings (repo, source);
"""
"""The Postgres migration step that adds the table."""

NUMBERS_TABLE = """
CREATE TABLE learning_numbers (
    repo TEXT PRIMARY KEY,
    last INTEGER NOT NULL
);
INSERT INTO learning_numbers (repo, last) SELECT repo, max(number) FROM learnings GROUP BY repo
"""
"""The migration step (both backends) that adds the last number given per repository, seeded
from the learnings kept: a number forgotten is not given again."""

_COLUMNS = "repo, number, text, author, source, category, title, paths, created_at"
_TRIES = 5  # a number taken by a writer at the same moment: take the next one


def _learning(row: Sequence[Any]) -> Learning:
    try:
        paths = tuple(str(p) for p in json.loads(str(row[7])))
    except (ValueError, TypeError):
        paths = ()
    return Learning(
        repo=str(row[0]),
        number=int(row[1]),
        text=str(row[2]),
        author=str(row[3]),
        source=str(row[4]),
        category=str(row[5]),
        title=str(row[6]),
        paths=paths,
        created_at=float(row[8]),
    )


class Learnings:
    """The `learnings` queries; `Storage` supplies the connections and the clock."""

    clock: Callable[[], float]

    def _session(self) -> AbstractContextManager[Sql]:
        raise NotImplementedError

    def _transaction(self) -> AbstractContextManager[Sql]:
        raise NotImplementedError

    def add_learning(
        self,
        repo: str,
        *,
        text: str,
        author: str,
        source: str,
        category: str = "",
        title: str = "",
        paths: Sequence[str] = (),
    ) -> tuple[Learning, bool]:
        """Keep a learning of `repo` (its text cleaned: `policies.learnings.clean_text`);
        (the learning, True) when added, (the one kept before, False) when `source` was
        learned already."""
        key = repo.lower()
        params = [
            clean_text(text),
            author,
            source,
            category.lower(),
            title,
            json.dumps(list(paths)),
        ]
        for _ in range(_TRIES):
            with self._transaction() as db:
                found = db.one(
                    f"SELECT {_COLUMNS} FROM learnings WHERE repo = ? AND source = ?",
                    [key, source],
                )
                if found is not None:
                    return _learning(found), False
                # The counter's row is locked until the commit, so two writers of one
                # repository take numbers one after the other.
                db.run(
                    "INSERT INTO learning_numbers (repo, last) VALUES (?, 1)"
                    " ON CONFLICT (repo) DO UPDATE SET last = learning_numbers.last + 1",
                    [key],
                )
                taken = db.one("SELECT last FROM learning_numbers WHERE repo = ?", [key])
                assert taken is not None
                changed = db.run(
                    f"INSERT INTO learnings ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT DO NOTHING",
                    [key, int(taken[0]), *params, self.clock()],
                )
                if changed:
                    row = db.one(
                        f"SELECT {_COLUMNS} FROM learnings WHERE repo = ? AND source = ?",
                        [key, source],
                    )
                    assert row is not None
                    return _learning(row), True
        raise RuntimeError(f"no free learning number in {repo} after {_TRIES} tries")

    def learnings(self, repo: str | None = None) -> list[Learning]:
        """The learnings of `repo` (any case), newest first; of every repository, by
        repository, when None."""
        with self._session() as db:
            if repo is None:
                rows = db.all(f"SELECT {_COLUMNS} FROM learnings ORDER BY repo, number DESC")
            else:
                rows = db.all(
                    f"SELECT {_COLUMNS} FROM learnings WHERE repo = ? ORDER BY number DESC",
                    [repo.lower()],
                )
        return [_learning(r) for r in rows]

    def forget_learning(self, repo: str, number: int) -> Learning | None:
        """Remove learning `number` of `repo`; the one removed, or None when there is none."""
        with self._transaction() as db:
            row = db.one(
                f"SELECT {_COLUMNS} FROM learnings WHERE repo = ? AND number = ?",
                [repo.lower(), number],
            )
            if row is None:
                return None
            db.run("DELETE FROM learnings WHERE repo = ? AND number = ?", [repo.lower(), number])
        return _learning(row)
