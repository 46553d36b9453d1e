"""The run's budget asked before every model request: by the engine before an agent call
starts, by the runtime before each of its turns (`bot.engine.budget`, `policies.budget`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.engine import Engine, WorkflowMeta
from bot.engine.budget import RunBudget
from bot.engine.workflow import Workflow
from policies.budget import BudgetLimits
from policies.interaction import RunInteractionMode, RunInteractionPolicy
from tests.agents.conftest import RuntimeFactory
from tests.fakes.llm import FakeLLM, text

pytestmark = pytest.mark.anyio

META = WorkflowMeta("budget", "agents under a budget", ("Ask",))
AUTONOMOUS = RunInteractionPolicy(RunInteractionMode.AUTONOMOUS)


async def run(engine: Engine, budget: RunBudget, prompts: list[str]) -> Any:
    async def workflow(wf: Workflow, args: Any) -> Any:
        def ask(prompt: str) -> Any:
            return lambda: wf.agent(prompt, agent_type="explorer", label=prompt[:10])

        results = await wf.parallel([ask(p) for p in prompts])
        return {"errors": [r.error for r in results], "reached": wf.budget_reached()}

    details = await engine.run(
        META, workflow, None, interaction=AUTONOMOUS, repo=None, budget=budget
    )
    return details


async def test_calls_side_by_side_hold_their_estimates_so_one_fits(
    runtime_for: RuntimeFactory, fake: FakeLLM, tmp_path: Path
) -> None:
    fake.respond_with(lambda body: text("done"))
    engine = Engine(runtime_for(), data_dir=tmp_path)
    # About 360 tokens each (the system prompt and this prompt): room for one, not two.
    budget = RunBudget(BudgetLimits(max_tokens=500))
    details = await run(engine, budget, [f"Question {n}: say hello." for n in range(3)])
    assert len(fake.bodies) == 1
    errors = details.result["errors"]
    assert errors.count(None) == 1
    assert all(e.startswith("budget reached: the run's 500 tokens") for e in errors if e)
    assert details.budget_reached == details.result["reached"] and budget.refused == 2
    assert 0 < details.usage["total"] <= 500


async def test_the_engine_refuses_a_call_whose_prompt_alone_is_over(
    runtime_for: RuntimeFactory, fake: FakeLLM, tmp_path: Path
) -> None:
    engine = Engine(runtime_for(), data_dir=tmp_path)
    budget = RunBudget(BudgetLimits(max_tokens=500))
    details = await run(engine, budget, ["x" * 4000])
    assert fake.bodies == []
    (agent,) = details.agents
    assert agent.ledger == "rejected" and agent.state == "error"
    assert str(agent.error).startswith("budget reached: the run's 500 tokens (used 0; the next")


async def test_without_a_budget_nothing_is_refused(
    runtime_for: RuntimeFactory, fake: FakeLLM, tmp_path: Path
) -> None:
    fake.respond_with(lambda body: text("done"))
    engine = Engine(runtime_for(), data_dir=tmp_path)
    details = await engine.run(
        META,
        lambda wf, args: wf.agent("x" * 4000, agent_type="explorer"),
        None,
        interaction=AUTONOMOUS,
        repo=None,
    )
    assert len(fake.bodies) == 1 and details.budget_reached is None
