"""Pure renderers: the Markdown of every comment and check run the app writes, with hidden markers.

Every body starts with `<!-- bot:run=<run id> kind=<kind> -->`; a sticky comment also carries
`<!-- bot:sticky=<kind> -->`, which is how a later run finds and edits it (see
`bot.publish.publisher`). Nothing here talks to GitHub or redacts: the publisher redacts each
body just before it is sent.

Every body is put together by `_compose`: the markers at its head and the footer are the app's
own; everything between, the model-written text with the Markdown the app writes around it,
passes through `clean_model_markdown` as one document (no raw HTML, images, hidden comments or
links other than https; the app's collapsed log section is written with `collapsible`).
Before that, each piece the app did not write went through `policies.untrusted_text`: names
(paths, branches, labels) as its `code_span`, model text and people's answers defused (no
live mentions, closing keywords or `<!--`, plain fences); the mentions the app means (the
reporter it asks, the commands it suggests) are written around those pieces.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from bot.publish.markdown_out import END_COLLAPSIBLE, clean_within, collapsible
from policies.outcome import Outcome
from policies.untrusted_text import code_span, defuse

MAX_BODY = 60_000  # GitHub refuses comments over 65,536 characters
_RUN_MARKER = re.compile(r"<!-- bot:run=(wf_[0-9a-f]{4,32}) kind=([a-z_-]{1,32}) -->")
_STICKY_MARKER = re.compile(r"<!-- bot:sticky=([a-z_-]{1,32}) -->")
_TITLES = {
    "triage": "Triage",
    "ask": "Answer",
    "review": "Review",
    "fix": "Fix",
    "help": "Help",
    "status": "Status",
    "stop": "Stop",
    "decide": "Decide",
}
_STATE_ICONS = {
    "pending": "⏳",
    "running": "🔄",
    "ok": "✅",
    "replayed": "✅",
    "failed": "❌",
    "done": "✅",
}


@dataclass(frozen=True, slots=True)
class AgentLine:
    """One agent call as shown in progress: its label, phase and state."""

    label: str
    phase: str | None
    state: str  # pending | running | ok | replayed | failed


@dataclass(frozen=True, slots=True)
class Progress:
    """A snapshot of a running run, for the "working" comment."""

    run_id: str
    workflow: str
    phases: tuple[str, ...]
    current_phase: str | None = None
    agents: tuple[AgentLine, ...] = ()
    logs: tuple[str, ...] = ()
    tokens: int = 0
    elapsed: float = 0.0


@dataclass(frozen=True, slots=True)
class RunRow:
    """One run in a `status` reply."""

    run_id: str
    workflow: str
    status: str
    created: str = ""


@dataclass(frozen=True, slots=True)
class Markers:
    """The hidden markers found in a body."""

    run_id: str | None
    kind: str | None
    sticky: str | None


def run_marker(run_id: str, kind: str) -> str:
    return f"<!-- bot:run={run_id} kind={kind} -->"


def sticky_marker(kind: str) -> str:
    return f"<!-- bot:sticky={kind} -->"


def parse_markers(body: str | None) -> Markers:
    """The run id, kind and sticky kind at the head of a body (None for each that is absent).

    Only the head counts: a marker quoted further down (say, in text a model wrote) does not
    make a comment look like another run's or another kind's.
    """
    text = body or ""
    run = _RUN_MARKER.match(text)
    rest = text[run.end() :].lstrip("\n") if run else ""
    sticky = _STICKY_MARKER.match(rest)
    return Markers(
        run_id=run.group(1) if run else None,
        kind=run.group(2) if run else None,
        sticky=sticky.group(1) if sticky else None,
    )


def title_of(kind: str) -> str:
    return _TITLES.get(kind, kind.capitalize())


def _head(run_id: str, kind: str, sticky: bool) -> str:
    lines = [run_marker(run_id, kind)]
    if sticky:
        lines.append(sticky_marker(kind))
    return "\n".join(lines)


def _compose(head: str, markdown: str, footer: str = "") -> str:
    """The app's `head` and `footer` around `markdown`, cleaned and cut to fit `MAX_BODY`."""
    tail = f"\n\n{footer}" if footer else ""
    room = MAX_BODY - len(head) - len(tail) - 1
    return f"{head}\n{clean_within(markdown, room)}{tail}"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}m{rest:02d}s"


def _fence(text: str, info: str = "") -> str:
    """A code block whose fence is longer than any backtick run inside `text`."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{text}\n{ticks}"


_LOG_LINE = 500  # characters of one log line in the progress comment


def _inline(text: str) -> str:
    flat = " ".join(text.split())
    return flat.replace("`", "'")


def render_progress(progress: Progress, *, sticky: bool = True, kind: str | None = None) -> str:
    """The comment while a run is working: its phases, its agents and the newest log lines.

    `kind` is the marker's kind when it is not the workflow's (a follow-up's own comment)."""
    parts = [f"### {title_of(progress.workflow)}: working…", ""]
    if progress.phases:
        current = progress.current_phase
        seen_current = current is None
        shown = []
        for phase in progress.phases:
            if phase == current:
                shown.append(f"🔄 **{phase}**")
                seen_current = True
            elif not seen_current:
                shown.append(f"✅ {phase}")
            else:
                shown.append(f"⏳ {phase}")
        parts.append("Phases: " + " → ".join(shown))
    if progress.agents:
        parts.append("")
        for agent in progress.agents[-20:]:
            icon = _STATE_ICONS.get(agent.state, "•")
            where = f" ({agent.phase})" if agent.phase else ""
            parts.append(f"- {icon} {code_span(agent.label)}{where}: {agent.state}")
        if len(progress.agents) > 20:
            parts.append(f"- … and {len(progress.agents) - 20} earlier agent call(s)")
    if progress.logs:
        parts += ["", collapsible("Log"), ""]
        parts += [f"- {_inline(line)[:_LOG_LINE]}" for line in progress.logs[-10:]]
        parts += ["", END_COLLAPSIBLE]
    tokens = f"{progress.tokens:,} tokens · " if progress.tokens else ""
    footer = f"<sub>Run `{progress.run_id}` · {tokens}{_duration(progress.elapsed)}</sub>"
    head = _head(progress.run_id, kind or progress.workflow, sticky)
    return _compose(head, "\n".join(parts), footer)


def render_footer(outcome: Outcome) -> str:
    usage = outcome.usage
    bits = [
        f"Run `{outcome.run_id}`",
        f"agents {usage.agents_ok} ok, {usage.agents_failed} failed"
        + (f" ({usage.agents_replayed} replayed)" if usage.agents_replayed else ""),
        f"{usage.total_tokens:,} tokens"
        + (f" ({usage.cached_tokens:,} cached)" if usage.cached_tokens else ""),
    ]
    if usage.cost is not None:
        bits.append(f"${usage.cost:.4f}")
    bits.append(_duration(usage.wall_seconds))
    return "<sub>" + " · ".join(bits) + "</sub>"


def _blocked_section(outcome: Outcome, *, answered: bool) -> list[str]:
    blocked = outcome.blocked
    assert blocked is not None
    lines = [f"**Decision needed:** {blocked.decision}", ""]
    if blocked.why:
        # A why of several lines (a list) starts on a line of its own, so it renders as one.
        why = blocked.why.strip()
        lines += ["**Why:**", "", why, ""] if "\n" in why else [f"**Why:** {why}", ""]
    lines.append("**Options:**")
    for number, option in enumerate(blocked.options, start=1):
        mark = " *(default)*" if option == blocked.default else ""
        lines.append(f"{number}. {option}{mark}")
    lines += ["", f"**Default:** {blocked.default}"]
    if blocked.risk:
        lines += ["", f"**Risk:** {blocked.risk}"]
    if answered:
        return lines
    if not blocked.answer_own:  # recorded before `decide`: the reply it showed then
        return [*lines, "", "**To answer**, reply with:", "", _fence(blocked.answer, "text")]
    return [
        *lines,
        "",
        "**To answer**, reply in this thread with the number of the option you choose "
        "(here, the default):",
        "",
        _fence(blocked.answer, "text"),
        "",
        "or in your own words:",
        "",
        _fence(blocked.answer_own, "text"),
    ]


def _needs_info_section(outcome: Outcome) -> list[str]:
    """The reporter, by name, and their questions; then what the run found so far.

    The `@login` is the app's own text (checked to be a login when the outcome was made), so
    it notifies the reporter; mentions in model-written text were defused before.
    """
    info = outcome.needs_info
    assert info is not None
    asked = (
        "a few answers that only you can give"
        if info.reporter
        else "a few answers that only the reporter can give"
    )
    opening = f"A maintainer needs {asked} before work can start"
    if info.reporter:
        opening = f"@{info.reporter}, thanks for the report. {opening}"
    lines = [opening + (":" if info.questions else "."), ""]
    lines += [f"{number}. {q}" for number, q in enumerate(info.questions, start=1)]
    if info.questions:
        lines.append("")
    if info.rerun_on_reply:
        lines.append(
            "Reply in a comment on this issue (no need to mention the app): "
            f"{title_of(outcome.workflow).lower()} runs again with your answers."
        )
    else:
        lines.append("Reply in a comment on this issue; a maintainer will take it from there.")
    return [*lines, "", "**What was found so far**", "", outcome.summary]


_LOGIN_UNSAFE = re.compile(r"[^A-Za-z0-9-]")
_NOTE_TEXT = 300  # characters of an answer quoted in a note


def _quoted_answer(text: str, option: int | None) -> str:
    """A person's answer on one line, in quotes: no code, no mentions, no line breaks."""
    flat = _inline(text)
    flat = flat if len(flat) <= _NOTE_TEXT else flat[: _NOTE_TEXT - 1] + "…"
    said = f"“{defuse(flat)}”"
    return f"option {option}, {said}" if option is not None else said


def _run_link(run_id: str, url: str | None) -> str:
    return f"[run `{run_id}`]({url})" if url and url.startswith("https://") else f"run `{run_id}`"


def answered_note(
    *, by: str, text: str, option: int | None, follow_up: str, url: str | None
) -> str:
    """The line a BLOCKED report shows once `decide` answered it, in place of how to answer."""
    login = _LOGIN_UNSAFE.sub("", by)[:39] or "someone"
    answer = _quoted_answer(text, option)
    return f"**Answered** by @\u200b{login}: {answer} — follow-up: {_run_link(follow_up, url)}"


def follow_up_note(
    *,
    by: str,
    text: str,
    option: int | None,
    blocked_run: str,
    url: str | None,
    replayed: int,
    total: int,
) -> str:
    """The line a follow-up run's comment opens with: what it answers, and what it reused."""
    login = _LOGIN_UNSAFE.sub("", by)[:39] or "someone"
    answer = _quoted_answer(text, option)
    return (
        f"**Follow-up** to the question of {_run_link(blocked_run, url)}, answered by "
        f"@{login}: {answer}; replayed {replayed} of {total} agent calls."
    )


def render_outcome(
    outcome: Outcome, *, sticky: bool = True, kind: str | None = None, answered: str | None = None
) -> str:
    """The final comment: the summary, the questions for the reporter or the BLOCKED report,
    notes, assumptions, findings, footer.

    `kind` is the marker's kind when it is not the workflow's (a follow-up's own comment);
    `answered` (from `answered_note`) marks a BLOCKED report as answered: it is shown under
    the heading in place of how to answer.
    """
    heading = {
        "succeeded": f"### {title_of(outcome.workflow)}",
        "no_changes": f"### {title_of(outcome.workflow)}: nothing to change",
        "needs_info": f"### {title_of(outcome.workflow)}: needs more information",
        "blocked": f"### {title_of(outcome.workflow)}: needs a decision",
        "failed": f"### {title_of(outcome.workflow)}: failed",
        "skipped": f"### {title_of(outcome.workflow)}: skipped",
    }[outcome.status]
    parts = [heading, ""]
    if outcome.note:
        parts += [outcome.note, ""]
    if answered:
        parts += [answered, ""]
    if outcome.status == "blocked" and outcome.blocked is not None:
        if outcome.summary and outcome.summary != outcome.blocked.decision:
            parts += [outcome.summary, ""]
        parts += _blocked_section(outcome, answered=bool(answered))
    elif outcome.status == "needs_info" and outcome.needs_info is not None:
        parts += _needs_info_section(outcome)
    else:
        parts.append(outcome.summary)
    for note in outcome.notes:
        parts += ["", note]
    if outcome.findings:
        parts += ["", "**Findings**", ""]
        for finding in outcome.findings:
            where = code_span(f"{finding.path}:{finding.line}" if finding.line else finding.path)
            parts.append(f"- **{finding.severity}** {where}: {finding.title}")
            if finding.body:
                parts.append("  " + finding.body.replace("\n", "\n  "))
    if outcome.branches:
        parts += ["", "**Branches:** " + ", ".join(code_span(b) for b in outcome.branches)]
    if outcome.assumptions:
        parts += ["", "**Assumptions**", ""]
        parts += [f"- {a}" for a in outcome.assumptions]
    head = _head(outcome.run_id, kind or outcome.workflow, sticky)
    return _compose(head, "\n".join(parts), render_footer(outcome))


def render_reply(run_id: str, kind: str, text: str, *, sticky: bool = True) -> str:
    """A model-free reply (help, status, stop, unknown command)."""
    return _compose(_head(run_id, kind, sticky), text)


def render_help(run_id: str, help_text: str, *, note: str | None = None) -> str:
    lines = [f"> {note}", ""] if note else []
    return render_reply(run_id, "help", "\n".join([*lines, help_text]))


def render_status(run_id: str, rows: Sequence[RunRow], *, target: str) -> str:
    if not rows:
        text = f"No runs recorded for {target}."
    else:
        lines = [f"Runs for {target}, newest first:", "", "| Run | Workflow | State | Started |"]
        lines.append("|---|---|---|---|")
        for row in rows[:20]:
            lines.append(f"| `{row.run_id}` | {row.workflow} | {row.status} | {row.created} |")
        text = "\n".join(lines)
    return render_reply(run_id, "status", text)


def render_stop(run_id: str, stopped: Sequence[str], *, target: str) -> str:
    if stopped:
        text = "Stopped " + ", ".join(f"`{r}`" for r in stopped) + f" on {target}."
    else:
        text = f"No run is in progress on {target}; nothing to stop."
    return render_reply(run_id, "stop", text)


def render_check_output(outcome: Outcome) -> dict[str, str]:
    """The `output` of a completed check run: a title and the summary (without markers)."""
    title = {
        "succeeded": "Done",
        "no_changes": "Nothing to change",
        "needs_info": "Needs more information",
        "blocked": "Needs a decision",
        "failed": "Failed",
        "skipped": "Skipped",
    }[outcome.status]
    body = render_outcome(outcome, sticky=False).split("\n", 1)[1]
    return {"title": f"{title_of(outcome.workflow)}: {title}", "summary": body[:60_000]}
