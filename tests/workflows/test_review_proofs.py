"""The review workflow's "Prove" phase on the real engine with a scripted runner: which
findings `review.prove_severity` and `review.max_proofs` choose, and a proof reused."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from bot.engine.engine import Engine
from bot.engine.types import AgentInvocation
from bot.workflows.review import workflow as review
from bot.workflows.review.proofs import Fix, ProofReport
from bot.workflows.schemas import ReviewFinding
from policies.proofs import proof_key
from tests.engine.scripted import POLICY, Script, ScriptedRunner
from tests.workflows.test_review_workflow import ACCEPTED, FINDING, args, unit

pytestmark = pytest.mark.anyio

SEVERITIES = {"a.py": "critical", "b.py": "high", "c.py": "medium"}


def rule(call: AgentInvocation) -> Script | None:
    if call.label.startswith("review "):
        path = {"u1": "a.py", "u2": "b.py", "u3": "c.py"}[call.label.split()[-1]]
        found = {**FINDING, "path": path, "severity": SEVERITIES[path]}
        return Script(structured={"findings": [found]})
    if call.label.startswith("verify "):
        return Script(structured={"verdicts": [{"index": 0, "keep": True}], "acceptance": ACCEPTED})
    if call.label == "summarize":
        return Script(structured={"summary": "Findings."})
    return None


async def proved(tmp_path: Path, **prove: Any) -> tuple[dict[str, Any], list[str]]:
    units = [unit(1, "a.py"), unit(2, "b.py"), unit(3, "c.py")]
    settings = {"command": "python3 -m unittest {tests}", "head": "h" * 40, **prove}
    ran: list[str] = []

    async def run_test(commit: str, test_path: str, fix: Fix | None) -> ProofReport:
        ran.append(commit)
        return ProofReport(problem="not expected")

    flow = functools.partial(review.workflow, run_test=run_test)
    details = await Engine(ScriptedRunner(rule=rule), data_dir=tmp_path).run(
        review.meta, flow, args(units, prove=settings), interaction=POLICY, repo=None
    )
    assert details.status == "completed"
    assert ran == []  # no test was committed, so none ran
    by_path = {f["path"]: f.get("proof") for f in details.result["review"]["findings"]}
    return by_path, [a.label for a in details.agents]


async def test_max_proofs_takes_the_most_severe(tmp_path: Path) -> None:
    by_path, labels = await proved(tmp_path, severity="medium", max=2)
    # No repository here, so the provers' worktrees fail: tried, but no test was written.
    assert by_path["a.py"]["reason"] == "no test was written for this finding"
    assert by_path["b.py"]["reason"] == "no test was written for this finding"
    assert by_path["c.py"] == {
        "status": "not_tried",
        "reason": "past `review.max_proofs` (2) proofs per review",
    }
    assert sum(1 for label in labels if label.startswith("prove ")) == 2


async def test_prove_severity_leaves_out_the_less_severe(tmp_path: Path) -> None:
    by_path, labels = await proved(tmp_path, severity="critical", max=5)
    assert by_path["a.py"]["status"] == "not_tried"
    assert by_path["b.py"] is None and by_path["c.py"] is None
    assert [label for label in labels if label.startswith("prove ")] == ["prove a.py:3"]


async def test_no_test_command_proves_nothing(tmp_path: Path) -> None:
    by_path, labels = await proved(tmp_path, command=None, severity="high", max=5)
    assert "review.test_command" in by_path["a.py"]["reason"] and by_path["c.py"] is None
    assert not any(label.startswith("prove ") for label in labels)


async def test_a_proof_of_the_same_inputs_is_reused(tmp_path: Path) -> None:
    finding = ReviewFinding.model_validate({**FINDING, "severity": "critical"})
    key = proof_key(
        head="h" * 40,
        finding=finding.model_dump(exclude_none=True),
        test_command="python3 -m unittest {tests}",
    )
    earlier = {"status": "reproduced", "reason": "ZeroDivisionError", "test": "t.py::t"}
    by_path, labels = await proved(tmp_path, severity="critical", max=5, proved={key: earlier})
    assert by_path["a.py"] == {**earlier, "key": key}
    assert not any(label.startswith("prove ") for label in labels)
