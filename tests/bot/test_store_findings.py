"""The store's record of each posted finding's fate (`bot.store.findings`), on both backends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.store.contract import Storage
from policies.finding_fates import FindingFate
from tests.backends import BACKENDS, backend_store, query


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, data_dir: Path) -> Iterator[Storage]:
    yield from backend_store(request, data_dir)


def fate(fp: str, outcome: str = "open", **kw: object) -> FindingFate:
    base: dict[str, object] = {
        "repo": "acme/api",
        "number": 7,
        "fingerprint": fp,
        "path": "calc.py",
        "category": "bug",
        "severity": "high",
        "title": f"title {fp}",
        "outcome": outcome,
        "head": "a" * 40,
    }
    base.update(kw)
    return FindingFate(**base)  # type: ignore[arg-type]


def test_fates_round_trip_and_update_in_place(store: Storage) -> None:
    store.clock = lambda: 100.0
    store.put_finding_fates("acme/api", 7, [fate("f1"), fate("f2", severity="low")])
    store.clock = lambda: 200.0
    store.put_finding_fates(
        "acme/api",
        7,
        [fate("f1", "dismissed", actor="maint", how="👎", pull="merged")],
    )
    got = store.finding_fates()
    assert [(f.fingerprint, f.outcome, f.actor, f.how, f.pull) for f in got] == [
        ("f1", "dismissed", "maint", "👎", "merged"),
        ("f2", "open", None, None, "open"),
    ]
    # The first posting time stays; the update time moves.
    rows = query(store, "SELECT fingerprint, posted_at, updated_at FROM review_findings")
    assert sorted(rows) == [("f1", 100.0, 200.0), ("f2", 100.0, 100.0)]


def test_fates_of_one_repository_any_case(store: Storage) -> None:
    store.put_finding_fates("acme/api", 7, [fate("f1")])
    store.put_finding_fates("acme/web", 1, [fate("f9", repo="acme/web", number=1)])
    assert [f.fingerprint for f in store.finding_fates("Acme/API")] == ["f1"]
    assert [f.repo for f in store.finding_fates()] == ["acme/api", "acme/web"]


def test_outcome_counts_cover_every_repository(store: Storage) -> None:
    assert store.finding_outcome_counts() == {
        "posted": 0,
        "fixed": 0,
        "dismissed": 0,
        "outdated": 0,
        "open_at_close": 0,
    }
    store.put_finding_fates("acme/api", 7, [fate("f1", "fixed"), fate("f2", "open_at_close")])
    store.put_finding_fates("acme/web", 1, [fate("f3", "open", repo="acme/web", number=1)])
    assert store.finding_outcome_counts() == {
        "posted": 3,
        "fixed": 1,
        "dismissed": 0,
        "outdated": 0,
        "open_at_close": 1,
    }
