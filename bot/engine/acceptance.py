"""Acceptance ledger: validate a criteria contract, compose it into the schema, judge the answer."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any, Literal

ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MAX_CRITERIA = 32
LedgerStatus = Literal["accepted", "rejected", "missing", "malformed"]


class ContractError(ValueError):
    """The acceptance contract itself is invalid; the call fails before any agent runs."""


@dataclass(frozen=True, slots=True)
class Criterion:
    """One acceptance criterion the agent must rule on with evidence."""

    id: str
    description: str
    required_evidence: str | None = None


@dataclass(frozen=True, slots=True)
class Contract:
    """A validated acceptance contract."""

    criteria: tuple[Criterion, ...]

    @property
    def ids(self) -> list[str]:
        return [c.id for c in self.criteria]

    def as_dict(self) -> dict[str, Any]:
        return {
            "criteria": [
                {"id": c.id, "description": c.description}
                | ({"requiredEvidence": c.required_evidence} if c.required_evidence else {})
                for c in self.criteria
            ]
        }


def parse_contract(raw: object) -> Contract | None:
    """Validate `{criteria: [{id, description, requiredEvidence?}]}`; None stays None."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) != {"criteria"}:
        raise ContractError("acceptance must be an object with exactly one key, `criteria`")
    items = raw["criteria"]
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_CRITERIA:
        raise ContractError(f"acceptance.criteria must be a list of 1 to {MAX_CRITERIA} criteria")
    seen: set[str] = set()
    criteria: list[Criterion] = []
    for n, item in enumerate(items):
        where = f"acceptance.criteria[{n}]"
        if not isinstance(item, dict):
            raise ContractError(f"{where} must be an object")
        unknown = set(item) - {"id", "description", "requiredEvidence", "required_evidence"}
        if unknown:
            raise ContractError(f"{where} has unknown key(s): {', '.join(sorted(unknown))}")
        cid = item.get("id")
        if not isinstance(cid, str) or not ID_PATTERN.match(cid):
            raise ContractError(f"{where}.id must match {ID_PATTERN.pattern}")
        if cid in seen:
            raise ContractError(f"{where}.id {cid!r} is a duplicate")
        seen.add(cid)
        desc = item.get("description")
        if not isinstance(desc, str) or not desc.strip():
            raise ContractError(f"{where}.description must be a non-empty string")
        evidence = item.get("requiredEvidence", item.get("required_evidence"))
        if evidence is not None and (not isinstance(evidence, str) or not evidence.strip()):
            raise ContractError(f"{where}.requiredEvidence must be a non-empty string if given")
        criteria.append(Criterion(cid, desc.strip(), evidence))
    return Contract(tuple(criteria))


def _ledger_schema(contract: Contract) -> dict[str, Any]:
    entry = {
        "type": "object",
        "properties": {
            "id": {"type": "string", "enum": contract.ids},
            "status": {"type": "string", "enum": ["accepted", "rejected"]},
            "evidence": {"type": "array", "items": {"type": "string"}},
            "note": {"type": "string"},
        },
        "required": ["id", "status", "evidence", "note"],
    }
    return {
        "type": "object",
        "properties": {"criteria": {"type": "array", "items": entry}},
        "required": ["criteria"],
    }


def compose_schema(
    schema: dict[str, Any] | None, contract: Contract | None
) -> dict[str, Any] | None:
    """The schema the agent must satisfy: the caller's, plus an `acceptance` ledger property."""
    if contract is None:
        return schema
    if schema is None:
        return {
            "type": "object",
            "properties": {"acceptance": _ledger_schema(contract)},
            "required": ["acceptance"],
        }
    if schema.get("type") != "object":
        raise ContractError("acceptance needs an object schema (or no schema at all)")
    props = schema.get("properties", {})
    if not isinstance(props, dict) or "acceptance" in props:
        raise ContractError("the schema already defines `acceptance`; rename that property")
    composed = copy.deepcopy(schema)
    composed["properties"] = {**props, "acceptance": _ledger_schema(contract)}
    required = list(composed.get("required", []))
    composed["required"] = [*required, "acceptance"]
    return composed


def contract_instructions(contract: Contract) -> str:
    """Prompt text telling the agent what the ledger must contain."""
    lines = [
        "",
        "Acceptance criteria: in your structured result, fill `acceptance.criteria` with one "
        "entry per criterion below: its id, status `accepted` or `rejected`, the evidence you "
        "checked (for example path:line), and a short note.",
    ]
    for c in contract.criteria:
        extra = f" (evidence required: {c.required_evidence})" if c.required_evidence else ""
        lines.append(f"- {c.id}: {c.description}{extra}")
    return "\n".join(lines)


def evaluate(structured: object, contract: Contract) -> dict[str, Any]:
    """The ledger: `{status, criteria, problems}` with status accepted|rejected|missing|malformed."""
    problems: list[str] = []
    ledger = structured.get("acceptance") if isinstance(structured, dict) else None
    if ledger is None:
        return {"status": "missing", "criteria": [], "problems": ["no acceptance ledger"]}
    entries = ledger.get("criteria") if isinstance(ledger, dict) else None
    if not isinstance(entries, list):
        return {"status": "malformed", "criteria": [], "problems": ["criteria is not a list"]}
    wanted = {c.id: c for c in contract.criteria}
    seen: dict[str, dict[str, Any]] = {}
    malformed = False
    for n, entry in enumerate(entries):
        if not isinstance(entry, dict):
            problems.append(f"entry {n} is not an object")
            malformed = True
            continue
        cid, status, evidence = entry.get("id"), entry.get("status"), entry.get("evidence", [])
        note = entry.get("note", "")
        if cid not in wanted or cid in seen:
            problems.append(f"entry {n}: unknown or repeated id {cid!r}")
            malformed = True
            continue
        ok_evidence = isinstance(evidence, list) and all(isinstance(e, str) for e in evidence)
        if status not in ("accepted", "rejected") or not ok_evidence or not isinstance(note, str):
            problems.append(f"entry {n} ({cid}): bad status, evidence or note")
            malformed = True
            continue
        if status == "accepted" and wanted[str(cid)].required_evidence and not evidence:
            problems.append(f"{cid}: accepted without the required evidence")
            status = "rejected"
        seen[str(cid)] = {"id": cid, "status": status, "evidence": evidence, "note": note}
    criteria = list(seen.values())
    missing = [cid for cid in wanted if cid not in seen]
    if malformed:
        status_out: LedgerStatus = "malformed"
    elif missing:
        problems.append("no verdict for: " + ", ".join(missing))
        status_out = "missing"
    elif any(c["status"] == "rejected" for c in criteria):
        status_out = "rejected"
    else:
        status_out = "accepted"
    return {"status": status_out, "criteria": criteria, "problems": problems}
