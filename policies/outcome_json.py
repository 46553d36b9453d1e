"""An Outcome as plain JSON and back, for the run record (so a retry can republish it)."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from policies.outcome import (
    AskedRisk,
    Blocked,
    Finding,
    NeedsInfo,
    Outcome,
    OutcomeStatus,
    UsageSummary,
    describe_validation_error,
)


def outcome_to_json(outcome: Outcome) -> dict[str, object]:
    """The outcome as plain JSON (stored on the run record; read back by `outcome_from_json`)."""
    usage = outcome.usage
    data: dict[str, object] = {
        "status": outcome.status,
        "summary": outcome.summary,
        "run_id": outcome.run_id,
        "workflow": outcome.workflow,
        "assumptions": list(outcome.assumptions),
        "usage": {
            "input": usage.input_tokens,
            "output": usage.output_tokens,
            "total": usage.total_tokens,
            "cache_read": usage.cached_tokens,
            "cost": usage.cost,
            "wall_seconds": round(usage.wall_seconds, 3),
            "agents_ok": usage.agents_ok,
            "agents_failed": usage.agents_failed,
            "agents_replayed": usage.agents_replayed,
        },
        "error": outcome.error,
        "branches": list(outcome.branches),
        "note": outcome.note,
        "findings": [
            {
                "path": f.path,
                "line": f.line,
                "severity": f.severity,
                "title": f.title,
                "body": f.body,
                "fingerprint": f.fingerprint,
            }
            for f in outcome.findings
        ],
    }
    if outcome.blocked is not None:
        b = outcome.blocked
        blocked: dict[str, object] = {
            "decision": b.decision,
            "why": b.why,
            "options": list(b.options),
            "default": b.default,
            "risk": b.risk,
            "answer": b.answer,
            "answer_own": b.answer_own,
        }
        if b.risks:
            blocked["risks"] = [{"kind": r.kind, "action": r.action} for r in b.risks]
            blocked["approving"] = list(b.approving)
        data["blocked"] = blocked
    if outcome.needs_info is not None:
        n = outcome.needs_info
        data["needs_info"] = {
            "questions": list(n.questions),
            "reporter": n.reporter,
            "rerun_on_reply": n.rerun_on_reply,
        }
    if outcome.labels:
        data["labels"] = list(outcome.labels)
    if outcome.notes:
        data["notes"] = list(outcome.notes)
    return data


class _StoredUsage(BaseModel):
    input: int = 0
    output: int = 0
    total: int = 0
    cache_read: int = 0
    cost: float | None = None
    wall_seconds: float = 0.0
    agents_ok: int = 0
    agents_failed: int = 0
    agents_replayed: int = 0


class _StoredRisk(BaseModel):
    kind: str
    action: str


class _StoredBlocked(BaseModel):
    decision: str
    why: str = ""
    options: list[str] = Field(default_factory=list)
    default: str = ""
    risk: str = ""
    answer: str = ""
    answer_own: str = ""
    risks: list[_StoredRisk] = Field(default_factory=list)
    approving: list[str] = Field(default_factory=list)


class _StoredNeedsInfo(BaseModel):
    questions: list[str] = Field(default_factory=list)
    reporter: str | None = None
    rerun_on_reply: bool = False


class _StoredFinding(BaseModel):
    path: str = ""
    line: int | None = None
    severity: str = "medium"
    title: str
    body: str = ""
    fingerprint: str = ""


class _StoredOutcome(BaseModel):
    model_config = ConfigDict(extra="ignore")

    status: OutcomeStatus
    summary: str
    run_id: str
    workflow: str
    assumptions: list[str] = Field(default_factory=list)
    usage: _StoredUsage = Field(default_factory=_StoredUsage)
    error: str | None = None
    branches: list[str] = Field(default_factory=list)
    findings: list[_StoredFinding] = Field(default_factory=list)
    blocked: _StoredBlocked | None = None
    needs_info: _StoredNeedsInfo | None = None
    labels: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    note: str = ""


def outcome_from_json(data: Mapping[str, object]) -> Outcome:
    """Read back `outcome_to_json`; raises ValueError when `data` is not such an object."""
    try:
        stored = _StoredOutcome.model_validate(dict(data))
    except ValidationError as exc:
        raise ValueError(f"not a stored outcome: {describe_validation_error(exc)}") from None
    u = stored.usage
    b = stored.blocked
    n = stored.needs_info
    return Outcome(
        status=stored.status,
        summary=stored.summary,
        run_id=stored.run_id,
        workflow=stored.workflow,
        assumptions=tuple(stored.assumptions),
        usage=UsageSummary(
            input_tokens=u.input,
            output_tokens=u.output,
            total_tokens=u.total,
            cached_tokens=u.cache_read,
            cost=u.cost,
            wall_seconds=u.wall_seconds,
            agents_ok=u.agents_ok,
            agents_failed=u.agents_failed,
            agents_replayed=u.agents_replayed,
        ),
        blocked=None
        if b is None
        else Blocked(
            b.decision,
            b.why,
            tuple(b.options),
            b.default,
            b.risk,
            b.answer,
            b.answer_own,
            risks=tuple(AskedRisk(r.kind, r.action) for r in b.risks),
            approving=tuple(b.approving),
        ),
        findings=tuple(
            Finding(f.path, f.line, f.severity, f.title, f.body, f.fingerprint)
            for f in stored.findings
        ),
        branches=tuple(stored.branches),
        error=stored.error,
        needs_info=None
        if n is None
        else NeedsInfo(tuple(n.questions), n.reporter, n.rerun_on_reply),
        labels=tuple(stored.labels),
        notes=tuple(stored.notes),
        note=stored.note,
    )
