"""The text of a review: inline comments, the review's body, and the sticky summary.

Pure functions. Model-written parts (titles, categories, explanations, the summary) and
names (paths) pass through `policies.untrusted_text` here, whatever the caller did: names as
code spans, prose with plain fences and no live mentions or closing keywords. What is rendered
around them (headings, counts, markers, the suggestion fence of a proven fix) is the app's
own, so a ```suggestion block comes only from the prover. Each inline comment carries `<!-- bot:finding=<fingerprint> -->`, so the app can
tell its findings' threads apart from anyone else's. Everything but the markers and `<sub>` lines
passes through `clean_model_markdown` (no raw HTML, images, hidden comments or non-https links);
the summary's collapsed file list is written with `collapsible`, and `render_outcome` cleans it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from bot.publish.markdown_out import (
    END_COLLAPSIBLE,
    clean_model_markdown,
    clean_within,
    collapsible,
)
from bot.publish.render import run_marker
from bot.workflows.review.proof_text import ProofShown, comment_lines
from policies.untrusted_text import code_span, untrusted

FINDING_MARKER = "<!-- bot:finding={} -->"
_FINDING = re.compile(r"<!-- bot:finding=([0-9a-f]{8,64}) -->")
MAX_REVIEW_BODY = 60_000


@dataclass(frozen=True, slots=True)
class Shown:
    """A finding as it is shown, after cleaning and deduplication."""

    fingerprint: str
    path: str
    start_line: int
    end_line: int
    severity: str
    category: str
    title: str
    explanation: str
    suggestion: str | None = None
    proof: str = ""
    ci_agrees: tuple[str, ...] = ()  # other Apps' checks that flagged these lines
    tested: ProofShown | None = None  # its proof by a failing test (`bot.workflows.review.proofs`)


def finding_of(body: str | None) -> str | None:
    """The fingerprint in an inline comment's marker."""
    match = _FINDING.search(body or "")
    return match.group(1) if match else None


def fence(text: str, info: str = "") -> str:
    """A code block whose fence is longer than any backtick run inside `text`."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{text}\n{ticks}"


def _lines(f: Shown) -> str:
    if f.end_line > f.start_line:
        return code_span(f"{f.path}:{f.start_line}-{f.end_line}")
    return code_span(f"{f.path}:{f.start_line}")


def _heading(f: Shown) -> str:
    return f"**{f.severity}** · {untrusted(f.category)}: {untrusted(f.title)}"


def comment_body(f: Shown) -> str:
    """An inline comment: severity, title, explanation, and a proven suggestion if any."""
    parts = [_heading(f), "", untrusted(f.explanation.strip())]
    if f.suggestion is not None:
        parts += ["", fence(f.suggestion, "suggestion")]
    if f.tested is not None and (proved := comment_lines(f.tested)):
        parts += ["", *proved]
    own = []
    proof = clean_model_markdown(untrusted(" ".join(f.proof.split())))
    if f.suggestion is not None:
        own.append(f"<sub>Checked: {proof}</sub>")
    elif f.proof:
        own.append(f"<sub>No suggestion: {proof}.</sub>")
    if f.ci_agrees:
        own.append(f"<sub>{_agrees(f)}</sub>")
    own.append(FINDING_MARKER.format(f.fingerprint))
    return "\n".join([clean_model_markdown("\n".join(parts)), *own])


def _agrees(f: Shown) -> str:
    """ "CI agrees: `check`, `check`": the names are other Apps', shown as code."""
    return "CI agrees: " + ", ".join(code_span(name[:100]) for name in f.ci_agrees[:5])


def _listed(f: Shown) -> list[str]:
    lines = [f"- **{f.severity}** {_lines(f)}: {untrusted(f.title)}"]
    if f.ci_agrees:
        lines[0] += f" ({_agrees(f)})"
    if f.explanation.strip():
        lines.append("  " + untrusted(f.explanation.strip()).replace("\n", "\n  "))
    return lines


def review_body(
    run_id: str,
    *,
    head: str,
    inline: int,
    outside: Sequence[Shown],
    overflow: Sequence[Shown],
) -> str:
    """The body of the one review a run posts."""
    parts = [run_marker(run_id, "review"), f"Review of `{head[:12]}`."]
    if inline:
        parts.append(f"{inline} comment{'s' if inline != 1 else ''} on the changed lines.")
    if outside:
        parts += ["", "**Outside the diff**", ""]
        for f in outside:
            parts += _listed(f)
    if overflow:
        parts += ["", "**More findings**", ""]
        for f in overflow:
            parts += _listed(f)
    rest = "\n".join(parts[1:])
    room = MAX_REVIEW_BODY - len(parts[0]) - 1
    if len(rest) > room:
        rest = rest[: room - 60] + "\n\n… (the rest is in the summary comment)"
    return f"{parts[0]}\n{clean_within(rest, room)}"


def fallback_body(base: str, inline: Sequence[Shown]) -> str:
    """The review body when GitHub refused the inline comments: every comment moved into it."""
    parts = ["**On the changed lines**", ""]
    for f in inline:
        parts += _listed(f)
        if f.suggestion is not None:
            parts.append(
                "  Suggested fix:\n"
                + "\n".join("  " + ln for ln in fence(f.suggestion, "diff").split("\n"))
            )
    listing = clean_within("\n".join(parts), MAX_REVIEW_BODY - len(base) - 2)
    return f"{base}\n\n{listing}"


@dataclass(frozen=True, slots=True)
class SummaryFacts:
    """What the sticky summary reports besides the model's words."""

    base: str
    previous: str | None
    head: str
    counts: dict[str, int]
    reviewed: Sequence[str]
    skipped: Sequence[tuple[str, str]]
    unverified: Sequence[str] = ()
    fixed: Sequence[tuple[str, str]] = ()  # (title, sha)
    dismissed_now: Sequence[str] = ()
    superseded: bool = False
    stale: bool = False
    full: bool = False
    budget: str = ""
    """The line saying the budget stopped the review (`bot.workflows.review.budget`)."""
    linked: Sequence[str] = ()  # one rendered line per linked issue
    instructions: Sequence[str] = ()  # one rendered line per instructions source
    proofs: str = ""
    """The line of proof counts (`policies.proofs.counts_line`), when proofs are configured."""
    learned: Sequence[str] = ()  # findings learnings left out, and learnings not shown


def summary_text(facts: SummaryFacts, model_summary: str) -> str:
    """The sticky summary's body (the publisher adds the heading, assumptions and footer)."""
    rng = f"`{facts.base[:12]}`..`{facts.head[:12]}`"
    if facts.previous and facts.previous != facts.head and not facts.full:
        rng = f"`{facts.previous[:12]}`..`{facts.head[:12]}` (since the last review; base `{facts.base[:12]}`)"
    c = facts.counts
    parts = [
        f"**Reviewed:** {rng}" + (" (full review)" if facts.full else ""),
        f"**Findings:** {c.get('new', 0)} new · {c.get('open', 0)} still open · "
        f"{c.get('fixed', 0)} fixed · {c.get('dismissed', 0)} dismissed",
    ]
    if facts.proofs:
        parts.append(facts.proofs)
    if facts.budget:
        parts.append(facts.budget)
    if facts.superseded:
        parts.append(
            "**Superseded:** a newer push arrived while this review ran; the review of the "
            "new head follows."
        )
    elif facts.stale:
        parts.append(
            "**Not posted as comments:** the head moved while this review ran; the findings "
            "are listed here instead."
        )
    if model_summary.strip():
        parts += ["", untrusted(model_summary.strip())]
    if facts.fixed:
        parts += ["", "**Fixed since the last review**", ""]
        parts += [f"- {untrusted(title)} (in `{sha[:12]}`)" for title, sha in facts.fixed]
    if facts.dismissed_now:
        parts += ["", "**Dismissed** (not raised again on this pull request)", ""]
        parts += [f"- {reason}" for reason in facts.dismissed_now]
    if facts.linked:
        parts += ["", "**Linked issues**", "", *facts.linked]
    if facts.learned:
        parts += ["", "**Left out by this repository's learnings**", "", *facts.learned]
    if facts.instructions:
        parts += ["", collapsible(f"Instructions: {len(facts.instructions)}"), ""]
        parts += [*facts.instructions, "", END_COLLAPSIBLE]
    reviewed = list(facts.reviewed)
    parts += [
        "",
        collapsible(f"Files reviewed: {len(reviewed)} · not reviewed: {len(facts.skipped)}"),
        "",
    ]
    parts += [f"- {code_span(p)}" for p in reviewed[:300]]
    if len(reviewed) > 300:
        parts.append(f"- … and {len(reviewed) - 300} more")
    if facts.skipped:
        parts += ["", "Not reviewed:", ""]
        parts += [f"- {code_span(p)}: {reason}" for p, reason in list(facts.skipped)[:300]]
        if len(facts.skipped) > 300:
            parts.append(f"- … and {len(facts.skipped) - 300} more")
    if facts.unverified:
        parts += [
            "",
            "Reviewed, but the findings could not be verified (nothing posted for them):",
            "",
        ]
        parts += [f"- {code_span(p)}" for p in facts.unverified[:100]]
    parts += ["", END_COLLAPSIBLE]
    return "\n".join(parts)
