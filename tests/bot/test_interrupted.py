"""A run whose worker died mid-run: the next attempt resumes it from the engine's journal.

The first attempt is cancelled while the conclusion's model call is in flight, as a killed
process would leave it: the run `running` in the store, the explorer's result journaled, the
job leased. Once the lease has run out the job is claimed again; the run must resume, replay
the explorer, post one comment, and leave nothing in the mirror. After three interruptions
the run is given up: a failed outcome is posted and the job is dead.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import anyio
import pytest

from bot.store.sqlite import transaction
from tests.bot import test_execute
from tests.bot.test_execute import Rig
from tests.fakes.llm import Reply
from tests.scripted import ModelScript, user_prompt

pytestmark = pytest.mark.anyio
rig = test_execute.rig  # the executor tests' rig: the real worker, executor, engine and store


def slow_conclusion(script: ModelScript, calls: list[str]) -> Any:
    def respond(body: dict[str, Any]) -> Reply:
        prompt = user_prompt(body)
        calls.append(prompt.split("\n", 1)[0][:30])
        reply = script(body)
        if prompt.startswith("Triage "):
            return dataclasses.replace(reply, delay=30.0)
        return reply

    return respond


def expire_leases(rig: Rig) -> None:
    conn = rig.store.conn()
    with transaction(conn):
        conn.execute("UPDATE jobs SET lease_until = 0 WHERE status = 'running'")


async def test_an_interrupted_run_resumes_and_replays_what_it_finished(
    rig: Rig, data_dir: Path
) -> None:
    calls: list[str] = []
    rig.llm.respond_with(slow_conclusion(ModelScript(), calls))
    rig.open_issue("The app crashes at start-up.")
    runs = data_dir / "runs"

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(rig.worker.run_until_idle)
        with anyio.fail_after(30):  # until the explorer's result is journaled
            while not any(runs.glob("wf_*/journal.json")):  # noqa: ASYNC110 (a file, polled)
                await anyio.sleep(0.02)
        tasks.cancel_scope.cancel()  # the worker dies here
    (run,) = rig.store.runs_for_delivery("guid-1")
    assert run.status == "running"
    assert [c for c in calls if c.startswith("You are triaging")] != []

    rig.llm.respond_with(counted(ModelScript(), calls))
    expire_leases(rig)
    before = len(calls)
    assert await rig.worker.run_until_idle() == 1
    (run,) = rig.store.runs_for_delivery("guid-1")
    assert run.status == "succeeded"
    # The explorer was not asked again: only the conclusion ran for real.
    assert [c[:8] for c in calls[before:]] == ["Triage i"]
    details = rig.executor.engine.status(run.id)
    assert [a.replayed for a in details.agents] == [True, False]
    assert len(rig.own(1)) == 1


def counted(script: ModelScript, calls: list[str]) -> Any:
    def respond(body: dict[str, Any]) -> Reply:
        calls.append(user_prompt(body).split("\n", 1)[0][:30])
        return script(body)

    return respond


async def test_a_run_interrupted_three_times_is_given_up_with_a_failed_outcome(
    rig: Rig, data_dir: Path
) -> None:
    calls: list[str] = []
    rig.llm.respond_with(slow_conclusion(ModelScript(), calls))
    rig.open_issue("The app crashes at start-up.")
    for _ in range(3):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(rig.worker.run_until_idle)
            with anyio.fail_after(30):
                while sum(c.startswith("Triage ") for c in calls) <= _:  # noqa: ASYNC110
                    await anyio.sleep(0.02)
            tasks.cancel_scope.cancel()
        expire_leases(rig)
    asked = len(calls)
    assert await rig.worker.run_until_idle() == 1
    assert len(calls) == asked  # no model call on the attempt that gives up
    (run,) = rig.store.runs_for_delivery("guid-1")
    assert run.status == "failed"
    (body,) = rig.own(1)
    assert "interrupted 3 times" in body
    conn = rig.store.conn()
    assert conn.execute("SELECT status FROM jobs").fetchone()[0] == "dead"
