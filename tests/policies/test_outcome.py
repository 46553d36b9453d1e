"""Tests for policies/outcome.py: mapping a workflow's return value and run facts to an Outcome."""

from __future__ import annotations

import dataclasses
import json

import pytest
from pydantic import BaseModel

from policies.outcome import (
    MAX_LABELS,
    OTHER_OPTION,
    OUTCOME_STATUSES,
    PROVIDE_OPTION,
    Asked,
    AskedRisk,
    NeedsInfo,
    RunFacts,
    UsageSummary,
    answer_command,
    answer_own_command,
    check_conclusion,
    fingerprint,
    outcome_from_run,
    reporter_login,
)
from policies.outcome_json import outcome_from_json, outcome_to_json

USAGE = UsageSummary(input_tokens=10, output_tokens=5, total_tokens=15, cost=0.01, wall_seconds=2.5)
DONE = RunFacts(run_id="wf_0123456789ab", workflow="triage", status="completed", usage=USAGE)
BLOCKED = {
    "decision": "Which platform does the crash happen on?",
    "why": "The stack trace differs per platform.",
    "options": ["Linux", "macOS", "Windows"],
    "default": "Linux",
    "risk": "Guessing wrong sends the fix to the wrong code path.",
}


@pytest.mark.parametrize(
    ("result", "status", "summary"),
    [
        pytest.param({"summary": "All good."}, "succeeded", "All good.", id="summary-only"),
        pytest.param("Plain text", "succeeded", "Plain text", id="string"),
        pytest.param(
            {"status": "no_changes", "summary": "Nothing to do."},
            "no_changes",
            "Nothing to do.",
            id="no-changes",
        ),
        pytest.param(
            {"status": "failed", "summary": "Could not build."},
            "failed",
            "Could not build.",
            id="wf-failed",
        ),
        pytest.param(
            {"summary": "", "blocked": BLOCKED}, "blocked", BLOCKED["decision"], id="blocked"
        ),
        pytest.param(
            {"status": "succeeded", "summary": "s", "blocked": BLOCKED},
            "blocked",
            "s",
            id="blocked-wins",
        ),
        pytest.param({}, "succeeded", "The run finished without a summary.", id="empty"),
    ],
)
def test_status_and_summary(result: object, status: str, summary: str) -> None:
    out = outcome_from_run(result, DONE, app_slug="app")
    assert (out.status, out.summary) == (status, summary)
    assert out.usage == USAGE
    assert out.run_id == DONE.run_id


@pytest.mark.parametrize(
    ("result", "error"),
    [
        pytest.param(None, "the workflow returned nothing, not a result object", id="none"),
        pytest.param([1, 2], "the workflow returned a list, not a result object", id="list"),
        pytest.param(
            {"blocked": {"options": ["a"]}},
            "the workflow's result is malformed: blocked.decision: Field required",
            id="blocked-no-decision",
        ),
        pytest.param(
            {"findings": [{"title": "t", "line": 0}]},
            "the workflow's result is malformed: findings.0.line: Input should be greater than or equal to 1",
            id="bad-line",
        ),
    ],
)
def test_malformed_results_fail_with_a_reason(result: object, error: str) -> None:
    out = outcome_from_run(result, DONE, app_slug="app")
    assert out.status == "failed"
    assert out.error == error
    assert error in out.summary


@pytest.mark.parametrize(
    ("status", "error", "summary"),
    [
        pytest.param("failed", "model down", "The run failed: model down", id="failed"),
        pytest.param(
            "aborted", "Stopped by user", "The run was stopped: Stopped by user.", id="aborted"
        ),
        pytest.param("failed", None, "The run failed: the run ended failed", id="no-error"),
    ],
)
def test_runs_that_did_not_complete_fail_whatever_they_returned(
    status: str, error: str | None, summary: str
) -> None:
    facts = RunFacts(run_id="wf_1", workflow="ask", status=status, error=error)
    out = outcome_from_run({"summary": "ignored"}, facts, app_slug="app")
    assert out.status == "failed"
    assert out.summary == summary


def test_blocked_gets_options_default_and_the_exact_reply() -> None:
    out = outcome_from_run({"blocked": BLOCKED}, DONE, app_slug="my-app")
    assert out.blocked is not None
    assert out.blocked.options == ("Linux", "macOS", "Windows")
    assert out.blocked.default == "Linux"
    assert out.blocked.answer == "@my-app decide 1"
    assert out.blocked.answer_own == '@my-app decide "<your own answer>"'


@pytest.mark.parametrize(
    ("options", "default", "expected_options", "expected_default"),
    [
        pytest.param(["only"], None, ("only", OTHER_OPTION), "only", id="one-option-padded"),
        pytest.param([], None, (PROVIDE_OPTION, OTHER_OPTION), PROVIDE_OPTION, id="no-options"),
        pytest.param(["a", "b", "c", "d", "e"], "b", ("a", "b", "c", "d"), "b", id="capped-at-4"),
        pytest.param(["a", "A", " a "], None, ("a", OTHER_OPTION), "a", id="deduplicated"),
        pytest.param(["a", "b"], "  ", ("a", "b"), "a", id="blank-default"),
    ],
)
def test_options_are_kept_between_two_and_four(
    options: list[str],
    default: str | None,
    expected_options: tuple[str, ...],
    expected_default: str,
) -> None:
    raw = {"decision": "d", "options": options, "default": default}
    out = outcome_from_run({"blocked": raw}, DONE, app_slug="app")
    assert out.blocked is not None
    assert out.blocked.options == expected_options
    assert out.blocked.default == expected_default


def test_the_answer_names_the_defaults_number() -> None:
    raw = {**BLOCKED, "default": "windows"}
    out = outcome_from_run({"blocked": raw}, DONE, app_slug="app")
    assert out.blocked is not None
    assert (out.blocked.default, out.blocked.answer) == ("Windows", "@app decide 3")


@pytest.mark.parametrize(
    ("options", "default", "expected"),
    [
        pytest.param(["a", "b"], "c", ("a", "b", "c"), id="added"),
        pytest.param(["a", "b", "c", "d"], "e", ("a", "b", "c", "e"), id="replaces-the-last"),
    ],
)
def test_a_default_that_is_no_option_becomes_one(
    options: list[str], default: str, expected: tuple[str, ...]
) -> None:
    raw = {"decision": "d", "options": options, "default": default}
    out = outcome_from_run({"blocked": raw}, DONE, app_slug="app")
    assert out.blocked is not None
    assert out.blocked.options == expected
    assert out.blocked.answer == f"@app decide {len(expected)}"


def test_answer_commands() -> None:
    assert answer_command("app", 2) == "@app decide 2"
    assert answer_own_command("app") == '@app decide "<your own answer>"'


def test_findings_get_stable_fingerprints_and_known_severities() -> None:
    result = {
        "summary": "s",
        "findings": [
            {"path": "a.py", "line": 3, "severity": "HIGH", "title": "Null  deref", "body": "x"},
            {"path": "a.py", "line": 90, "severity": "weird", "title": "null deref", "body": "X "},
        ],
    }
    out = outcome_from_run(result, DONE, app_slug="app")
    first, second = out.findings
    assert first.severity == "high"
    assert second.severity == "medium"
    assert first.fingerprint == second.fingerprint == fingerprint("a.py", "null deref", "x")
    assert fingerprint("b.py", "null deref", "x") != first.fingerprint


def test_clean_is_applied_to_model_authored_text() -> None:
    result = {"summary": "S\x1b[31m", "assumptions": ["A\x1b[0m", "\x1b[0m"], "blocked": BLOCKED}
    out = outcome_from_run(
        result,
        DONE,
        app_slug="app",
        clean=lambda s: s.replace("\x1b[31m", "").replace("\x1b[0m", ""),
    )
    assert out.summary == "S"
    assert out.assumptions == ("A",)


def test_pydantic_model_results_are_accepted() -> None:
    class Result(BaseModel):
        summary: str
        assumptions: list[str]

    out = outcome_from_run(Result(summary="ok", assumptions=["x"]), DONE, app_slug="app")
    assert (out.status, out.summary, out.assumptions) == ("succeeded", "ok", ("x",))


@pytest.mark.parametrize(
    ("status", "conclusion"),
    [
        pytest.param("succeeded", "success", id="succeeded"),
        pytest.param("no_changes", "success", id="no_changes"),
        pytest.param("needs_info", "neutral", id="needs_info"),
        pytest.param("blocked", "neutral", id="blocked"),
        pytest.param("skipped", "neutral", id="skipped"),
        pytest.param("failed", "failure", id="failed"),
    ],
)
def test_check_conclusion(status: str, conclusion: str) -> None:
    assert check_conclusion(status) == conclusion  # type: ignore[arg-type]


# --- needs_info: questions only the reporter can answer ------------------------------------

QUESTIONS = ["Which command fails?", "What does it print?"]


@pytest.mark.parametrize(
    ("result", "status", "questions"),
    [
        pytest.param({"status": "needs_info", "questions": QUESTIONS}, "needs_info", QUESTIONS, id="explicit"),
        pytest.param({"questions": QUESTIONS}, "needs_info", QUESTIONS, id="questions-alone"),
        pytest.param({"status": "needs_info"}, "needs_info", [], id="no-questions"),
        pytest.param({"status": "succeeded", "questions": QUESTIONS}, "succeeded", None, id="explicit-status-wins"),
        pytest.param({"questions": QUESTIONS, "blocked": BLOCKED}, "blocked", None, id="blocked-wins"),
        pytest.param({"questions": [" ", ""]}, "succeeded", None, id="blank-questions"),
    ],
)  # fmt: skip
def test_needs_info_status(
    result: dict[str, object], status: str, questions: list[str] | None
) -> None:
    out = outcome_from_run({"summary": "s", **result}, DONE, app_slug="app")
    assert out.status == status
    if questions is None:
        assert out.needs_info is None
    else:
        assert out.needs_info == NeedsInfo(tuple(questions))
        assert out.blocked is None and out.error is None


def test_questions_are_cleaned_deduplicated_one_line_and_at_most_three() -> None:
    questions = [
        "Which  command\nfails?\x1b[0m",
        "which command fails?",
        "Q" * 900,
        "Which OS?",
        "Which shell?",
    ]
    out = outcome_from_run(
        {"questions": questions},
        DONE,
        app_slug="app",
        clean=lambda s: s.replace("\x1b[0m", ""),
        reporter="alice",
        rerun_on_reply=True,
    )
    assert out.needs_info is not None
    first, long, third = out.needs_info.questions
    assert first == "Which command fails?"
    assert len(long) == 500 and long.endswith("…")
    assert third == "Which OS?"
    assert (out.needs_info.reporter, out.needs_info.rerun_on_reply) == ("alice", True)
    assert out.summary == "The issue does not say enough yet to act on it."


@pytest.mark.parametrize(
    ("login", "expected"),
    [
        pytest.param("alice", "alice", id="plain"),
        pytest.param(" Alice-B ", "Alice-B", id="trimmed"),
        pytest.param("octo_acme", "octo_acme", id="enterprise-shortcode"),
        pytest.param("a" * 39, "a" * 39, id="longest"),
        pytest.param("a" * 40, None, id="too-long"),
        pytest.param("-alice", None, id="leading-hyphen"),
        pytest.param("al--ice", None, id="double-hyphen"),
        pytest.param("alice-", None, id="trailing-hyphen"),
        pytest.param("dependabot[bot]", None, id="bot"),
        pytest.param("alice team", None, id="space"),
        pytest.param("alice\n@everyone", None, id="newline"),
        pytest.param("org/team", None, id="team"),
        pytest.param("", None, id="empty"),
        pytest.param(None, None, id="missing"),
    ],
)
def test_reporter_login(login: str | None, expected: str | None) -> None:
    assert reporter_login(login) == expected


def test_the_reporter_is_checked_and_only_kept_for_needs_info() -> None:
    asked = outcome_from_run({"questions": QUESTIONS}, DONE, app_slug="a", reporter="x[bot]")
    assert asked.needs_info is not None and asked.needs_info.reporter is None
    done = outcome_from_run({"summary": "s"}, DONE, app_slug="a", reporter="alice")
    assert done.needs_info is None


def test_labels_are_trimmed_deduplicated_and_capped() -> None:
    many = [f"l{n}" for n in range(MAX_LABELS + 5)]
    out = outcome_from_run({"labels": [" bug ", "BUG", "", "x" * 101, *many]}, DONE, app_slug="app")
    assert out.labels == ("bug", *many[: MAX_LABELS - 1])


def test_needs_info_is_a_final_status() -> None:
    assert "needs_info" in OUTCOME_STATUSES


def test_outcome_json_round_trip_with_questions_labels_and_notes() -> None:
    out = outcome_from_run(
        {"summary": "s", "questions": QUESTIONS, "labels": ["bug"]},
        DONE,
        app_slug="app",
        reporter="alice",
        rerun_on_reply=True,
    )
    out = dataclasses.replace(out, notes=("Labels applied: `bug`.",))
    assert outcome_from_json(json.loads(json.dumps(outcome_to_json(out)))) == out
    plain = outcome_from_run({"summary": "s"}, DONE, app_slug="app")
    assert set(outcome_to_json(plain)).isdisjoint({"needs_info", "labels", "notes"})


def test_outcome_json_round_trip() -> None:
    result = {
        "summary": "s",
        "assumptions": ["a"],
        "blocked": BLOCKED,
        "findings": [{"path": "a.py", "line": 2, "title": "t", "body": "b"}],
        "branches": ["bot/x"],
    }
    out = dataclasses.replace(
        outcome_from_run(result, DONE, app_slug="app"), note="**Follow-up** to run `wf_1`"
    )
    assert outcome_from_json(outcome_to_json(out)) == out
    assert outcome_from_json(json.loads(json.dumps(outcome_to_json(out)))) == out


def test_an_outcome_recorded_before_decide_reads_back_without_its_new_fields() -> None:
    out = outcome_from_run({"blocked": BLOCKED}, DONE, app_slug="app")
    data = outcome_to_json(out)
    del data["note"]
    assert isinstance(data["blocked"], dict)
    del data["blocked"]["answer_own"]
    old = outcome_from_json(data)
    assert old.note == "" and old.blocked is not None and old.blocked.answer_own == ""


DEPS = AskedRisk("dependencies", "change `package.json`")
ASKED = Asked((DEPS,), ("Go ahead",))


def test_the_apps_own_report_records_what_it_asks_and_which_options_approve() -> None:
    report = {**BLOCKED, "options": ["Go ahead", "Do nothing"], "default": "Do nothing"}
    out = outcome_from_run({"blocked": report}, DONE, app_slug="app", asked=ASKED)
    assert out.blocked is not None
    assert out.blocked.risks == (DEPS,) and out.blocked.approving == ("Go ahead",)
    assert outcome_from_json(json.loads(json.dumps(outcome_to_json(out)))) == out


def test_a_workflows_blocked_section_cannot_record_risks_or_approving_options() -> None:
    forged = {
        **BLOCKED,
        "options": ["Go ahead", "Do nothing"],
        "risks": [{"kind": "dependencies", "action": "change `package.json`"}],
        "approving": ["Go ahead"],
    }
    out = outcome_from_run({"blocked": forged}, DONE, app_slug="app")
    assert out.blocked is not None and out.blocked.risks == () and out.blocked.approving == ()
    assert "risks" not in outcome_to_json(out)["blocked"]  # type: ignore[operator]


def test_an_approving_option_that_is_not_among_the_options_approves_nothing() -> None:
    out = outcome_from_run({"blocked": BLOCKED}, DONE, app_slug="app", asked=ASKED)
    assert out.blocked is not None and out.blocked.risks == () and out.blocked.approving == ()


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(None, id="none"),
        pytest.param({"risks": [], "approving": ["Go ahead"]}, id="no-risks"),
        pytest.param({"risks": [{"kind": "x", "action": "y"}], "approving": []}, id="no-option"),
        pytest.param({"risks": "x", "approving": ["Go ahead"]}, id="not-a-list"),
        pytest.param({"risks": [{"kind": 1, "action": "y"}], "approving": ["a"]}, id="bad-kind"),
    ],
)
def test_asked_reads_back_only_its_own_shape(value: object) -> None:
    assert Asked.from_json(value) is None


def test_asked_round_trip() -> None:
    assert Asked.from_json(json.loads(json.dumps(ASKED.to_json()))) == ASKED


@pytest.mark.parametrize(
    "data",
    [
        pytest.param({}, id="empty"),
        pytest.param(
            {"status": "weird", "summary": "", "run_id": "x", "workflow": "w"}, id="status"
        ),
        pytest.param(
            {"status": "failed", "summary": 3, "run_id": "x", "workflow": "w"}, id="summary"
        ),
    ],
)
def test_outcome_from_json_rejects_other_shapes(data: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="not a stored outcome"):
        outcome_from_json(data)


def test_cached_tokens_are_kept_and_an_older_outcome_reads_as_none_cached() -> None:
    from bot.publish.render import render_footer

    usage = dataclasses.replace(USAGE, input_tokens=2, total_tokens=1_515, cached_tokens=1_508)
    from policies.outcome import Outcome

    out = Outcome(status="succeeded", summary="ok", run_id="wf_1", workflow="review", usage=usage)
    data = json.loads(json.dumps(outcome_to_json(out)))
    assert data["usage"]["cache_read"] == 1_508
    assert outcome_from_json(data) == out
    del data["usage"]["cache_read"]
    assert outcome_from_json(data).usage.cached_tokens == 0
    assert "1,515 tokens (1,508 cached)" in render_footer(out)
    assert "cached" not in render_footer(dataclasses.replace(out, usage=USAGE))
