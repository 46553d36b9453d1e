"""Run artifacts copied to the bot's database, and resumes that find them there.

A worker on another machine has none of the first attempt's run folder: what it needs to
resume comes from the database (a real SQLite store here; the storage contract's own tests run
the same queries on Postgres).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.engine import Engine, RunDetails, RunNotFound
from bot.store.sqlite import Store
from tests.engine.scripted import POLICY, make_repo
from tests.engine.test_resume import META, counting_runner, go, interrupted


async def attempt(engine: Engine, repo: Path, run_id: str, *, crash: bool) -> RunDetails:
    """An attempt at `interrupted` under `run_id`: the first crashes, the next resumes it."""
    return await engine.run(
        META,
        interrupted,
        {"crash": crash},
        interaction=POLICY,
        repo=repo,
        run_id=run_id,
        resume_from=None if crash else run_id,
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(tmp_path / "db" / "bot.sqlite3")
    yield opened
    opened.close()


@pytest.mark.anyio
async def test_every_artifact_a_run_writes_is_in_the_database_too(
    tmp_path: Path, data_dir: Path, store: Store
) -> None:
    repo = make_repo(tmp_path, bare=True)
    engine = Engine(counting_runner(), data_dir=data_dir, mirror=store)
    done = await go(engine, repo)
    folder = data_dir / "runs" / done.run_id
    on_disk = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert {"journal.json", "workflow.json", "transcripts.json", "result.json", "report.md"} <= set(
        on_disk
    )
    assert any(name.startswith("worktrees/agent-") for name in on_disk)
    assert store.artifact_names(done.run_id) == on_disk
    for name in on_disk:
        assert store.get_artifact(done.run_id, name) == (folder / name).read_text()
    details = json.loads(store.get_artifact(done.run_id, "workflow.json") or "{}")
    assert details["status"] == "completed" and len(details["agents"]) == 6


@pytest.mark.anyio
async def test_an_interrupted_run_resumes_on_a_machine_without_its_folder(
    tmp_path: Path, store: Store
) -> None:
    repo = make_repo(tmp_path, bare=True)
    runner = counting_runner()
    first_machine, second_machine = tmp_path / "one", tmp_path / "two"
    run_id = "wf_00000000c0de"
    crashed = await attempt(
        Engine(runner, data_dir=first_machine, mirror=store), repo, run_id, crash=True
    )
    assert crashed.status == "failed"
    shutil.rmtree(first_machine)  # that machine is gone

    calls = len(runner.calls)
    done = await attempt(
        Engine(runner, data_dir=second_machine, mirror=store), repo, run_id, crash=False
    )
    assert done.status == "completed" and done.result == ["one#1", "two#2", "three#3"]
    assert [a.replayed for a in done.agents] == [True, True, False]
    assert [c.label for c in runner.calls[calls:]] == ["three"]


@pytest.mark.anyio
async def test_a_run_resumes_from_another_run_that_only_the_database_holds(
    tmp_path: Path, store: Store
) -> None:
    repo = make_repo(tmp_path, bare=True)
    runner = counting_runner()
    first = await go(Engine(runner, data_dir=tmp_path / "one", mirror=store), repo)
    shutil.rmtree(tmp_path / "one")
    engine = Engine(runner, data_dir=tmp_path / "two", mirror=store)
    # Its details too (a `decide` reads the commit the blocked run read from them).
    seen = engine.status(first.run_id)
    assert (seen.status, seen.base) == ("completed", first.base)
    with pytest.raises(RunNotFound):
        Engine(runner, data_dir=tmp_path / "two").status(first.run_id)
    second = await go(engine, repo, resume_from=first.run_id)
    assert second.resumed_from == first.run_id
    assert [a.replayed for a in second.agents] == [True, True, True, False, False, False]


@pytest.mark.anyio
async def test_without_the_database_copy_the_other_machine_runs_everything(
    tmp_path: Path, store: Store
) -> None:
    repo = make_repo(tmp_path, bare=True)
    runner = counting_runner()
    run_id = "wf_00000000beef"
    await attempt(Engine(runner, data_dir=tmp_path / "one"), repo, run_id, crash=True)
    shutil.rmtree(tmp_path / "one")
    done = await attempt(
        Engine(runner, data_dir=tmp_path / "two", mirror=store), repo, run_id, crash=False
    )
    assert done.status == "completed" and not any(a.replayed for a in done.agents)
    assert done.resume_note is not None


@pytest.mark.anyio
async def test_a_database_that_refuses_the_copy_costs_the_copy_not_the_run(
    data_dir: Path, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    store.conn().execute("DROP TABLE run_artifacts")  # every copy now fails
    done = await go(Engine(counting_runner(), data_dir=data_dir, mirror=store), None)
    assert done.status == "completed"
    assert (data_dir / "runs" / done.run_id / "journal.json").is_file()
    assert "cannot copy a run artifact to the database" in caplog.text
