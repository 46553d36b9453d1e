"""Acceptance ledger and structured output: statuses, bad contracts, schema failures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from bot.engine import Engine, RunDetails, WorkflowMeta
from bot.engine.acceptance import ContractError, compose_schema, parse_contract
from bot.engine.workflow import Workflow
from tests.engine.scripted import POLICY, Script, ScriptedRunner

CONTRACT = {
    "criteria": [
        {"id": "tests-pass", "description": "The tests pass"},
        {"id": "no.regress", "description": "Nothing else breaks", "requiredEvidence": "a log"},
    ]
}


def ledger(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"summary": "s", "acceptance": {"criteria": list(entries)}}


def entry(cid: str, status: str = "accepted", evidence: list[str] | None = None) -> dict[str, Any]:
    return {
        "id": cid,
        "status": status,
        "evidence": ["x.py:3"] if evidence is None else evidence,
        "note": "checked",
    }


async def one_call(data_dir: Path, structured: Any, **kwargs: Any) -> tuple[RunDetails, Any]:
    runner = ScriptedRunner(default=Script(output="text kept", structured=structured))
    engine = Engine(runner, data_dir=data_dir)

    async def wf(wf: Workflow, args: Any) -> Any:
        return await wf.agent("check it", label="checker", **kwargs)

    details = await engine.run(WorkflowMeta("acc"), wf, None, interaction=POLICY, repo=None)
    return details, runner.calls[0] if runner.calls else None


SCHEMA = {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("structured", "status", "ok"),
    [
        pytest.param(
            ledger(entry("tests-pass"), entry("no.regress")), "accepted", True, id="accepted"
        ),
        pytest.param(
            ledger(entry("tests-pass"), entry("no.regress", "rejected")),
            "rejected",
            False,
            id="rejected",
        ),
        pytest.param(
            ledger(entry("tests-pass"), entry("no.regress", evidence=[])),
            "rejected",
            False,
            id="accepted-without-required-evidence",
        ),
        pytest.param(ledger(entry("tests-pass")), "missing", False, id="missing-one"),
        pytest.param({"summary": "s"}, "missing", False, id="missing-ledger"),
        pytest.param(
            ledger(entry("tests-pass"), entry("no.regress"), entry("other")),
            "malformed",
            False,
            id="unknown-id",
        ),
        pytest.param(
            ledger(entry("tests-pass"), entry("no.regress", "maybe")),
            "malformed",
            False,
            id="bad-status",
        ),
        pytest.param(
            {"summary": "s", "acceptance": {"criteria": "all good"}},
            "malformed",
            False,
            id="not-a-list",
        ),
    ],
)
async def test_acceptance_statuses_gate_ok_and_keep_output(
    data_dir: Path, structured: Any, status: str, ok: bool
) -> None:
    details, call = await one_call(data_dir, structured, schema=SCHEMA, acceptance=CONTRACT)
    result = details.result
    assert result["acceptance"]["status"] == status
    assert result["ok"] is ok
    assert result["output"] == "text kept" and result["structured"] == structured
    assert details.agents[0].acceptance is not None
    assert details.agents[0].acceptance["status"] == status
    # The agent was told the criteria and must return the ledger in its schema.
    assert "tests-pass" in call.prompt and "no.regress" in call.prompt
    assert "acceptance" in call.schema["required"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("contract", "message"),
    [
        pytest.param({"criteria": []}, "1 to 32", id="empty"),
        pytest.param({"criteria": [{"id": "a", "description": "d"}] * 2}, "duplicate", id="dup"),
        pytest.param({"criteria": [{"id": "-bad", "description": "d"}]}, "must match", id="id"),
        pytest.param({"criteria": [{"id": "a", "description": " "}]}, "description", id="desc"),
        pytest.param(
            {"criteria": [{"id": "a", "description": "d", "x": 1}]}, "unknown key", id="key"
        ),
        pytest.param({"rules": []}, "exactly one key", id="shape"),
        pytest.param(
            {"criteria": [{"id": f"c{i}", "description": "d"} for i in range(33)]},
            "1 to 32",
            id="too-many",
        ),
    ],
)
async def test_bad_contracts_fail_the_call_before_it_runs(
    data_dir: Path, contract: Any, message: str
) -> None:
    details, call = await one_call(data_dir, None, acceptance=contract)
    assert call is None
    assert details.result["ok"] is False and message in details.result["error"]
    assert details.agents[0].ledger == "rejected"


def test_contract_needs_an_object_schema_without_its_own_acceptance() -> None:
    contract = parse_contract(CONTRACT)
    with pytest.raises(ContractError, match="object schema"):
        compose_schema({"type": "array"}, contract)
    with pytest.raises(ContractError, match="already defines"):
        compose_schema({"type": "object", "properties": {"acceptance": {}}}, contract)
    bare = compose_schema(None, contract)
    assert bare is not None and bare["required"] == ["acceptance"]


@pytest.mark.anyio
async def test_schema_failure_keeps_output_and_structured(data_dir: Path) -> None:
    details, _ = await one_call(data_dir, {"summary": 42}, schema=SCHEMA)
    result = details.result
    assert result["ok"] is False
    assert "does not match the schema" in result["error"] and "summary" in result["error"]
    assert result["output"] == "text kept" and result["structured"] == {"summary": 42}


@pytest.mark.anyio
async def test_missing_structured_result_fails(data_dir: Path) -> None:
    details, _ = await one_call(data_dir, None, schema=SCHEMA)
    assert details.result["ok"] is False
    assert "without a structured result" in details.result["error"]


class Finding(BaseModel):
    path: str
    line: int


@pytest.mark.anyio
async def test_schema_may_be_a_pydantic_model(data_dir: Path) -> None:
    good, call = await one_call(data_dir, {"path": "a.py", "line": 3}, schema=Finding)
    assert good.result["ok"] is True and good.result["structured"] == {"path": "a.py", "line": 3}
    assert call.schema["required"] == ["path", "line"]
    bad, _ = await one_call(data_dir, {"path": "a.py", "line": "three"}, schema=Finding)
    assert bad.result["ok"] is False and "line" in bad.result["error"]
