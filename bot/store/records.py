"""What the store holds, as the rest of the bot sees it: deliveries, runs, their summaries."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

DECISIONS = ("trigger", "skip", "error", "pending")
"""What listings filter deliveries by: the decisions the worker records, and "pending" for a
delivery not decided yet."""

REPORTER_REPLY = "reporter_reply"
"""The decision reason of a delivery whose run is triage again after the reporter's reply."""


class StoreError(RuntimeError):
    """The database cannot be opened or has a schema this version does not know."""


class BodyMissing(StoreError):
    """A delivery's row is stored but its body cannot be read back from its segment file."""


@dataclass(frozen=True, slots=True)
class DeliveryRecord:
    """One stored delivery: the raw body and headers plus the decision once made."""

    guid: str
    event: str
    action: str | None
    hook_id: str | None
    target_type: str | None
    target_id: str | None
    received_at: float
    headers: dict[str, str]
    body: bytes
    decision: str | None = None
    reason: str | None = None
    workflow: str | None = None
    decided_at: float | None = None


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One workflow execution started by a delivery."""

    id: str
    delivery_id: str
    repo: str
    target_kind: str
    number: int
    workflow: str
    mode: str
    status: str
    created_at: float
    updated_at: float
    outcome: dict[str, object] | None = None
    args: dict[str, Any] | None = None
    """The workflow's arguments as given to the engine (None when not recorded)."""
    input_tokens: int | None = None
    """Model tokens the run's agent calls read (cache reads and writes included), once it ended."""
    output_tokens: int | None = None
    cost: float | None = None
    """What those tokens cost at the configured prices; None when no price is known."""
    finished_at: float | None = None

    def answers(self) -> str | None:
        """The id of the BLOCKED run this run answers (a `decide` follow-up), else None."""
        decision = (self.args or {}).get("decision")
        blocked = decision.get("blocked_run") if isinstance(decision, dict) else None
        return blocked if isinstance(blocked, str) else None


@dataclass(frozen=True, slots=True)
class DeliverySummary:
    """A delivery as `bot deliveries` shows it: its decision (on `delivery`, whose body is
    not read), its job and the runs it started."""

    delivery: DeliveryRecord
    job_status: str | None
    """queued, running, done, dead or cancelled; None when no job was made for it."""
    attempts: int
    max_attempts: int | None
    last_error: str | None
    runs: tuple[tuple[str, str], ...]
    """(run id, status) of each run the delivery started, oldest first."""


def repository_of(body: bytes) -> str | None:
    """The `repository.full_name` of a delivery's payload, when it has one."""
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        return None
    repo = payload.get("repository") if isinstance(payload, dict) else None
    name = repo.get("full_name") if isinstance(repo, dict) else None
    return name if isinstance(name, str) else None


def new_run_id() -> str:
    return "wf_" + secrets.token_hex(6)


def run_record(row: tuple[Any, ...]) -> RunRecord:
    return RunRecord(
        id=str(row[0]),
        delivery_id=str(row[1]),
        repo=str(row[2]),
        target_kind=str(row[3]),
        number=int(row[4]),
        workflow=str(row[5]),
        mode=str(row[6]),
        status=str(row[7]),
        created_at=float(row[8]),
        updated_at=float(row[9]),
        outcome=None if row[10] is None else json.loads(str(row[10])),
        args=json_object(row[11]),
        input_tokens=None if row[12] is None else int(row[12]),
        output_tokens=None if row[13] is None else int(row[13]),
        cost=None if row[14] is None else float(row[14]),
        finished_at=None if row[15] is None else float(row[15]),
    )


def delivery_record(row: tuple[Any, ...], body: bytes) -> DeliveryRecord:
    """The record for a row of DELIVERY_COLUMNS (the body is read by the backend)."""
    return DeliveryRecord(
        guid=str(row[0]),
        event=str(row[1]),
        action=optional_str(row[2]),
        hook_id=optional_str(row[3]),
        target_type=optional_str(row[4]),
        target_id=optional_str(row[5]),
        received_at=float(row[6]),
        headers=json.loads(str(row[7])),
        body=body,
        decision=optional_str(row[8]),
        reason=optional_str(row[9]),
        workflow=optional_str(row[10]),
        decided_at=None if row[11] is None else float(row[11]),
    )


def json_object(value: object) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        data = json.loads(str(value))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def optional_str(value: object) -> str | None:
    return None if value is None else str(value)


PUBLISHED_ARTIFACT = "published.json"
"""The run artifact naming what the run posted on GitHub (`{"comment_url": ...}`), written once
its outcome is there; the operator page links to it."""
