"""What a `bot action` job did, for its log, its step summary and its exit code.

Read from the job's store once the worker is idle: the delivery's decision (a skip says why,
as `bot deliveries` would) and each run it started, with its outcome's first line. The step
summary is Markdown GitHub shows on the job's page; nothing in it comes from the model
unescaped (a run's summary is already the text the app posted, and is quoted here as text).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from bot.engine.artifacts import DETAILS
from bot.log import get_logger
from bot.store.sqlite import Store

log = get_logger(__name__)

__all__ = ["ActionReport", "Annotation", "RunLine", "unposted_findings", "write_step_summary"]

ENDED_WELL = frozenset({"succeeded", "no_changes", "needs_info", "blocked", "skipped"})


@dataclass(frozen=True, slots=True)
class RunLine:
    workflow: str
    target: str
    status: str
    summary: str


@dataclass(frozen=True, slots=True)
class Annotation:
    """A finding of a review that could not be posted, as a workflow command shows it."""

    level: str  # error, warning or notice
    path: str
    start: int
    end: int
    title: str
    message: str

    def command(self) -> str:
        """`::warning file=...::message`, every value escaped as GitHub's runner reads it, so
        no text of the model's can end the command or start another."""
        props = ",".join(
            f"{key}={_prop(str(value))}"
            for key, value in (
                ("file", self.path),
                ("line", self.start),
                ("endLine", self.end),
                ("title", self.title),
            )
        )
        return f"::{self.level} {props}::{_data(self.message)}"


@dataclass(frozen=True, slots=True)
class ActionReport:
    """The job's result. `failed`: the exit code is 1."""

    headline: str
    failed: bool = False
    runs: tuple[RunLine, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    annotations: tuple[Annotation, ...] = ()

    @classmethod
    def refused(cls, reason: str) -> ActionReport:
        return cls(f"The app could not run: {reason}", failed=True)

    @classmethod
    def skip(cls, reason: str) -> ActionReport:
        return cls(f"Nothing to do: {reason}")

    @classmethod
    def from_store(cls, store: Store, guid: str, *, notes: list[str]) -> ActionReport:
        delivery = store.get_delivery(guid)
        runs = store.runs_for_delivery(guid)
        lines = tuple(
            RunLine(
                workflow=run.workflow,
                target=f"{run.repo}#{run.number}",
                status=run.status,
                summary=_first_line((run.outcome or {}).get("summary")),
            )
            for run in runs
        )
        failed = any(line.status not in ENDED_WELL for line in lines)
        notes = notes + permission_notes(lines)
        unposted = tuple(
            annotation
            for run in runs
            if run.workflow == "review" and run.status == "failed"
            for annotation in unposted_findings(store.get_artifact(run.id, DETAILS))
        )
        if unposted:
            notes.append(
                f"the review could not be posted: its {len(unposted)} finding(s) are shown as "
                "annotations on the job instead"
            )
        if delivery is None or delivery.decision is None:
            return cls("The event was not decided.", failed=True, runs=lines, notes=tuple(notes))
        if delivery.decision == "skip":
            return cls(f"Nothing to do: {delivery.reason}.", runs=lines, notes=tuple(notes))
        if delivery.decision == "error":
            reason = delivery.reason or "see the job log"
            return cls(f"The event could not be handled: {reason}.", True, lines, tuple(notes))
        done = ", ".join(f"{line.workflow} {line.status}" for line in lines) or "no run"
        return cls(f"Ran {done}.", failed, lines, tuple(notes), unposted)

    def log_lines(self) -> list[str]:
        out = [self.headline]
        out += [f"{r.workflow} on {r.target}: {r.status}. {r.summary}".rstrip() for r in self.runs]
        out += self.notes
        return out

    def markdown(self) -> str:
        parts = ["### repo-agent-bot", "", _text(self.headline)]
        if self.runs:
            parts += ["", "| Run | Target | Outcome | Summary |", "| --- | --- | --- | --- |"]
            parts += [
                f"| {r.workflow} | {_cell(r.target)} | {r.status} | {_cell(r.summary)} |"
                for r in self.runs
            ]
        if self.notes:
            parts += [""] + [f"> {_text(note)}" for note in self.notes]
        return "\n".join(parts) + "\n"


_LEVELS = {"critical": "error", "high": "error", "medium": "warning"}
MAX_ANNOTATIONS = 50
"""GitHub shows at most 10 of each level per step and 50 per job; more would be dropped."""


def unposted_findings(details: str | None) -> list[Annotation]:
    """The findings a review's workflow returned (its `workflow.json`), as annotations."""
    try:
        data = json.loads(details or "null")
        findings = data["result"]["review"]["findings"]
    except (ValueError, TypeError, KeyError):
        return []
    out: list[Annotation] = []
    for item in findings if isinstance(findings, list) else []:
        if not isinstance(item, dict):
            continue
        try:
            start = int(item["start_line"])
            end = max(start, int(item.get("end_line") or start))
            path, title = str(item["path"]), str(item["title"])
        except (KeyError, TypeError, ValueError):
            continue
        level = _LEVELS.get(str(item.get("severity")), "notice")
        message = _first_line(item.get("explanation")) or title
        out.append(Annotation(level, path, start, end, title[:200], message))
    return out[:MAX_ANNOTATIONS]


def _data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(value: str) -> str:
    return _data(value).replace(":", "%3A").replace(",", "%2C")


_NEEDS = re.compile(r"the token needs ([a-z_]+)=(read|write|admin)")


def permission_notes(lines: tuple[RunLine, ...]) -> list[str]:
    """A refused call's permission (GitHub's `X-Accepted-GitHub-Permissions`, carried in the
    run's error), as the workflow's `permissions:` key that grants it."""
    wanted = dict.fromkeys(
        f"{name.replace('_', '-')}: {level}"
        for line in lines
        for name, level in _NEEDS.findall(line.summary)
    )
    return [
        f"GitHub refused the job's token a call: give the job `permissions:` `{key}`"
        for key in wanted
    ]


def _first_line(value: object) -> str:
    if not isinstance(value, str):
        return ""
    line = next((ln.strip() for ln in value.splitlines() if ln.strip()), "")
    return line[:200]


def _text(value: str) -> str:
    """Text shown as text: no HTML, no mentions that would ping anyone from the summary."""
    return (
        value.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("@", "@\u200b")
    )


def _cell(value: str) -> str:
    return _text(value).replace("|", "\\|").replace("\n", " ")


def write_step_summary(path: str | os.PathLike[str] | None, report: ActionReport) -> None:
    """Append the report to the job's step summary (GitHub's file), when the job has one."""
    if not path:
        return
    try:
        with Path(path).open("a", encoding="utf-8") as out:
            out.write(report.markdown())
    except OSError as exc:
        log.warning("the step summary cannot be written", extra={"error": exc.strerror})
