"""A store filled for the operator page's tests and bench: deliveries, runs, usage, artifacts."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from bot.engine.details import AgentDetails, RunDetails
from bot.store.contract import Storage
from tests.backends import execute, insert_delivery

PLANTED_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
"""A GitHub token's shape: redaction must hide it wherever it is planted."""
HOSTILE = (
    "<script>alert('x')</script> "
    '<img src="https://evil.invalid/x.png" onerror="alert(1)"> '
    "[click me](javascript:alert(2)) "
    f"token {PLANTED_TOKEN}"
)
"""Text that would run, fetch or leak something if the page did not escape and redact it."""


def put_artifact(store: Storage, run_id: str, name: str, text: str) -> None:
    store.put_artifact(run_id, name, text)


def record_usage(
    store: Storage,
    run_id: str,
    *,
    input_tokens: int,
    output_tokens: int,
    cost: float | None,
    finished_at: float,
) -> None:
    store.record_run_usage(
        run_id,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cost=cost,
        finished_at=finished_at,
    )


def payload(repo: str, *, number: int = 1, body: str = "It breaks.") -> dict[str, Any]:
    owner = repo.split("/")[0]
    return {
        "action": "opened",
        "issue": {"number": number, "title": f"Issue {number}", "body": body},
        "repository": {"full_name": repo, "name": repo.split("/")[1], "owner": {"login": owner}},
        "sender": {"login": "someone"},
        "installation": {"id": 1},
    }


def add_delivery(
    store: Storage,
    guid: str,
    *,
    received_at: float,
    repo: str = "octo/app",
    event: str = "issues",
    action: str = "opened",
    body: dict[str, Any] | None = None,
    decision: str | None = None,
    reason: str | None = None,
    workflow: str | None = None,
) -> None:
    data = body if body is not None else payload(repo)
    insert_delivery(
        store,
        guid,
        received_at,
        event=event,
        action=action,
        body=json.dumps(data).encode(),
    )
    headers = {
        "x-github-event": event,
        "x-github-delivery": guid,
        "user-agent": "GitHub-Hookshot/abc",
        # Never stored by the intake; planted to check that the page would not show it.
        "x-hub-signature-256": "sha256=" + "f" * 64,
    }
    execute(store, "UPDATE deliveries SET headers = ? WHERE guid = ?", json.dumps(headers), guid)
    if decision is not None:
        store.record_decision(guid, decision, reason=reason, workflow=workflow)


def add_run(
    store: Storage,
    delivery_id: str,
    *,
    repo: str = "octo/app",
    number: int = 1,
    workflow: str = "triage",
    status: str = "succeeded",
    created_at: float,
    target_kind: str = "issue",
) -> str:
    run = store.create_run(
        delivery_id=delivery_id,
        repo=repo,
        target_kind=target_kind,
        number=number,
        workflow=workflow,
        mode="webhook",
        status=status,
    )
    execute(store, "UPDATE runs SET created_at = ? WHERE id = ?", created_at, run.id)
    return run.id


@dataclass
class Call:
    label: str
    start: float | None
    end: float | None
    state: str = "done"
    phase: str | None = "Explore"
    replayed: bool = False
    usage: dict[str, Any] = field(default_factory=dict)


def details(
    run_id: str,
    calls: list[Call],
    *,
    status: str = "completed",
    phases: tuple[str, ...] = ("Explore", "Report"),
    started_at: float = 1000.0,
    finished_at: float | None = None,
    current_phase: str | None = None,
) -> str:
    """workflow.json as the engine writes it."""
    run = RunDetails(
        run_id=run_id,
        name="triage",
        status=status,  # type: ignore[arg-type]
        phases=[{"title": p, "detail": ""} for p in phases],
        current_phase=current_phase,
        started_at=started_at,
        finished_at=finished_at,
        agents=[
            AgentDetails(
                index=i,
                label=c.label,
                phase=c.phase,
                agent_type="explorer",
                state=c.state,  # type: ignore[arg-type]
                replayed=c.replayed,
                started_at=c.start,
                finished_at=c.end,
                usage=c.usage,
                model="model-a",
            )
            for i, c in enumerate(calls)
        ],
    )
    return json.dumps(run.to_json())


def transcript_entry(
    label: str, *, text: str = "Looked around.", tool_result: str = "ok"
) -> dict[str, Any]:
    return {
        "label": label,
        "ok": True,
        "output": text,
        "structured": {"summary": text, "labels": ["bug"]},
        "acceptance": {"status": "accepted", "problems": [], "criteria": ["has a summary"]},
        "ref": None,
        "error": None,
        "commits": [],
        "branch": None,
        "transcript": [
            {"role": "user", "content": f"Prompt for {label}: {text}", "model": "model-a"},
            {
                "role": "assistant",
                "content": f"Thinking about {text}",
                "tool_calls": [
                    {"name": "read_file", "arguments": json.dumps({"path": "README.md"})}
                ],
            },
            {"role": "tool", "name": "read_file", "content": tool_result},
            {"role": "assistant", "content": text},
        ],
    }


def history(store: Storage, now: float, days: int = 20) -> float:
    """Finished runs on each of the `days` days before `now`, of three workflows in three
    repositories, with made-up but varied usage; their total cost."""
    total = 0.0
    flows = (("triage", "octo/app", 0.05), ("review", "octo/lib", 0.4), ("fix", "octo/site", 1.1))
    for day in range(1, days + 1):
        for n, (workflow, repo, price) in enumerate(flows):
            if (day + n) % 3 == 0:
                continue
            guid = f"h-{day}-{n}"
            at = now - day * 86400 + n * 60
            add_delivery(
                store, guid, received_at=at, repo=repo, decision="trigger", workflow=workflow
            )
            run = add_run(store, guid, repo=repo, workflow=workflow, created_at=at)
            cost = round(price * (1 + (day * 7 + n * 3) % 5), 4)
            tokens = int(cost * 40_000)
            store.update_run(run, status="succeeded")
            record_usage(
                store,
                run,
                input_tokens=tokens - tokens // 8,
                output_tokens=tokens // 8,
                cost=cost,
                finished_at=at + 90,
            )
            total += cost
    return total
