"""Findings proven by a failing test: which to prove, what a proof's result means, what is posted.

A review proves a verified finding when its category is one a test can show (`bug`,
`security`, `error-handling`, `concurrency`) and it is at least `review.prove_severity`
severe: an implementer writes the smallest test that should fail because of it, and the
repository's `review.test_command` runs it in the sandbox on the head (`{tests}` in the
command stands for the test files, each shell-quoted). At most `review.max_proofs` per run,
the most severe first; a finding already raised on the pull request is not proven again.

The outcome of a proof (`outcome`):

- `reproduced`: the test fails on the head, a verifier ruled that the failure shows what the
  finding says, and, when the finding carries a fix, the test passes with the fix applied;
- `not_reproduced`: the test passes on the head, runs past its time limit, fails for another
  reason (the verifier's ruling), or still fails with the fix applied;
- `not_tried`: no test command, past `max_proofs`, the budget, no test written, the sandbox
  unavailable, or a command that could not start (exit code 126 or 127 of the shell).

With `review.require_proof`, a finding that could be proven (`provable`) and was not
reproduced is not posted inline: the summary lists it as not reproduced (`posted_inline`).
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from policies.review_state import normalize_title

__all__ = [
    "NOT_STARTED",
    "PROVEN_CATEGORIES",
    "ProofCandidate",
    "ProofOutcome",
    "ProofPlan",
    "ProofRun",
    "ProofStatus",
    "command_for_tests",
    "counts_line",
    "outcome",
    "plan_proofs",
    "posted_inline",
    "proof_key",
    "provable",
]

PROVEN_CATEGORIES = frozenset({"bug", "security", "error-handling", "concurrency"})
SEVERITY_RANK: dict[str, int] = {"critical": 0, "high": 1, "medium": 2, "low": 3, "info": 4}
NOT_STARTED = frozenset({126, 127})  # the shell's "not executable" and "not found"

ProofStatus = Literal["reproduced", "not_reproduced", "not_tried"]


@dataclass(frozen=True, slots=True)
class ProofCandidate:
    """A verified finding as the choice of proofs sees it."""

    index: int
    path: str
    title: str
    category: str
    severity: str


@dataclass(frozen=True, slots=True)
class ProofPlan:
    """The findings to prove (indices, in the order to prove them) and why the others that
    could be proven are not tried."""

    prove: tuple[int, ...]
    not_tried: Mapping[int, str]


def provable(category: str, severity: str, *, prove_severity: str) -> bool:
    """Whether a finding of this category and severity is one a review proves."""
    rank = SEVERITY_RANK.get(severity, 9)
    return category.lower() in PROVEN_CATEGORIES and rank <= SEVERITY_RANK[prove_severity]


def plan_proofs(
    candidates: Sequence[ProofCandidate],
    *,
    test_command: str | None,
    prove_severity: str,
    max_proofs: int,
    known: Sequence[tuple[str, str]] = (),
) -> ProofPlan:
    """Which of `candidates` to prove: the provable ones not already raised (`known`: path and
    title of the pull request's earlier findings), the most severe first, at most
    `max_proofs`; the rest of the provable ones are not tried, with the reason."""
    raised = {(path, normalize_title(title)) for path, title in known}
    chosen = [
        c
        for c in candidates
        if provable(c.category, c.severity, prove_severity=prove_severity)
        and (c.path, normalize_title(c.title)) not in raised
    ]
    if not test_command:
        why = "no test command is configured (`review.test_command`)"
        return ProofPlan((), {c.index: why for c in chosen})
    ranked = sorted(chosen, key=lambda c: (SEVERITY_RANK.get(c.severity, 9), c.index))
    over = f"past `review.max_proofs` ({max_proofs}) proofs per review"
    return ProofPlan(
        tuple(c.index for c in ranked[:max_proofs]),
        {c.index: over for c in ranked[max_proofs:]},
    )


def command_for_tests(command: str, tests: Sequence[str]) -> str:
    """`command` with `{tests}` replaced by the test files, each shell-quoted."""
    return command.replace("{tests}", " ".join(shlex.quote(t) for t in tests))


def proof_key(*, head: str, finding: Mapping[str, object], test_command: str) -> str:
    """The identity of a proof's inputs: the code (the head), the finding, the command. A
    review that meets the same key again reuses the outcome instead of proving it again."""
    material = json.dumps(
        {"head": head, "finding": finding, "command": test_command},
        sort_keys=True,
        ensure_ascii=False,
        default=str,
    )
    return hashlib.sha256(material.encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class ProofRun:
    """What the test command did on one checkout: `exit_code` None when it did not finish
    (`timed_out`) or did not run at all (`what` says why)."""

    exit_code: int | None
    what: str
    timed_out: bool = False

    @property
    def failed(self) -> bool:
        return self.exit_code is not None and self.exit_code != 0


@dataclass(frozen=True, slots=True)
class ProofOutcome:
    status: ProofStatus
    reason: str


def outcome(
    *,
    test: str | None,
    on_head: ProofRun | None,
    ruling: tuple[bool, str] | None = None,
    with_fix: ProofRun | None = None,
) -> ProofOutcome:
    """A proof's outcome from what happened (see the module): `test` the test written (None:
    none was), `on_head` its run on the head, `ruling` the verifier's (shows the finding, why),
    `with_fix` its run with the finding's fix applied (None: the finding has no fix)."""
    if test is None:
        return ProofOutcome("not_tried", "no test was written for this finding")
    if on_head is None:
        return ProofOutcome("not_tried", "the test was not run")
    if on_head.timed_out:
        return ProofOutcome("not_reproduced", f"the test did not finish: {on_head.what}")
    if on_head.exit_code is None:
        return ProofOutcome("not_tried", on_head.what)
    if on_head.exit_code in NOT_STARTED:
        return ProofOutcome(
            "not_tried", f"the test command could not start (exit code {on_head.exit_code})"
        )
    if not on_head.failed:
        return ProofOutcome("not_reproduced", "the test passes on the head")
    if ruling is None:
        return ProofOutcome("not_tried", "the failure could not be ruled on")
    shows, why = ruling
    if not shows:
        return ProofOutcome("not_reproduced", f"the test fails for another reason: {why}")
    if with_fix is not None and (with_fix.exit_code != 0):
        return ProofOutcome(
            "not_reproduced", f"the test does not pass with the fix applied: {with_fix.what}"
        )
    return ProofOutcome("reproduced", why)


def posted_inline(
    category: str,
    severity: str,
    status: ProofStatus | None,
    *,
    require_proof: bool,
    prove_severity: str,
) -> bool:
    """Whether a finding may be an inline comment: with `require_proof`, a provable finding
    only when it was reproduced."""
    if not require_proof or not provable(category, severity, prove_severity=prove_severity):
        return True
    return status == "reproduced"


def counts_line(statuses: Sequence[ProofStatus]) -> str:
    """The summary's line of proof counts ("" when nothing could be proven)."""
    if not statuses:
        return ""
    n = {
        s: sum(1 for x in statuses if x == s) for s in ("reproduced", "not_reproduced", "not_tried")
    }
    return (
        f"**Proofs:** {n['reproduced']} reproduced · {n['not_reproduced']} not reproduced · "
        f"{n['not_tried']} not tried"
    )
