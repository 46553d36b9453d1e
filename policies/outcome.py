"""What a run concluded (the Outcome) and the pure mapping from a workflow's return value to it.

A workflow returns a dict (or a pydantic model) shaped like `WorkflowResult`:

    {"status": "succeeded" | "no_changes" | "needs_info" | "blocked" | "failed" (optional),
     "summary": "Markdown", "assumptions": ["..."],
     "blocked": {"decision", "why", "options": [2-4], "default", "risk"} (optional),
     "questions": ["..."] (for needs_info, at most three), "labels": ["..."],
     "findings": [{"path", "line", "severity", "title", "body"}], "branches": ["bot/..."]}

`outcome_from_run` turns that, together with the facts the engine reports about the run
(`RunFacts`), into an `Outcome`. A run that did not complete is `failed` whatever it returned;
a value that does not fit the shape is `failed` with a message saying what was wrong; a
`blocked` section makes the outcome `blocked` and gets the exact reply that answers it:
`@<app> decide <n>` for option n (the default's number shown), or `@<app> decide "<text>"`,
which resumes the run (see `policies.decide`). The default is always one of the options,
so that it has a number.

A report the app wrote itself about what a change would do (`fix`'s risk report) also records
what it asked about, as `Asked`: the risks, by kind and action, and the options that approve
them. The caller passes it to `outcome_from_run` beside the workflow's value, never inside
it, so a model's BLOCKED section, whatever keys it carries, records no risk and no option
that approves one.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

OutcomeStatus = Literal["succeeded", "no_changes", "needs_info", "blocked", "failed", "skipped"]
OUTCOME_STATUSES: tuple[str, ...] = (
    "succeeded",
    "no_changes",
    "needs_info",
    "blocked",
    "failed",
    "skipped",
)
SEVERITIES: tuple[str, ...] = ("critical", "high", "medium", "low", "info")

MAX_OPTIONS = 4
MIN_OPTIONS = 2
MAX_QUESTIONS = 3
MAX_LABELS = 10
OTHER_OPTION = "Something else (say what in your reply)"
OWN_ANSWER = "<your own answer>"
PROVIDE_OPTION = "Provide what is asked above in your reply"
_SHORT = 300
_QUESTION = 500
_LONG = 4_000
# A GitHub login as GitHub allows it (Enterprise adds `_shortcode` suffixes); apps' `[bot]`
# accounts do not match, so the app never addresses a bot.
_LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_]|-(?=[A-Za-z0-9_])){0,38}")


@dataclass(frozen=True, slots=True)
class UsageSummary:
    """Tokens, cost (None when the price is unknown), wall time and agent counts of one run."""

    input_tokens: int = 0
    """Input billed in full (what a provider read from its prompt cache is `cached_tokens`)."""
    output_tokens: int = 0
    total_tokens: int = 0
    cost: float | None = None
    wall_seconds: float = 0.0
    cached_tokens: int = 0
    """Input the provider read from its prompt cache, billed at its cache price."""
    agents_ok: int = 0
    agents_failed: int = 0
    agents_replayed: int = 0
    """Agent calls answered from a journal (a resumed run) instead of the model."""


@dataclass(frozen=True, slots=True)
class AskedRisk:
    """One risk an app-written BLOCKED report asked about: its kind and what would be done.

    Both are the app's own words (`policies.fix.RiskReason`), compared exactly: an answer that
    approves "change `package.json`" as a dependency change approves nothing else.
    """

    kind: str
    action: str


@dataclass(frozen=True, slots=True)
class Asked:
    """What an app-written BLOCKED report asks to approve, and which of its options do."""

    risks: tuple[AskedRisk, ...]
    approving: tuple[str, ...]
    """The options (their exact text) that approve `risks`; any other answer approves none."""

    def to_json(self) -> dict[str, object]:
        """Plain JSON, for a workflow's result (the app's own part of it)."""
        return {
            "risks": [{"kind": r.kind, "action": r.action} for r in self.risks],
            "approving": list(self.approving),
        }

    @classmethod
    def from_json(cls, value: object) -> Asked | None:
        """Read back `to_json`; None for anything else (nothing is approved then)."""
        if not isinstance(value, Mapping):
            return None
        raw_risks, raw_options = value.get("risks"), value.get("approving")
        if not isinstance(raw_risks, list) or not isinstance(raw_options, list):
            return None
        risks = tuple(
            AskedRisk(r["kind"], r["action"])
            for r in raw_risks
            if isinstance(r, Mapping)
            and isinstance(r.get("kind"), str)
            and isinstance(r.get("action"), str)
        )
        options = tuple(o for o in raw_options if isinstance(o, str))
        return cls(risks, options) if risks and options else None


@dataclass(frozen=True, slots=True)
class Blocked:
    """A decision only a person can make, and the exact replies that make it.

    `answer` chooses the default option by its number; `answer_own` gives one's own answer
    (empty in outcomes recorded before `decide` existed). `risks` and `approving` are empty
    unless the app wrote the report about a change's risks (see `Asked`).
    """

    decision: str
    why: str
    options: tuple[str, ...]
    default: str
    risk: str
    answer: str
    answer_own: str = ""
    risks: tuple[AskedRisk, ...] = ()
    approving: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NeedsInfo:
    """What only the reporter can tell, asked of them by name.

    `reporter` is the issue author's login, checked to be a login (None when unknown or not a
    person's); `rerun_on_reply` says whether the reporter's reply runs the workflow again.
    """

    questions: tuple[str, ...]
    reporter: str | None = None
    rerun_on_reply: bool = False


@dataclass(frozen=True, slots=True)
class Finding:
    """One point a workflow found; `fingerprint` stays the same across runs and line moves."""

    path: str
    line: int | None
    severity: str
    title: str
    body: str
    fingerprint: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one run concluded, ready to be rendered and published."""

    status: OutcomeStatus
    summary: str
    run_id: str
    workflow: str
    assumptions: tuple[str, ...] = ()
    usage: UsageSummary = field(default_factory=UsageSummary)
    blocked: Blocked | None = None
    findings: tuple[Finding, ...] = ()
    branches: tuple[str, ...] = ()
    error: str | None = None
    needs_info: NeedsInfo | None = None
    labels: tuple[str, ...] = ()
    """Labels the workflow chose for the issue (applied only where the repository says so)."""
    notes: tuple[str, ...] = ()
    """What the app itself adds after the summary (e.g. how applying the labels went)."""
    note: str = ""
    """App-written Markdown shown under the heading (a follow-up says what it answers)."""


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What the engine reports about a run: its final state, error and usage."""

    run_id: str
    workflow: str
    status: str
    error: str | None = None
    usage: UsageSummary = field(default_factory=UsageSummary)


class BlockedResult(BaseModel):
    """The BLOCKED part of a workflow's return value (lenient: extra keys ignored)."""

    model_config = ConfigDict(extra="ignore")

    decision: str = Field(min_length=1)
    why: str = ""
    options: list[str] = Field(default_factory=list)
    default: str | None = None
    risk: str = ""


class FindingResult(BaseModel):
    """One finding in a workflow's return value."""

    model_config = ConfigDict(extra="ignore")

    path: str = ""
    line: int | None = Field(default=None, ge=1)
    severity: str = "medium"
    title: str = Field(min_length=1)
    body: str = ""


class WorkflowResult(BaseModel):
    """The shape a workflow's return value must have to map onto an Outcome."""

    model_config = ConfigDict(extra="ignore")

    status: Literal["succeeded", "no_changes", "needs_info", "blocked", "failed"] | None = None
    summary: str = ""
    assumptions: list[str] = Field(default_factory=list)
    blocked: BlockedResult | None = None
    questions: list[str] = Field(default_factory=list)
    labels: list[str] = Field(default_factory=list)
    findings: list[FindingResult] = Field(default_factory=list)
    branches: list[str] = Field(default_factory=list)


def _identity(text: str) -> str:
    return text


def _one_line(text: str, limit: int = _SHORT) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _normalize(text: str) -> str:
    return " ".join(text.lower().split())


def fingerprint(path: str, title: str, body: str) -> str:
    """A stable id for a finding: the path and its normalized title and body, not the line."""
    key = f"{path.strip()}\n{_normalize(title)}\n{_normalize(body)}"
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def answer_command(app_slug: str, option: int) -> str:
    """The exact comment that answers a BLOCKED report with its option number `option`."""
    return f"@{app_slug} decide {option}"


def answer_own_command(app_slug: str) -> str:
    """The comment that answers a BLOCKED report in one's own words (a template to fill)."""
    return f'@{app_slug} decide "{OWN_ANSWER}"'


def _options(raw: Sequence[str], clean: Callable[[str], str]) -> tuple[str, ...]:
    seen: list[str] = []
    for item in raw:
        text = _one_line(clean(item))
        if text and text.lower() not in (s.lower() for s in seen):
            seen.append(text)
    seen = seen[:MAX_OPTIONS]
    if not seen:
        seen.append(PROVIDE_OPTION)
    if len(seen) < MIN_OPTIONS:
        seen.append(OTHER_OPTION)
    return tuple(seen)


def _with_default(options: tuple[str, ...], default: str) -> tuple[tuple[str, ...], str]:
    """The options with the default among them (matched ignoring case), and the default as
    spelled there: a default that is not an option is added, replacing the last when full."""
    for option in options:
        if option.lower() == default.lower():
            return options, option
    kept = options if len(options) < MAX_OPTIONS else options[:-1]
    return (*kept, default), default


def _blocked(
    raw: BlockedResult, clean: Callable[[str], str], *, app_slug: str, asked: Asked | None
) -> Blocked:
    options = _options(raw.options, clean)
    default = _one_line(clean(raw.default)) if raw.default and raw.default.strip() else options[0]
    options, default = _with_default(options, default)
    approving = tuple(o for o in asked.approving if o in options) if asked else ()
    return Blocked(
        decision=_one_line(clean(raw.decision), _LONG),
        why=clean(raw.why).strip()[:_LONG],
        options=options,
        default=default,
        risk=clean(raw.risk).strip()[:_LONG],
        answer=answer_command(app_slug, options.index(default) + 1),
        answer_own=answer_own_command(app_slug),
        risks=tuple(dict.fromkeys(asked.risks)) if asked and approving else (),
        approving=approving if asked and asked.risks else (),
    )


def _finding(raw: FindingResult, clean: Callable[[str], str]) -> Finding:
    severity = raw.severity.strip().lower()
    title = _one_line(clean(raw.title))
    body = clean(raw.body).strip()
    path = _one_line(clean(raw.path))
    return Finding(
        path=path,
        line=raw.line,
        severity=severity if severity in SEVERITIES else "medium",
        title=title,
        body=body,
        fingerprint=fingerprint(path, title, body),
    )


def describe_validation_error(error: ValidationError) -> str:
    """The first few problems of a validation error, as `where: what; ...`."""
    parts = []
    for item in error.errors()[:5]:
        where = ".".join(str(p) for p in item["loc"]) or "(value)"
        parts.append(f"{where}: {item['msg']}")
    return "; ".join(parts)


def failed_outcome(facts: RunFacts, error: str, *, summary: str | None = None) -> Outcome:
    """A `failed` outcome that says what failed."""
    text = summary if summary is not None else f"The run failed: {_one_line(error, _LONG)}"
    return Outcome(
        status="failed",
        summary=text,
        run_id=facts.run_id,
        workflow=facts.workflow,
        usage=facts.usage,
        error=error,
    )


def reporter_login(login: str | None) -> str | None:
    """`login` when it is a person's GitHub login, else None: it is written after an `@`."""
    if login is None:
        return None
    login = login.strip()
    return login if _LOGIN.fullmatch(login) else None


def _questions(raw: Sequence[str], clean: Callable[[str], str]) -> tuple[str, ...]:
    seen: list[str] = []
    for item in raw:
        text = _one_line(clean(item), _QUESTION)
        if text and text.lower() not in (s.lower() for s in seen):
            seen.append(text)
    return tuple(seen[:MAX_QUESTIONS])


def _labels(raw: Sequence[str]) -> tuple[str, ...]:
    """Label names as chosen: only ever matched against the repository's own names."""
    seen: list[str] = []
    for item in raw:
        name = item.strip()
        if name and len(name) <= 100 and name.lower() not in (s.lower() for s in seen):
            seen.append(name)
    return tuple(seen[:MAX_LABELS])


def outcome_from_run(
    result: object,
    facts: RunFacts,
    *,
    app_slug: str,
    clean: Callable[[str], str] = _identity,
    reporter: str | None = None,
    rerun_on_reply: bool = False,
    asked: Asked | None = None,
) -> Outcome:
    """Map a workflow's return value and the run's facts to an Outcome.

    `clean` is applied to every model-authored string (the engine's terminal-control stripper).
    `reporter` (the issue author's login, from GitHub) and `rerun_on_reply` come from the
    caller, never from the workflow: a `needs_info` outcome addresses that person. So does
    `asked`, what the app's own BLOCKED report asks to approve (recorded on the Blocked).
    """
    if facts.status != "completed":
        reason = facts.error or f"the run ended {facts.status}"
        if facts.status == "aborted":
            return failed_outcome(facts, reason, summary=f"The run was stopped: {reason}.")
        return failed_outcome(facts, reason)

    data: object = result
    if isinstance(result, BaseModel):
        data = result.model_dump(mode="json")
    if isinstance(data, str):
        data = {"summary": data}
    if not isinstance(data, Mapping):
        kind = "nothing" if data is None else f"a {type(data).__name__}"
        return failed_outcome(facts, f"the workflow returned {kind}, not a result object")
    try:
        parsed = WorkflowResult.model_validate(dict(data))
    except ValidationError as exc:
        return failed_outcome(
            facts, f"the workflow's result is malformed: {describe_validation_error(exc)}"
        )

    blocked = (
        _blocked(parsed.blocked, clean, app_slug=app_slug, asked=asked)
        if parsed.blocked is not None
        else None
    )
    questions = _questions(parsed.questions, clean)
    status: OutcomeStatus
    if blocked is not None:
        status = "blocked"
    elif parsed.status == "needs_info" or (parsed.status is None and questions):
        status = "needs_info"
    elif parsed.status in (None, "blocked"):
        status = "succeeded"
    else:
        status = parsed.status
    needs_info = (
        NeedsInfo(questions, reporter_login(reporter), rerun_on_reply)
        if status == "needs_info"
        else None
    )
    summary = clean(parsed.summary).strip()
    if not summary:
        if blocked is not None:
            summary = blocked.decision
        elif needs_info is not None:
            summary = "The issue does not say enough yet to act on it."
        else:
            summary = "The run finished without a summary."
    return Outcome(
        status=status,
        summary=summary,
        run_id=facts.run_id,
        workflow=facts.workflow,
        assumptions=tuple(
            _one_line(clean(a), _LONG) for a in parsed.assumptions if clean(a).strip()
        ),
        usage=facts.usage,
        blocked=blocked,
        findings=tuple(_finding(f, clean) for f in parsed.findings),
        branches=tuple(b.strip() for b in parsed.branches if b.strip()),
        error="the workflow reported failure" if status == "failed" else None,
        needs_info=needs_info,
        labels=_labels(parsed.labels),
    )


def check_conclusion(status: OutcomeStatus) -> str:
    """The check run conclusion: success, neutral (needs_info, blocked, skipped) or failure."""
    if status in ("succeeded", "no_changes"):
        return "success"
    if status in ("needs_info", "blocked", "skipped"):
        return "neutral"
    return "failure"
