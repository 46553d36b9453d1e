"""The structured results the built-in workflows ask their agents for (JSON Schema via pydantic).

Field descriptions are part of the schema the model sees, so they are written as instructions.
`BlockedReport` is the BLOCKED format of DESIGN.md (Outcome): an agent that cannot proceed
without a person's decision fills it instead of guessing.
"""

from __future__ import annotations

import functools
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model


class _Result(BaseModel):
    model_config = ConfigDict(extra="ignore")


class BlockedReport(_Result):
    """A decision only a person can make; the run stops and asks for it."""

    decision: str = Field(
        min_length=1,
        description="The decision or the missing information, as one clear question.",
    )
    why: str = Field(default="", description="Why the work cannot go on without it.")
    options: list[str] = Field(
        min_length=2,
        max_length=4,
        description="Two to four concrete answers a person could give.",
    )
    default: str = Field(description="The option you would take if you had to choose.")
    risk: str = Field(default="", description="What could go wrong if the default is wrong.")


class CodeRef(_Result):
    """A place in the repository."""

    path: str = Field(min_length=1, description="Repository-relative path.")
    line: int | None = Field(default=None, ge=1, description="Line number, when known.")
    note: str = Field(default="", description="What is there and why it matters.")


class ExplorerReport(_Result):
    """What an explorer found."""

    findings: str = Field(
        description="What you found, in Markdown, citing evidence as `path:line`."
    )
    references: list[CodeRef] = Field(default_factory=list, description="The places you cite.")
    open_questions: list[str] = Field(
        default_factory=list, description="What you could not confirm from the repository."
    )


class TriageVerdict(_Result):
    """The triage of one issue."""

    actionable: bool = Field(
        description="True when a maintainer could start work from the issue as written."
    )
    kind: Literal["bug", "feature", "question", "docs", "other"] = Field(
        default="other", description="What kind of issue this is."
    )
    summary: str = Field(
        description="Two to five sentences of Markdown: what is asked and what you found."
    )
    labels: list[str] = Field(
        default_factory=list,
        description="Labels to suggest, chosen from the repository's existing labels when listed.",
    )
    areas: list[CodeRef] = Field(
        default_factory=list, description="The likely area of code, most likely first."
    )
    assumptions: list[str] = Field(
        default_factory=list, description="Every material assumption you made."
    )
    questions: list[str] = Field(
        default_factory=list,
        description=(
            "When the issue lacks what only its reporter can tell (steps to reproduce, expected "
            "and actual behaviour, version or environment, the use case) and the repository "
            "cannot settle it: at most three concrete questions to the reporter, each "
            "answerable in a sentence or two. Empty when nothing is missing."
        ),
    )
    blocked: BlockedReport | None = Field(
        default=None,
        description=(
            "Fill this only for a decision a maintainer must make that is high-risk or "
            "irreversible (a security report that should not be discussed in public, a request "
            "to delete data or to break a public interface). Never for missing information: "
            "ask the reporter in `questions` instead."
        ),
    )


class AskAnswer(_Result):
    """The answer to a question about the repository or a pull request."""

    answer: str = Field(
        description="The answer in Markdown, with `path:line` references for every claim."
    )
    references: list[CodeRef] = Field(default_factory=list, description="The places you cite.")
    assumptions: list[str] = Field(
        default_factory=list, description="Every material assumption you made."
    )
    blocked: BlockedReport | None = Field(
        default=None,
        description="Fill this only when the question cannot be answered without a decision.",
    )


Severity = Literal["critical", "high", "medium", "low", "info"]
Category = Literal[
    "bug",
    "security",
    "performance",
    "error-handling",
    "concurrency",
    "api",
    "tests",
    "docs",
    "style",
    "other",
]


class ReviewFinding(_Result):
    """One problem a reviewer found in the changed code."""

    path: str = Field(min_length=1, description="Repository-relative path of the file.")
    start_line: int = Field(ge=1, description="First line (new side, at the head commit).")
    end_line: int = Field(ge=1, description="Last line (new side); equal to start_line for one.")
    severity: Severity = Field(description="How bad it is if left as is.")
    category: Category = Field(description="What kind of problem it is.")
    title: str = Field(min_length=1, max_length=200, description="One line naming the problem.")
    explanation: str = Field(
        description="Why it is a problem, citing evidence as `path:line`, in Markdown."
    )
    replacement: str | None = Field(
        default=None,
        description=(
            "Only for a small local fix: the exact new text of lines start_line..end_line "
            "(all of them, with their indentation). Leave empty when the fix is elsewhere "
            "or larger."
        ),
    )


MAX_FINDINGS = 500
"""The most candidate findings one reviewer may report (`review.max_findings` allows no more)."""
_FINDINGS_HELP = "Real problems only, the most severe first; an empty list when none."


class UnitReview(_Result):
    """What a reviewer found in one unit of the pull request."""

    findings: list[ReviewFinding] = Field(
        default_factory=list, max_length=MAX_FINDINGS, description=_FINDINGS_HELP
    )
    notes: str = Field(default="", description="Anything the summary should know, briefly.")


@functools.cache
def unit_review_schema(max_findings: int, *, rechecks: bool = False) -> type[UnitReview]:
    """`UnitReview` with room for at most `max_findings` findings: a model that reports more
    is told its result does not match the schema and asked again. With `rechecks`, it also
    holds a verdict on each earlier finding the reviewer was asked to re-check."""
    cap = max(1, min(max_findings, MAX_FINDINGS))
    fields: dict[str, Any] = {
        "findings": (
            list[ReviewFinding],
            Field(
                default_factory=list,
                max_length=cap,
                description=f"{_FINDINGS_HELP} At most {cap}.",
            ),
        )
    }
    if rechecks:
        fields["rechecks"] = (
            list[RecheckVerdict],
            Field(
                default_factory=list,
                description="One verdict per earlier finding listed to re-check, by its "
                "fingerprint: whether the problem is still in the code at the head commit. "
                "Empty when none is listed.",
            ),
        )
    return create_model("UnitReview", __base__=UnitReview, __doc__=UnitReview.__doc__, **fields)


class Verdict(_Result):
    """A verifier's ruling on one candidate finding."""

    index: int = Field(ge=0, description="The candidate's index in the list you were given.")
    keep: bool = Field(description="True only when the finding holds and is new.")
    reason: str = Field(default="", description="Why, in one sentence.")
    learning: int | None = Field(
        default=None,
        description="When you drop it because a learning of the repository answers it: "
        "that learning's number.",
    )


class VerifierReport(_Result):
    """The verifier's rulings, one per candidate."""

    verdicts: list[Verdict] = Field(default_factory=list, max_length=MAX_FINDINGS)


class RecheckVerdict(_Result):
    """Whether an earlier finding still holds at the new head."""

    fingerprint: str = Field(description="The finding's fingerprint, as given.")
    still_present: bool = Field(description="True when the problem is still in the code.")
    reason: str = Field(default="", description="What you saw, citing `path:line`.")


class RecheckReport(_Result):
    verdicts: list[RecheckVerdict] = Field(default_factory=list)


class LinkedIssueVerdict(_Result):
    """Whether the pull request does what one issue it says it closes asks."""

    issue: str = Field(description="The issue as it was listed to you, e.g. `#3`.")
    addressed: Literal["yes", "partly", "no", "unclear"] = Field(
        description="Whether the change does what the issue asks."
    )
    reason: str = Field(default="", description="One short sentence saying why.")


class ReviewSummary(_Result):
    """The advisor's summary of a review."""

    summary: str = Field(
        description="Two to six sentences of Markdown: what the pull request does and the "
        "main points of the review."
    )
    assumptions: list[str] = Field(
        default_factory=list, description="Every material assumption you made."
    )
    blocked: BlockedReport | None = Field(
        default=None,
        description="Fill this only when the change needs a maintainer's decision that is "
        "high-risk or irreversible (an irreversible migration, a security trade-off).",
    )
    linked_issues: list[LinkedIssueVerdict] = Field(
        default_factory=list,
        max_length=10,
        description="One verdict per linked issue you were asked about; none otherwise.",
    )
