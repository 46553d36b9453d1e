"""The page's reads on both storage backends: a run that ran on another machine (Postgres)
shows the same as one that ran here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.store.contract import Storage
from bot.ui import queries
from bot.ui.runview import agent_view, run_view
from policies.ui_pages import decode_cursor
from tests.backends import BACKENDS, backend_store, query
from tests.ui.conftest import NOW, seed
from tests.ui.seed import PLANTED_TOKEN


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, data_dir: Path) -> Iterator[Storage]:
    yield from backend_store(request, data_dir)


def redact(text: str) -> str:
    return text.replace(PLANTED_TOKEN, "[redacted]")


def test_deliveries_page_by_cursor_and_filters(store: Storage) -> None:
    seed(store)
    first = queries.deliveries_page(store, queries.DeliveryFilter(), None, 2)
    assert [r.delivery.guid for r in first.rows] == ["d-fix", "d-run"]
    assert first.rows[0].repo == "octo/lib" and first.rows[0].runs
    second = queries.deliveries_page(store, queries.DeliveryFilter(), decode_cursor(first.next), 2)
    assert [r.delivery.guid for r in second.rows] == ["d-hostile", "d-1"]
    skips = queries.deliveries_page(store, queries.DeliveryFilter(decision="skip"), None, 10)
    assert [r.delivery.guid for r in skips.rows] == ["d-skip"]
    by_repo = queries.deliveries_page(store, queries.DeliveryFilter(repo="octo/app"), None, 10)
    assert [r.delivery.guid for r in by_repo.rows] == ["d-run", "d-1", "d-skip"]
    assert by_repo.next is None


def test_runs_their_views_and_costs(store: Storage) -> None:
    seeded = seed(store)
    page = queries.runs_page(store, queries.RunFilter(workflow="triage"), None, 10)
    assert [r.id for r in page.rows] == [seeded.hostile, seeded.finished]
    view = run_view(store, store.get_run(seeded.finished) or pytest.fail("no run"), redact)
    assert str(view.timeline).count('class="bar ') == 3
    assert [p.title for p in view.phases] == ["Explore", "Report"]
    assert view.published is not None and "<strong>bug</strong>" in view.published
    agent = agent_view(store, store.get_run(seeded.writer) or pytest.fail("no run"), 0)
    assert agent is not None and agent.handoff is not None
    assert agent.handoff["commits"] == 1
    usage = queries.usage_by_day(store, NOW - 3600, NOW + 3600)
    assert round(sum(u.cost for u in usage), 2) == 1.93
    assert sum(u.runs for u in usage) == 4
    assert {(u.repo, u.workflow) for u in usage} >= {("octo/lib", "fix"), ("evil/repo", "triage")}
    assert all(u.day == int(NOW // 86400) or abs(NOW % 86400) < 3600 for u in usage)
    top = queries.costliest_runs(store, NOW - 3600, NOW + 3600, 2)
    assert [r.run_id for r in top] == [seeded.writer, seeded.finished]


def test_sessions_start_end_and_expire(store: Storage) -> None:
    now = [1000.0]
    store.clock = lambda: now[0]
    store.start_ui_session("a" * 32, 2000.0)
    store.start_ui_session("b" * 32, 1500.0)
    assert store.ui_session_active("a" * 32) and store.ui_session_active("b" * 32)
    assert not store.ui_session_active("c" * 32)
    store.end_ui_session("a" * 32)
    assert not store.ui_session_active("a" * 32)
    assert store.ui_session_active("b" * 32)
    now[0] = 1500.5
    assert not store.ui_session_active("b" * 32)
    # The next sign-in forgets the expired sessions.
    store.start_ui_session("c" * 32, 3000.0)
    assert query(store, "SELECT id FROM ui_sessions") == [("c" * 32,)]


def test_sessions_keep_who_signed_in_and_when_their_rule_was_checked(store: Storage) -> None:
    now = [1000.0]
    store.clock = lambda: now[0]
    store.start_ui_session("a" * 32, 2000.0, login="mona", grant="team:acme/ops", client="::1")
    store.start_ui_session("b" * 32, 2000.0)
    row = store.ui_session("a" * 32)
    assert row is not None
    assert (row.login, row.grant, row.checked_at, row.client) == (
        "mona",
        "team:acme/ops",
        1000.0,
        "::1",
    )
    store.ui_session_checked("a" * 32, 1100.0)
    assert store.ui_session("a" * 32).checked_at == 1100.0  # type: ignore[union-attr]
    now[0] = 1200.0
    listed = store.ui_sessions()
    assert {s.login for s in listed} == {"mona", ""}
    assert len({s.handle for s in listed}) == 2 and all("a" * 8 not in s.handle for s in listed)
    assert store.end_ui_session("a" * 32) and not store.end_ui_session("a" * 32)
    assert store.ui_session("a" * 32) is None


def test_a_sign_in_state_is_taken_once_and_not_after_it_expires(store: Storage) -> None:
    now = [1000.0]
    store.clock = lambda: now[0]
    store.add_sign_in_state("1" * 32, 1600.0)
    store.add_sign_in_state("2" * 32, 1600.0)
    assert store.take_sign_in_state("1" * 32)
    assert not store.take_sign_in_state("1" * 32)  # replayed
    assert not store.take_sign_in_state("3" * 32)  # never handed out
    now[0] = 1600.5
    assert not store.take_sign_in_state("2" * 32)  # too late


def test_the_audit_lists_newest_first_by_pages(store: Storage) -> None:
    now = [1000.0]
    store.clock = lambda: now[0]
    for i in range(5):
        now[0] += 1
        store.audit("mona", "stop", f"run-{i}", "x" * 1000, "::1")
    entries = store.audit_entries(limit=3)
    assert [e.target for e in entries] == ["run-4", "run-3", "run-2"]
    assert len(entries[0].detail) == 300 and entries[0].at == 1005.0
    older = store.audit_entries(before=entries[-1].id, limit=3)
    assert [e.target for e in older] == ["run-1", "run-0"]


def test_a_session_signed_in_before_the_audit_existed_survives_the_migration(
    data_dir: Path,
) -> None:
    from bot.store.sqlite import Store
    from bot.store.ui_access import SQLITE_STEP
    from tests.backends import sqlite_before

    path = data_dir / "bot.sqlite3"
    conn = sqlite_before(path, SQLITE_STEP)
    conn.execute(
        "INSERT INTO ui_sessions (id, created_at, expires_at) VALUES (?, 1, 9e12)", ("d" * 32,)
    )
    conn.close()
    store = Store.open(path)
    try:
        row = store.ui_session("d" * 32)
        assert row is not None and (row.login, row.grant) == ("", "")  # a shared-token session
        store.audit("(shared token)", "stop", "run-1")
        assert [e.action for e in store.audit_entries()] == ["stop"]
    finally:
        store.close()
