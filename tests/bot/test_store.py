"""The store on both backends (deliveries, decisions, runs, review state), and each
backend's own concerns: SQLite's file and migrations, Postgres's schema and pool."""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import procrastinate
import psycopg
import pytest

from bot.store.backend import job_queue
from bot.store.contract import ARTIFACT_CAP, Storage
from bot.store.postgres.schema import MIGRATIONS as PG_MIGRATIONS
from bot.store.postgres.schema import SCHEMA_VERSION as PG_SCHEMA_VERSION
from bot.store.postgres.store import PostgresStore
from bot.store.queue.sqlite import SqliteJobQueue
from bot.store.sqlite import MIGRATIONS, SCHEMA_VERSION, RunRecord, Store, StoreError, connect
from policies.lifecycle import InstallationState
from tests.backends import execute, insert_delivery, query, take_job

Opener = Callable[..., Storage]


def test_open_creates_the_schema_in_wal_mode(data_dir: Path) -> None:
    path = data_dir / "nested" / "bot.sqlite3"
    store = Store.open(path)
    conn = store.conn()
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"deliveries", "jobs", "runs"} <= tables
    store.close()


def test_reopening_keeps_data_and_does_not_migrate_twice(data_dir: Path) -> None:
    path = data_dir / "bot.sqlite3"
    store = Store.open(path)
    insert_delivery(store, "g-1")
    store.close()
    again = Store.open(path)
    assert again.count_deliveries() == 1
    again.close()


def test_a_newer_schema_is_refused_with_advice(data_dir: Path) -> None:
    path = data_dir / "bot.sqlite3"
    conn = connect(path)
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer than this bot"):
        Store.open(path)


def test_unopenable_path_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError, match="cannot open the database"):
        Store.open(blocker / "bot.sqlite3")


def test_decision_is_recorded_on_the_delivery(open_store: Opener) -> None:
    store = open_store(clock=lambda: 42.0)
    insert_delivery(store, "g-1")
    assert store.get_delivery("g-1") is not None
    assert store.get_delivery("g-1").decision is None  # type: ignore[union-attr]
    store.record_decision("g-1", "skip", reason="bot_sender: dependabot[bot]")
    row = store.get_delivery("g-1")
    assert row is not None
    assert (row.decision, row.reason, row.workflow, row.decided_at) == (
        "skip",
        "bot_sender: dependabot[bot]",
        None,
        42.0,
    )
    assert row.headers == {"x-github-event": "issues"}
    assert row.body == b"{}"
    assert store.get_delivery("missing") is None
    store.close()


def test_list_deliveries_oldest_first_with_limit_keeping_the_newest(open_store: Opener) -> None:
    store = open_store()
    for n in range(5):
        insert_delivery(store, f"g-{n}", received_at=float(n))
    assert [d.guid for d in store.list_deliveries()] == [f"g-{n}" for n in range(5)]
    assert [d.guid for d in store.list_deliveries(limit=2)] == ["g-3", "g-4"]
    store.close()


def test_create_run_is_idempotent_per_delivery_and_workflow(open_store: Opener) -> None:
    store = open_store()
    args = {
        "delivery_id": "g-1",
        "repo": "octo/repo",
        "target_kind": "pull_request",
        "number": 7,
        "workflow": "review",
        "mode": "webhook",
    }
    run = store.create_run(**args)  # type: ignore[arg-type]
    assert re.fullmatch(r"wf_[0-9a-f]{12}", run.id)
    assert store.create_run(**args) == run  # type: ignore[arg-type]
    assert store.get_run(run.id) == run
    other = store.create_run(**{**args, "workflow": "fix"})  # type: ignore[arg-type]
    assert other.id != run.id
    assert [r.id for r in store.runs_for_delivery("g-1")] == [run.id, other.id]
    store.update_run(run.id, status="succeeded", outcome={"summary": "ok"})
    done = store.get_run(run.id)
    assert done is not None and (done.status, done.outcome) == ("succeeded", {"summary": "ok"})
    store.close()


def test_runs_on_a_target_newest_first_without_the_excluded_one(open_store: Opener) -> None:
    clock = iter(float(n) for n in range(100))
    store = open_store(clock=lambda: next(clock))
    made = [
        store.create_run(
            delivery_id=f"g-{n}",
            repo="octo/repo",
            target_kind="issue",
            number=7 if n != 2 else 8,
            workflow="triage",
            mode="webhook",
        )
        for n in range(5)
    ]
    found = store.runs_on_target("octo/repo", "issue", 7, exclude=made[4].id)
    assert [r.id for r in found] == [made[3].id, made[1].id, made[0].id]
    assert [r.id for r in store.runs_on_target("octo/repo", "issue", 7, limit=1)] == [made[4].id]
    assert store.runs_on_target("octo/repo", "pull_request", 7) == []
    store.close()


def test_latest_run_and_runs_counted_by_their_deliverys_reason(open_store: Opener) -> None:
    clock = iter(float(n) for n in range(100))
    store = open_store(clock=lambda: next(clock))
    reasons = [None, "reporter_reply", "ask", "reporter_reply", "reporter_reply"]
    made = []
    for n, reason in enumerate(reasons):
        insert_delivery(store, f"g-{n}")
        workflow = "ask" if reason == "ask" else "triage"
        made.append(
            store.create_run(
                delivery_id=f"g-{n}",
                repo="octo/repo",
                target_kind="issue",
                number=7 if n != 3 else 8,
                workflow=workflow,
                mode="webhook",
            )
        )
        store.record_decision(f"g-{n}", "trigger", reason=reason, workflow=workflow)
    insert_delivery(store, "g-skip")
    store.record_decision("g-skip", "skip", reason="reporter_reply")

    latest = store.latest_run("octo/repo", "issue", 7, "triage")
    assert latest is not None and latest.id == made[4].id
    before = store.latest_run("octo/repo", "issue", 7, "triage", exclude_delivery="g-4")
    assert before is not None and before.id == made[1].id
    assert store.latest_run("octo/repo", "issue", 7, "fix") is None
    assert store.latest_run("octo/repo", "pull_request", 7, "triage") is None

    count = store.count_runs_for_reason
    assert count("octo/repo", "issue", 7, "triage", "reporter_reply") == 2
    assert count("octo/repo", "issue", 7, "triage", "reporter_reply", exclude_delivery="g-4") == 1
    assert count("octo/repo", "issue", 8, "triage", "reporter_reply") == 1
    assert count("octo/repo", "issue", 7, "ask", "ask") == 1
    assert count("other/repo", "issue", 7, "triage", "reporter_reply") == 0
    store.close()


def test_ping_reports_a_broken_database(open_store: Opener) -> None:
    store = open_store()
    assert store.ping()
    execute(
        store,
        "DROP TABLE deliveries CASCADE"
        if isinstance(store, PostgresStore)
        else "DROP TABLE deliveries",
    )
    assert not store.ping()


def test_delivery_and_job_share_the_database_file(data_dir: Path) -> None:
    store = Store.open(data_dir / "bot.sqlite3")
    queue = SqliteJobQueue(store)
    insert_delivery(store, "g-1")
    assert queue.enqueue_sync("g-1") is not None
    raw = sqlite3.connect(data_dir / "bot.sqlite3")
    assert raw.execute(
        "SELECT count(*) FROM jobs JOIN deliveries ON deliveries.guid = jobs.delivery_id"
    ).fetchone() == (1,)
    raw.close()
    store.close()


def test_review_state_is_kept_per_pull_request(open_store: Opener) -> None:
    store = open_store()
    assert store.get_review_state("o/r", 1) is None
    store.put_review_state("o/r", 1, '{"heads": ["a"]}')
    store.put_review_state("o/r", 2, '{"heads": ["b"]}')
    store.put_review_state("o/r", 1, '{"heads": ["a", "c"]}')
    assert store.get_review_state("o/r", 1) == '{"heads": ["a", "c"]}'
    assert store.get_review_state("o/r", 2) == '{"heads": ["b"]}'
    assert store.get_review_state("x/r", 1) is None


def _run(store: Storage, guid: str, workflow: str = "triage", number: int = 7) -> RunRecord:
    return store.create_run(
        delivery_id=guid,
        repo="octo/repo",
        target_kind="issue",
        number=number,
        workflow=workflow,
        mode="webhook",
    )


def test_a_database_from_before_run_args_keeps_its_runs_and_gains_the_column(
    data_dir: Path,
) -> None:
    path = data_dir / "bot.sqlite3"
    conn = connect(path)
    for step in MIGRATIONS[:3]:
        for statement in step.split(";"):
            if statement.strip():
                conn.execute(statement)
    conn.execute("PRAGMA user_version=3")
    conn.execute(
        "INSERT INTO runs (id, delivery_id, repo, target_kind, number, workflow, mode, status,"
        " created_at, updated_at, outcome) VALUES ('wf_00000000abcd', 'g-1', 'octo/repo',"
        " 'issue', 7, 'triage', 'webhook', 'blocked', 1, 1, '{\"status\": \"blocked\"}')"
    )
    conn.close()
    store = Store.open(path)
    old = store.get_run("wf_00000000abcd")
    assert old is not None and old.status == "blocked" and old.args is None
    store.set_run_args(old.id, {"context": "the issue", "fence": "F"})
    again = store.get_run(old.id)
    assert again is not None and again.args == {"context": "the issue", "fence": "F"}
    assert again.answers() is None
    store.close()


def test_one_run_claims_the_answer_to_a_blocked_run(open_store: Opener) -> None:
    store = open_store()
    blocked = _run(store, "g-1")
    first, second, elsewhere = (
        _run(store, "g-2", "decide"),
        _run(store, "g-3", "decide"),
        _run(store, "g-4", "decide", number=8),
    )
    decision = {"text": "a", "blocked_run": blocked.id}
    assert store.answered_by(blocked) is None
    assert store.claim_answer(first.id, blocked, decision) is None
    assert store.claim_answer(first.id, blocked, decision) is None  # a retried job: its own
    claimed = store.get_run(first.id)
    assert claimed is not None and claimed.answers() == blocked.id
    assert claimed.args == {"decision": decision}
    taken = store.claim_answer(second.id, blocked, decision)
    assert taken is not None and taken.id == first.id
    assert store.get_run(second.id).args is None  # type: ignore[union-attr]
    assert store.answered_by(blocked, exclude=first.id) is None
    assert store.answered_by(blocked) == claimed
    # a run on another issue never answers this one's question
    store.set_run_args(elsewhere.id, {"decision": decision})
    assert store.answered_by(blocked, exclude=first.id) is None
    # a follow-up that failed leaves the question open
    store.update_run(first.id, status="failed")
    assert store.answered_by(blocked) is None
    assert store.claim_answer(second.id, blocked, decision) is None
    store.close()


def test_one_run_holds_a_target_until_it_ends_or_its_time_runs_out(open_store: Opener) -> None:
    now = [1000.0]
    store = open_store(clock=lambda: now[0])

    def run(guid: str, number: int = 7) -> RunRecord:
        return store.create_run(
            delivery_id=guid,
            repo="o/r",
            target_kind="issue",
            number=number,
            workflow="ask",
            mode="webhook",
        )

    a, b, c = run("g-a"), run("g-b"), run("g-c", number=8)
    assert store.acquire_target(a, workflow="ask", until=1030) is None
    assert store.acquire_target(b, workflow="ask", until=1030) == a.id  # held
    assert store.acquire_target(b, workflow="triage", until=1030) is None  # another workflow
    assert store.acquire_target(c, workflow="ask", until=1030) is None  # another issue
    assert store.acquire_target(a, workflow="ask", until=1030) is None  # its own, again
    store.update_run(a.id, status="succeeded")
    assert store.acquire_target(b, workflow="ask", until=1030) is None  # a ended
    now[0] = 1031.0  # b's holder died: its time runs out
    d = run("g-d")
    assert store.acquire_target(d, workflow="ask", until=1060) is None
    store.refresh_target(d.id, 1100)
    now[0] = 1080.0
    assert store.acquire_target(b, workflow="ask", until=1110) == d.id
    store.release_target(d.id)
    assert store.acquire_target(b, workflow="ask", until=1110) is None
    store.close()


def test_a_stop_is_recorded_once_for_whichever_worker_runs_it(open_store: Opener) -> None:
    store = open_store()
    run = store.create_run(
        delivery_id="g", repo="o/r", target_kind="issue", number=1, workflow="ask", mode="webhook"
    )
    assert store.stop_requested(run.id) is None
    store.request_stop(run.id, "stopped on request")
    store.request_stop(run.id, "superseded")  # the first reason stays
    assert store.stop_requested(run.id) == "stopped on request"
    store.close()


def test_installation_state_is_kept_per_installation(open_store: Opener) -> None:
    store = open_store()
    assert store.installation_state(42) is None
    store.set_installation_state(42, InstallationState.SUSPENDED, delivery_id="g-1")
    store.set_installation_state(43, InstallationState.DELETED, delivery_id="g-2")
    assert store.installation_state(42) is InstallationState.SUSPENDED
    store.set_installation_state(42, InstallationState.ACTIVE, delivery_id="g-3")
    assert store.installation_state(42) is InstallationState.ACTIVE
    assert store.installation_state(43) is InstallationState.DELETED
    assert query(store, "SELECT delivery_id FROM installations WHERE id = 42") == [("g-3",)]
    store.close()


def test_seen_guids_are_those_stored(open_store: Opener) -> None:
    store = open_store()
    for n in range(3):
        insert_delivery(store, f"g-{n}")
    asked = [f"g-{n}" for n in range(1000)] + ["g-1"]
    assert store.seen_guids(asked) == {"g-0", "g-1", "g-2"}
    assert store.seen_guids([]) == set()
    store.close()


def test_deliveries_in_flight_are_undecided_or_have_unfinished_runs(open_store: Opener) -> None:
    store = open_store()
    for n, guid in enumerate(["undecided", "skipped", "running", "finished", "publishing"]):
        insert_delivery(store, guid, received_at=float(n))
    store.record_decision("skipped", "skip", reason="not_addressed")
    for guid, status in [
        ("running", "running"),
        ("finished", "failed"),
        ("publishing", "publishing"),
    ]:
        store.record_decision(guid, "trigger", workflow="triage")
        store.update_run(_run(store, guid).id, status=status)
    pending = store.deliveries_in_flight()
    assert [d.guid for d in pending] == ["undecided", "running", "publishing"]
    assert pending[0].body == b"{}"
    store.close()


def test_delivery_summaries_carry_the_job_and_the_runs(open_store: Opener) -> None:
    store = open_store()
    queue = job_queue(store)
    for n, guid in enumerate(["g-0", "g-1", "g-2"]):
        insert_delivery(store, guid, received_at=float(n))
    for guid in ("g-0", "g-1"):
        queue.enqueue_sync(guid)
    job = take_job(store)
    assert job.delivery_id == "g-0"
    store.record_decision("g-0", "trigger", workflow="triage")
    first = _run(store, "g-0")
    second = _run(store, "g-0", workflow="review")
    store.update_run(first.id, status="succeeded")

    g0, g1, g2 = store.delivery_summaries()
    assert (g0.delivery.guid, g0.delivery.decision, g0.job_status, g0.attempts) == (
        "g-0",
        "trigger",
        "running",
        1,
    )
    assert g0.max_attempts == 5 and g0.last_error is None
    assert g0.runs == ((first.id, "succeeded"), (second.id, "queued"))
    assert (g1.job_status, g1.attempts, g1.runs) == ("queued", 0, ())
    assert (g2.job_status, g2.attempts, g2.max_attempts, g2.runs) == (None, 0, None, ())
    assert [s.delivery.guid for s in store.delivery_summaries(limit=1)] == ["g-2"]
    store.close()


def test_workers_racing_for_a_free_target_leave_one_holder(open_store: Opener) -> None:
    store = open_store()
    runs = [
        store.create_run(
            delivery_id=f"g-{n}",
            repo="o/r",
            target_kind="issue",
            number=1,
            workflow="ask",
            mode="webhook",
        )
        for n in range(8)
    ]
    results: dict[str, str | None] = {}
    start = threading.Barrier(len(runs))

    def acquire(run: RunRecord) -> None:
        start.wait()
        results[run.id] = store.acquire_target(run, workflow="ask", until=time.time() + 30)

    threads = [threading.Thread(target=acquire, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    (winner,) = [run_id for run_id, holder in results.items() if holder is None]
    assert all(holder == winner for run_id, holder in results.items() if run_id != winner)


def test_attempts_at_a_run_are_counted(open_store: Opener) -> None:
    store = open_store()
    run = store.create_run(
        delivery_id="g", repo="o/r", target_kind="issue", number=1, workflow="ask", mode="webhook"
    )
    assert [store.start_attempt(run.id) for _ in range(3)] == [1, 2, 3]
    assert store.start_attempt("wf_000000000000") == 0


def test_run_artifacts_are_kept_replaced_and_listed(open_store: Opener) -> None:
    store = open_store()
    assert store.get_artifact("wf_0000000000aa", "journal.json") is None
    store.put_artifact("wf_0000000000aa", "journal.json", '{"entries": []}')
    store.put_artifact("wf_0000000000aa", "journal.json", '{"entries": [1]}')
    store.put_artifact("wf_0000000000aa", "worktrees/agent-3.json", "{}")
    store.put_artifact("wf_0000000000bb", "report.md", "nul \x00 here, ünïcode")
    assert store.get_artifact("wf_0000000000aa", "journal.json") == '{"entries": [1]}'
    assert store.artifact_names("wf_0000000000aa") == ["journal.json", "worktrees/agent-3.json"]
    # Postgres text cannot hold NUL: it is replaced, on both backends alike.
    assert store.get_artifact("wf_0000000000bb", "report.md") == "nul \ufffd here, ünïcode"
    reopened = open_store()
    assert reopened.get_artifact("wf_0000000000aa", "worktrees/agent-3.json") == "{}"


def test_an_artifact_over_the_cap_is_refused_and_the_old_copy_stays(open_store: Opener) -> None:
    store = open_store()
    store.put_artifact("wf_0000000000aa", "transcripts.json", "{}")
    with pytest.raises(StoreError, match="over"):
        store.put_artifact("wf_0000000000aa", "transcripts.json", "x" * (ARTIFACT_CAP + 1))
    assert store.get_artifact("wf_0000000000aa", "transcripts.json") == "{}"


def test_a_runs_usage_is_recorded_when_it_ends(open_store: Opener) -> None:
    store = open_store()
    run = store.create_run(
        delivery_id="g", repo="o/r", target_kind="issue", number=1, workflow="ask", mode="webhook"
    )
    assert (run.input_tokens, run.output_tokens, run.cost, run.finished_at) == (None,) * 4
    store.record_run_usage(
        run.id, input_tokens=1200, output_tokens=340, cost=0.0125, finished_at=1234.5
    )
    done = store.get_run(run.id)
    assert done is not None
    assert (done.input_tokens, done.output_tokens, done.cost, done.finished_at) == (
        1200,
        340,
        0.0125,
        1234.5,
    )
    store.record_run_usage(run.id, input_tokens=1, output_tokens=2, cost=None, finished_at=2.0)
    again = store.get_run(run.id)
    assert again is not None and again.cost is None


def test_redelivery_requests_are_counted_up_to_the_limit_by_racing_processes(
    open_store: Opener,
) -> None:
    stores = [open_store(), open_store()]  # two processes' stores on one database
    allowed: list[bool] = []
    start = threading.Barrier(8)

    def claim(n: int) -> None:
        start.wait()
        allowed.append(stores[n % 2].claim_redelivery("g-1", at=100.0 + n, limit=3))

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(allowed) == [False] * 5 + [True] * 3
    assert stores[0].claim_redelivery("g-2", at=200.0, limit=3)
    assert stores[1].redelivery_requests(["g-1", "g-2", "g-3"]) == {"g-1": 3, "g-2": 1}
    # Dropped only once the last request is older than the cut-off.
    assert stores[0].forget_redeliveries(before=150.0) == 1
    assert stores[0].redelivery_requests(["g-1", "g-2"]) == {"g-2": 1}


def test_a_trigger_key_is_held_by_the_first_delivery_that_claims_it(open_store: Opener) -> None:
    stores = [open_store(), open_store()]
    holders: list[str] = []
    start = threading.Barrier(6)

    def claim(n: int) -> None:
        start.wait()
        holders.append(stores[n % 2].claim_trigger("comment:1/issue/7:c@t:ask", f"g-{n}"))

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    (winner,) = set(holders)
    assert winner in {f"g-{n}" for n in range(6)}
    # The holder asking again (a retried job) keeps it; another key is another holder.
    assert stores[0].claim_trigger("comment:1/issue/7:c@t:ask", winner) == winner
    assert stores[1].claim_trigger("comment:1/issue/7:c@u:ask", "g-9") == "g-9"


def test_a_nul_in_stored_text_is_kept_as_u_fffd_on_both_backends(open_store: Opener) -> None:
    store = open_store()
    insert_delivery(store, "g-nul", action="opened")
    store.record_decision("g-nul", "skip", reason="unsupported_action: issues.op\x00ened")
    run = store.create_run(
        delivery_id="g-nul",
        repo="octo/he\x00llo",
        target_kind="issue",
        number=1,
        workflow="triage",
        mode="webhook",
    )
    assert run.repo == "octo/he\ufffdllo"
    delivery = store.get_delivery("g-nul")
    assert delivery is not None and delivery.reason == "unsupported_action: issues.op\ufffdened"
    assert store.claim_trigger("k\x00", "g-nul") == "g-nul"
    assert store.claim_trigger("k\ufffd", "g-other") == "g-nul"


# -- Postgres: its schema, migrated by the app, and its connections --------------------------


def test_postgres_reopening_keeps_data_and_does_not_migrate_twice(postgres_dsn: str) -> None:
    store = PostgresStore.open(postgres_dsn)
    insert_delivery(store, "g-1")
    store.close()
    again = PostgresStore.open(postgres_dsn)
    assert again.count_deliveries() == 1
    with again.pool.connection() as conn:
        rows = conn.execute("SELECT version, procrastinate FROM bot_schema").fetchall()
    assert rows == [(PG_SCHEMA_VERSION, procrastinate.__version__)]
    again.close()


def test_postgres_stores_opening_at_once_migrate_once(postgres_dsn: str) -> None:
    stores: list[Storage] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            stores.append(PostgresStore.open(postgres_dsn))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(stores) == 4
    insert_delivery(stores[0], "g-1")
    assert [store.count_deliveries() for store in stores] == [1, 1, 1, 1]
    for store in stores:
        store.close()


def test_postgres_schema_of_version_2_gains_artifacts_usage_and_the_dead_jobs_index(
    postgres_dsn: str,
) -> None:
    with psycopg.connect(postgres_dsn) as conn:
        for step in PG_MIGRATIONS[:2]:
            conn.execute(step.encode())
        conn.execute(
            "CREATE TABLE bot_schema (version integer NOT NULL, procrastinate text NOT NULL)"
        )
        conn.execute("INSERT INTO bot_schema VALUES (2, %s)", (procrastinate.__version__,))
        conn.execute(
            "INSERT INTO runs (id, delivery_id, repo, target_kind, number, workflow, mode,"
            " status, created_at, updated_at) VALUES ('wf_0000000000aa', 'g', 'o/r', 'issue',"
            " 1, 'ask', 'webhook', 'succeeded', 1, 2)"
        )
    store = PostgresStore.open(postgres_dsn)
    old = store.get_run("wf_0000000000aa")
    assert old is not None and old.status == "succeeded" and old.input_tokens is None
    store.put_artifact(old.id, "report.md", "kept")
    assert store.get_artifact(old.id, "report.md") == "kept"
    with store.pool.connection() as conn:
        version = conn.execute("SELECT version FROM bot_schema").fetchall()
        index = conn.execute(
            "SELECT 1 FROM pg_indexes WHERE indexname = 'bot_jobs_dead'"
            " AND schemaname = current_schema()"
        ).fetchall()
    store.close()
    assert version == [(PG_SCHEMA_VERSION,)] and index == [(1,)]


def test_postgres_a_newer_schema_is_refused_with_advice(postgres_dsn: str) -> None:
    PostgresStore.open(postgres_dsn).close()
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("UPDATE bot_schema SET version = version + 1")
    with pytest.raises(StoreError, match="newer than this bot"):
        PostgresStore.open(postgres_dsn)


def test_postgres_job_tables_of_another_procrastinate_are_refused(postgres_dsn: str) -> None:
    PostgresStore.open(postgres_dsn).close()
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("UPDATE bot_schema SET procrastinate = '2.0.0'")
    with pytest.raises(StoreError, match=r"procrastinate 2\.0\.0's"):
        PostgresStore.open(postgres_dsn)


def test_postgres_unreachable_is_a_store_error_that_keeps_the_password_out(
    tmp_path: Path,
) -> None:
    # No server listens in tmp_path: the socket is missing.
    dsn = f"postgresql://bot:pw-{'9' * 12}@/bot?host={tmp_path}"
    with pytest.raises(StoreError, match="cannot connect to Postgres") as caught:
        PostgresStore.open(dsn)
    assert "9" * 12 not in str(caught.value)
    assert f"postgresql://bot@/bot?host={tmp_path}" in str(caught.value)
