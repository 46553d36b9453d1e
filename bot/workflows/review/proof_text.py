"""How a finding's proof reads on GitHub: on its comment, and in the summary's lists.

Pure functions. A reproduced finding's comment says "Reproduced: `<test>` fails on `<sha>`",
then a collapsed block with the test and the failure's last lines, each a plain code block
(no info string, fences inside made plain and defused: no hidden comment, mention or closing keyword can come out of what
the test printed); the publisher redacts the whole comment on the way out. A finding whose
test did not reproduce it says so with the reason. The summary lists the findings
`review.require_proof` kept from the inline comments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.publish.markdown_out import END_COLLAPSIBLE, collapsible
from policies.proofs import ProofStatus
from policies.untrusted_text import code_span, untrusted

MAX_LISTED = 50
CACHED_SOURCE = 4000  # the whole test as shown: a fix of the pull request adds it
CACHED_OUTPUT = 1000


@dataclass(frozen=True, slots=True)
class ProofShown:
    """A finding's proof as the app shows it."""

    status: ProofStatus
    reason: str
    test: str = ""
    source: str = ""
    output: str = ""
    head: str = ""


def proof_shown(raw: object) -> ProofShown | None:
    """The proof the workflow returned for one finding (None: it had none)."""
    if not isinstance(raw, Mapping):
        return None
    status = raw.get("status")
    if status != "reproduced" and status != "not_reproduced" and status != "not_tried":
        return None
    return ProofShown(
        status=status,
        reason=" ".join(str(raw.get("reason") or "").split())[:300],
        test=" ".join(str(raw.get("test") or "").split())[:300],
        source=str(raw.get("source") or "")[:4000],
        output=str(raw.get("output") or "")[:2000],
        head=str(raw.get("head") or "")[:40],
    )


def cached(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A proof's outcome as the review memory keeps it (smaller than what was shown)."""
    keep = {k: raw[k] for k in ("status", "reason", "test", "head") if k in raw}
    return {
        **keep,
        "source": str(raw.get("source") or "")[:CACHED_SOURCE],
        "output": str(raw.get("output") or "")[-CACHED_OUTPUT:],
    }


def _plain_block(text: str) -> str:
    body = untrusted(text.rstrip("\n")) or "(nothing)"
    longest = max((len(run) for run in _runs(body)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}\n{body}\n{ticks}"


def _runs(text: str) -> list[str]:
    runs, current = [], ""
    for ch in text:
        if ch == "`":
            current += ch
        elif current:
            runs.append(current)
            current = ""
    return [*runs, current] if current else runs


def comment_lines(t: ProofShown) -> list[str]:
    """The lines a finding's comment gains from its proof (Markdown, cleaned by the caller)."""
    if t.status == "reproduced":
        lines = [f"**Reproduced:** {code_span(t.test)} fails on {code_span(t.head[:12])}."]
        lines += ["", collapsible("The test and its failure"), ""]
        if t.source:
            lines += [_plain_block(t.source), ""]
        lines += [_plain_block(t.output), "", END_COLLAPSIBLE]
        return lines
    if t.status == "not_reproduced":
        test = f" ({code_span(t.test)})" if t.test else ""
        return [f"**Not reproduced**{test}: {untrusted(t.reason)}."]
    return []


def not_reproduced_list(
    findings: Sequence[tuple[str, int, int, str, str, ProofShown | None]],
) -> str:
    """The summary's list of the findings `review.require_proof` kept from the inline
    comments: (path, start, end, severity, title, proof) each; "" for none."""
    if not findings:
        return ""
    lines = [collapsible(f"Not reproduced, not commented inline: {len(findings)}"), ""]
    for path, start, end, severity, title, proof in findings[:MAX_LISTED]:
        where = code_span(f"{path}:{start}" if end <= start else f"{path}:{start}-{end}")
        why = untrusted(proof.reason) if proof is not None else "no proof was tried"
        lines.append(f"- **{severity}** {where}: {untrusted(title)} (not reproduced: {why})")
    if len(findings) > MAX_LISTED:
        lines.append(f"- … and {len(findings) - MAX_LISTED} more")
    return "\n".join([*lines, "", END_COLLAPSIBLE])
