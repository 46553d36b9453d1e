"""A run as its page shows it, assembled from the store: the record, the details kept in
`workflow.json`, the published outcome, the timeline, and one agent call's transcript."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup

from bot.agents.toolspecs import STRUCTURED_OUTPUT
from bot.engine.details import AgentDetails, RunDetails
from bot.publish.render import render_outcome
from bot.store.contract import Storage
from bot.store.records import RunRecord
from bot.ui import queries
from bot.ui.svg import timeline_svg
from bot.ui.text import Redact, markdown, redact_values
from policies.outcome import OUTCOME_STATUSES
from policies.outcome_json import outcome_from_json
from policies.ui_queue import WorkerBeat, held_by_silent
from policies.ui_timeline import CallSpan, lay_out

_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_SUB = re.compile(r"</?sub>")  # the footer's only HTML; the page renders Markdown without HTML
_SUMMARY = re.compile(r"<details>\s*<summary>(.*?)</summary>", re.DOTALL)
"""A collapsed section the app wrote (`bot.publish.markdown_out.collapsible`): on the page its
title is a bold line and its content shown, as the page renders Markdown without HTML."""
TOOL_RESULT_CAP = 4000
"""Characters of one tool result shown before the rest is folded away."""


@dataclass(slots=True)
class PhaseRow:
    title: str
    detail: str
    agents: int
    done: int
    failed: int
    current: bool


@dataclass(slots=True)
class RunView:
    run: RunRecord
    details: RunDetails | None
    ended: bool
    stop_reason: str | None
    phases: list[PhaseRow] = field(default_factory=list)
    timeline: Markup = field(default_factory=Markup)
    published: Markup | None = None
    report: str | None = None
    silent_worker: WorkerBeat | None = None
    """The worker that holds the unfinished run and has stopped beating, if one does."""


def read_details(store: Storage, run_id: str) -> RunDetails | None:
    data = queries.artifact_json(store, run_id, "workflow.json")
    if not isinstance(data, dict):
        return None
    try:
        return RunDetails.from_json(data)
    except (TypeError, ValueError):
        return None


def _phases(details: RunDetails) -> list[PhaseRow]:
    rows: list[PhaseRow] = []
    for phase in details.phases:
        title = str(phase.get("title", ""))
        mine = [a for a in details.agents if a.phase == title]
        rows.append(
            PhaseRow(
                title=title,
                detail=str(phase.get("detail", "")),
                agents=len(mine),
                done=sum(1 for a in mine if a.state == "done"),
                failed=sum(1 for a in mine if a.state == "error"),
                current=details.status == "running" and details.current_phase == title,
            )
        )
    return rows


def spans(agents: list[AgentDetails]) -> list[CallSpan]:
    return [
        CallSpan(
            index=a.index,
            label=a.label,
            state=a.state,
            started_at=a.started_at,
            finished_at=a.finished_at,
            replayed=a.replayed,
            phase=a.phase,
        )
        for a in agents
    ]


def published(run: RunRecord, redact: Redact) -> Markup | None:
    """The run's outcome as it was posted to GitHub, rendered; None before there is one."""
    if not run.outcome:
        return None
    try:
        # Redacted before rendering too: rendering escapes Markdown, which splits a token's
        # shape (`ghp_x` becomes `ghp\\_x`).
        outcome = outcome_from_json(redact_values(run.outcome, redact))
    except ValueError:
        return None
    body = _SUB.sub("", _HTML_COMMENT.sub("", render_outcome(outcome, sticky=False)))
    body = _SUMMARY.sub(lambda m: f"**{m.group(1).strip()}**", body).replace("</details>", "")
    return markdown(body.strip(), redact)


def run_view(
    store: Storage,
    run: RunRecord,
    redact: Redact,
    *,
    now: float | None = None,
    live_only: bool = False,
) -> RunView:
    """The run's page; with `live_only`, only what its live part shows (no outcome, no
    report: the page asks for that part once a second)."""
    details = read_details(store, run.id)
    ended = run.status in OUTCOME_STATUSES
    view = RunView(run=run, details=details, ended=ended, stop_reason=store.stop_requested(run.id))
    if details is not None:
        ended = ended or details.finished
        view.ended = ended
        clock = now if now is not None else time.time()
        until = details.finished_at if details.finished and details.finished_at else clock
        view.phases = _phases(details)
        timeline = lay_out(spans(details.agents), until)
        view.timeline = timeline_svg(timeline, lambda index: f"/ui/runs/{run.id}/agents/{index}")
    if not view.ended:
        view.silent_worker = held_by_silent(store.worker_beats(), store.clock()).get(run.id)
    if not live_only:
        view.published = published(run, redact)
        view.report = store.get_artifact(run.id, "report.md")
    return view


@dataclass(slots=True)
class Turn:
    role: str
    content: str
    folded: str = ""
    """What is past the cap of a tool result, shown on demand."""
    name: str | None = None
    tool_calls: list[dict[str, str]] = field(default_factory=list)
    note: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    """The tools offered (name, description, parameters), on the system entry."""


def turns(entries: list[Any], *, structured_shown: bool = False) -> list[Turn]:
    """Transcript entries (`bot.agents.transcript`) as the page lists them. With
    `structured_shown` (the page shows the structured output on its own), the call that
    handed it in is listed without its arguments, so the output is shown once."""
    out: list[Turn] = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        if entry.get("role") == "system":
            offered = entry.get("tools")
            out.append(
                Turn(
                    role="system",
                    content=str(entry.get("content") or ""),
                    tools=[
                        {
                            "name": str(t.get("name", "")),
                            "description": str(t.get("description", "")),
                            "parameters": t.get("parameters"),
                        }
                        for t in (offered if isinstance(offered, list) else [])
                        if isinstance(t, dict)
                    ],
                )
            )
            continue
        if "role" not in entry:
            note = ", ".join(
                f"{k}: {v}" for k, v in entry.items() if not isinstance(v, dict | list)
            )
            out.append(Turn(role="note", content="", note=note[:2000]))
            continue
        content = str(entry.get("content") or "")
        folded = ""
        if entry["role"] == "tool" and len(content) > TOOL_RESULT_CAP:
            content, folded = content[:TOOL_RESULT_CAP], content[TOOL_RESULT_CAP:]
        calls = [
            {"name": str(c.get("name", "")), "arguments": str(c.get("arguments", ""))}
            for c in entry.get("tool_calls") or []
            if isinstance(c, dict)
        ]
        if structured_shown:
            for c in calls:
                if c["name"] == STRUCTURED_OUTPUT:
                    c.update(arguments="", below="yes")
        name = entry.get("name") or entry.get("model")
        out.append(
            Turn(
                role=str(entry["role"]),
                content=content,
                folded=folded,
                name=None if name is None else str(name),
                tool_calls=calls,
            )
        )
    return out


@dataclass(slots=True)
class AgentView:
    run: RunRecord
    agent: AgentDetails | None
    record: dict[str, Any] | None
    """The call's entry of transcripts.json (None until the run has ended)."""
    turns: list[Turn]
    handoff: dict[str, Any] | None


def agent_view(store: Storage, run: RunRecord, index: int) -> AgentView | None:
    details = read_details(store, run.id)
    agent = None
    if details is not None:
        agent = next((a for a in details.agents if a.index == index), None)
    transcripts = queries.artifact_json(store, run.id, "transcripts.json")
    record = transcripts.get(str(index)) if isinstance(transcripts, dict) else None
    if not isinstance(record, dict):
        record = None
    if agent is None and record is None:
        return None
    handoff = queries.artifact_json(store, run.id, f"worktrees/agent-{index}.json")
    entries = record.get("transcript") if record is not None else None
    return AgentView(
        run=run,
        agent=agent,
        record=record,
        turns=turns(
            entries if isinstance(entries, list) else [],
            structured_shown=record is not None and record.get("structured") is not None,
        ),
        handoff=handoff if isinstance(handoff, dict) else None,
    )
