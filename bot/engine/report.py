"""The run's result message (also saved as report.md), line by line as people read it."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from bot.engine.details import AgentDetails, RunDetails
from bot.engine.sanitize import strip_terminal

RESULT_CHARS = 24 * 1024
RESULT_LINES = 600


def format_elapsed(started: float, finished: float | None, now: float | None = None) -> str:
    """`42s`, `1m05s`, `2h03m`."""
    end = finished if finished is not None else (now if now is not None else started)
    seconds = max(0, int(end - started))
    if seconds < 60:
        return f"{seconds}s"
    minutes, sec = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def shorten_home(path: Path | str) -> str:
    text = str(path)
    home = os.path.expanduser("~")
    if home not in ("", "/") and (text == home or text.startswith(home + os.sep)):
        return "~" + text[len(home) :]
    return text


def result_json(value: Any) -> str:
    """Pretty JSON of the result, capped at 24 KiB and 600 lines with a visible marker."""
    try:
        text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    lines = text.splitlines()
    cut = False
    if len(lines) > RESULT_LINES:
        lines, cut = lines[:RESULT_LINES], True
    text = "\n".join(lines)
    if len(text) > RESULT_CHARS:
        text, cut = text[:RESULT_CHARS], True
    if cut:
        text += "\n… (result truncated; full value in result.json)"
    return text


def _worktree_line(agent: AgentDetails) -> str:
    cleanup = agent.worktree_cleanup or {}
    commits = int(cleanup.get("commits") or 0)
    branch = cleanup.get("branch") or agent.worktree_branch
    if commits:
        work = f"{commits} commit{'' if commits == 1 else 's'} on {branch}"
    elif agent.worktree_branch and not cleanup.get("branch_deleted"):
        work = f"no commits; branch {agent.worktree_branch}"
    else:
        work = "no commits"
    if agent.worktree_path:
        reason = cleanup.get("reason") or "uncommitted changes"
        tail = f"; kept at {shorten_home(agent.worktree_path)} ({reason})"
    elif cleanup.get("branch_deleted"):
        tail = "; empty branch deleted"
    elif cleanup.get("reason"):
        tail = f"; cleanup warning: {cleanup['reason']}"
    else:
        tail = ""
    handoff = f"; handoff {agent.worktree_handoff}" if agent.worktree_handoff else ""
    return f"- [{agent.label}] {work}{tail}{handoff}"


def _agent_line(agent: AgentDetails) -> str:
    if agent.state == "done":
        status = "ok (replayed)" if agent.replayed else "ok"
    elif agent.state == "error":
        status = "FAILED"
    else:
        status = "running"
    phase = f" ({agent.phase})" if agent.phase else ""
    accept = f" · acceptance {agent.acceptance['status']}" if agent.acceptance else ""
    error = f" - {agent.error}" if agent.error else ""
    return f"- [{agent.label}]{phase} {status}{accept}{error}"


def build_result_message(details: RunDetails, run_dir: Path) -> str:
    """The completion report: headline, run dir, resume, error, log, worktrees, agents, result."""
    done, failed = details.counts()
    title = f'"{details.name}"' if details.name else details.run_id
    elapsed = format_elapsed(details.started_at, details.finished_at, time.time())
    lines = [
        f"Workflow {title} {details.status} - {done}/{len(details.agents)} agents ok"
        f"{f', {failed} failed' if failed else ''} across {len(details.phases)} phase(s)"
        f" in {elapsed}.",
        f"Run dir: {shorten_home(run_dir)}",
    ]
    if details.resumed_from:
        replayed = sum(1 for a in details.agents if a.replayed)
        total = len(details.agents)
        lines.append(
            f"Resumed from {details.resumed_from}: replayed {replayed}/{total} agent call(s), "
            f"ran {total - replayed} for real."
        )
    if details.resume_note:
        lines.append(f"Resume: {details.resume_note}")
    if details.error:
        lines.append(f"Error: {details.error}")
    if details.logs:
        lines += ["", "Log:"]
        if details.logs_dropped:
            lines.append(f"  ({details.logs_dropped} earlier line(s) dropped)")
        lines += [f"  {entry}" for entry in details.logs]
    isolated = [a for a in details.agents if a.worktree_branch or a.worktree_path]
    if isolated:
        lines += ["", "Isolated worktrees:"]
        lines += [_worktree_line(a) for a in isolated]
    if details.agents:
        lines += ["", "Agents:"]
        lines += [_agent_line(a) for a in details.agents]
    if details.has_result:
        lines += ["", "Result:", result_json(details.result)]
    return strip_terminal("\n".join(lines))
