"""Tests for the triage and ask workflows, run on the real engine with a scripted runner."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.engine.engine import Engine
from bot.engine.types import AgentInvocation, RunnerResult, Usage
from bot.workflows import MODEL_FREE, WORKFLOWS, get_workflow
from bot.workflows.ask import ask_result
from bot.workflows.schemas import AskAnswer, TriageVerdict
from bot.workflows.triage import BUG_QUESTIONS, FEATURE_QUESTIONS, REPLY_NOTE, triage_result
from policies.interaction import resolve_run_interaction_policy
from policies.outcome import RunFacts, outcome_from_run

WEBHOOK = resolve_run_interaction_policy({"context": {"channel_name": "github"}})
FENCE = "0123456789abcdef"
CONTEXT = f'<untrusted-data fence="{FENCE}" source="issue #7">\nIt crashes.\n</untrusted-data fence="{FENCE}">'
EXPLORER = {
    "findings": "The crash is in `src/app.py:3`.",
    "references": [{"path": "src/app.py", "line": 3}],
}
VERDICT = {
    "actionable": True,
    "kind": "bug",
    "summary": "Start-up crashes when the config is missing.",
    "labels": ["Bug", "made-up"],
    "areas": [{"path": "src/app.py", "line": 3, "note": "reads the config"}],
    "assumptions": ["The default config path is used"],
}
BLOCKED = {
    "decision": "Which version shows the crash?",
    "why": "The start-up code changed in 2.0.",
    "options": ["1.x", "2.x"],
    "default": "2.x",
    "risk": "A fix for the wrong version.",
}

Script = Callable[[AgentInvocation], RunnerResult]


class ScriptedRunner:
    """Answers each agent by its label; records every invocation."""

    def __init__(self, replies: dict[str, RunnerResult]) -> None:
        self.replies = replies
        self.calls: list[AgentInvocation] = []

    async def run(self, call: AgentInvocation) -> RunnerResult:
        self.calls.append(call)
        return self.replies.get(call.label, RunnerResult(error=f"no script for {call.label}"))


def ok(structured: Any) -> RunnerResult:
    return RunnerResult(output="done", structured=structured, usage=Usage(input=100, output=20))


async def run(name: str, runner: ScriptedRunner, tmp_path: Path, **args: Any) -> Any:
    meta, fn = WORKFLOWS[name]
    engine = Engine(runner, data_dir=tmp_path)
    full = {"target": "issue #7", "kind": "issue", "fence": FENCE, "context": CONTEXT, **args}
    return await engine.run(meta, fn, full, interaction=WEBHOOK, repo=None)


def test_registry() -> None:
    assert set(WORKFLOWS) == {"triage", "ask"}
    # Reviews have a path of their own in the executor (bot.workflows.review.flow).
    assert get_workflow("review") is None
    assert {
        "help",
        "status",
        "stop",
        "pause",
        "resume",
        "learn",
        "learnings",
        "forget",
    } == MODEL_FREE
    for name, (meta, _) in WORKFLOWS.items():
        assert meta.name == name
        assert len(meta.phases) == 2


@pytest.mark.anyio
async def test_triage_actionable(tmp_path: Path) -> None:
    runner = ScriptedRunner({"explore": ok(EXPLORER), "conclude": ok(VERDICT)})
    details = await run("triage", runner, tmp_path, repo_labels=["bug", "docs"])
    assert details.status == "completed"
    assert [c.label for c in runner.calls] == ["explore", "conclude"]
    assert [c.agent_type.name for c in runner.calls] == ["explorer", "advisor"]
    explore, conclude = runner.calls
    assert explore.prompt.startswith("You are triaging issue #7")
    assert CONTEXT in explore.prompt
    assert 'choose only from the repository\'s labels: "bug", "docs"' in conclude.prompt
    assert "The crash is in `src/app.py:3`." in conclude.prompt  # the explorer's report handed on
    result = details.result
    assert "**Suggested labels:** `bug`" in result["summary"]
    assert "made-up" not in result["summary"]
    assert "- `src/app.py:3`: reads the config" in result["summary"]
    assert "blocked" not in result
    facts = RunFacts(run_id=details.run_id, workflow="triage", status=details.status)
    assert outcome_from_run(result, facts, app_slug="app").status == "succeeded"


@pytest.mark.anyio
async def test_triage_blocked_only_for_a_high_risk_decision(tmp_path: Path) -> None:
    verdict = {**VERDICT, "actionable": False, "questions": ["Which OS?"], "blocked": BLOCKED}
    runner = ScriptedRunner({"explore": ok(EXPLORER), "conclude": ok(verdict)})
    details = await run("triage", runner, tmp_path)
    conclude = runner.calls[1].prompt
    assert "Missing information is never a reason to stop" in conclude
    assert (
        "Fill `blocked` only\nfor a decision a maintainer must make that is high-risk" in conclude
    )
    facts = RunFacts(run_id=details.run_id, workflow="triage", status=details.status)
    outcome = outcome_from_run(details.result, facts, app_slug="app")
    assert outcome.status == "blocked"
    assert outcome.blocked is not None and outcome.needs_info is None
    assert outcome.blocked.decision == "Which version shows the crash?"
    assert outcome.blocked.options == ("1.x", "2.x")
    assert outcome.blocked.answer == "@app decide 2"


@pytest.mark.anyio
async def test_triage_lacking_information_asks_the_reporter(tmp_path: Path) -> None:
    questions = ["Which command fails?", " ", "What does it print?", "Which OS?", "Which shell?"]
    verdict = {**VERDICT, "actionable": False, "questions": questions}
    runner = ScriptedRunner({"explore": ok(EXPLORER), "conclude": ok(verdict)})
    details = await run("triage", runner, tmp_path, repo_labels=["bug"])
    result = details.result
    assert result["status"] == "needs_info"
    assert result["questions"] == ["Which command fails?", "What does it print?", "Which OS?"]
    assert result["labels"] == ["bug"]
    assert "blocked" not in result
    facts = RunFacts(run_id=details.run_id, workflow="triage", status=details.status)
    outcome = outcome_from_run(result, facts, app_slug="app", reporter="alice")
    assert outcome.status == "needs_info"
    assert outcome.needs_info is not None
    assert outcome.needs_info.reporter == "alice"
    assert outcome.labels == ("bug",)
    assert outcome.summary.startswith("Start-up crashes")


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        pytest.param("bug", BUG_QUESTIONS, id="bug"),
        pytest.param("other", BUG_QUESTIONS, id="other"),
        pytest.param("feature", FEATURE_QUESTIONS, id="feature"),
    ],
)
def test_not_actionable_without_questions_gets_the_usual_ones(
    kind: str, expected: tuple[str, ...]
) -> None:
    verdict = TriageVerdict.model_validate({**VERDICT, "kind": kind, "actionable": False})
    result = triage_result(verdict, None)
    assert result["status"] == "needs_info"
    assert result["questions"] == list(expected)
    assert "blocked" not in result
    assert "`Bug`, `made-up`" in result["summary"]


def test_the_usual_questions_ask_for_steps_behaviour_and_version() -> None:
    assert "steps to reproduce" in BUG_QUESTIONS[0]
    assert "expect" in BUG_QUESTIONS[1] and "instead" in BUG_QUESTIONS[1]
    assert "version" in BUG_QUESTIONS[2]
    assert "version" in FEATURE_QUESTIONS[2]


def test_questions_on_an_actionable_issue_are_listed_without_waiting() -> None:
    verdict = TriageVerdict.model_validate({**VERDICT, "questions": ["Does 1.x crash too?"]})
    result = triage_result(verdict, ["bug"])
    assert "status" not in result and "questions" not in result
    assert "**Open questions:**\n- Does 1.x crash too?" in result["summary"]
    assert result["labels"] == ["bug"]


@pytest.mark.anyio
async def test_a_reporter_reply_tells_both_agents_to_read_the_answers(tmp_path: Path) -> None:
    runner = ScriptedRunner({"explore": ok(EXPLORER), "conclude": ok(VERDICT)})
    await run("triage", runner, tmp_path / "reply", reporter_reply=True)
    assert [REPLY_NOTE in c.prompt for c in runner.calls] == [True, True]
    first = ScriptedRunner({"explore": ok(EXPLORER), "conclude": ok(VERDICT)})
    await run("triage", first, tmp_path / "first", reporter_reply=False)
    assert [REPLY_NOTE in c.prompt for c in first.calls] == [False, False]


@pytest.mark.anyio
async def test_triage_goes_on_when_exploration_fails(tmp_path: Path) -> None:
    runner = ScriptedRunner({"explore": RunnerResult(error="model down"), "conclude": ok(VERDICT)})
    details = await run("triage", runner, tmp_path)
    assert "The exploration failed; work from the issue text alone." in runner.calls[1].prompt
    assert "exploration failed: model down" in details.logs[0]
    assert "Start-up crashes" in details.result["summary"]


@pytest.mark.anyio
async def test_triage_fails_when_it_cannot_conclude(tmp_path: Path) -> None:
    runner = ScriptedRunner({"explore": ok(EXPLORER), "conclude": RunnerResult(error="model down")})
    details = await run("triage", runner, tmp_path)
    assert details.result["status"] == "failed"
    assert "model down" in details.result["summary"]


@pytest.mark.anyio
async def test_triage_conclusion_that_breaks_the_schema_fails_the_run(tmp_path: Path) -> None:
    runner = ScriptedRunner({"explore": ok(EXPLORER), "conclude": ok({"summary": "no verdict"})})
    details = await run("triage", runner, tmp_path)
    assert details.result["status"] == "failed"
    assert "does not match the schema" in details.result["summary"]


@pytest.mark.anyio
async def test_ask_on_an_issue_uses_one_explorer(tmp_path: Path) -> None:
    answer = {
        "answer": "It reads `config.yml` at `src/app.py:3`.",
        "references": [{"path": "src/app.py", "line": 3}],
    }
    runner = ScriptedRunner({"explore": ok(EXPLORER), "answer": ok(answer)})
    details = await run("ask", runner, tmp_path, question="Where is the config read?")
    assert [c.label for c in runner.calls] == ["explore", "answer"]
    assert "    Where is the config read?" in runner.calls[0].prompt
    assert details.result["summary"].startswith("It reads `config.yml`")
    assert "**References:**\n- `src/app.py:3`" in details.result["summary"]


@pytest.mark.anyio
async def test_ask_on_a_pull_request_adds_a_reviewer_of_the_change(tmp_path: Path) -> None:
    answer = {"answer": "Yes.", "blocked": BLOCKED}
    runner = ScriptedRunner(
        {"explore": ok(EXPLORER), "review-change": ok(EXPLORER), "answer": ok(answer)}
    )
    details = await run("ask", runner, tmp_path, kind="pull_request", question="Is it safe?")
    assert sorted(c.label for c in runner.calls[:2]) == ["explore", "review-change"]
    assert runner.calls[2].label == "answer"
    assert details.result["blocked"]["decision"] == BLOCKED["decision"]


@pytest.mark.anyio
async def test_ask_without_reports_says_so(tmp_path: Path) -> None:
    runner = ScriptedRunner({"answer": ok({"answer": "From the issue alone: no."})})
    details = await run("ask", runner, tmp_path, question="Q?")
    assert "No explorer report is available" in runner.calls[-1].prompt
    assert details.result["summary"] == "From the issue alone: no."


def test_ask_result_keeps_assumptions() -> None:
    answer = AskAnswer.model_validate({"answer": "A", "assumptions": ["x"]})
    assert ask_result(answer) == {"summary": "A", "assumptions": ["x"]}
