"""policies.proofs: which findings are proven, what a proof's result means, what is posted."""

from __future__ import annotations

import pytest

from policies.proofs import (
    ProofCandidate,
    ProofRun,
    command_for_tests,
    counts_line,
    outcome,
    plan_proofs,
    posted_inline,
    proof_key,
    provable,
)


@pytest.mark.parametrize(
    ("category", "severity", "threshold", "expected"),
    [
        pytest.param("bug", "high", "high", True, id="bug-at-threshold"),
        pytest.param("Security", "critical", "high", True, id="security-above-any-case"),
        pytest.param("error-handling", "medium", "high", False, id="below-threshold"),
        pytest.param("concurrency", "medium", "medium", True, id="lowered-threshold"),
        pytest.param("style", "critical", "high", False, id="style-is-not-testable"),
        pytest.param("docs", "high", "low", False, id="docs-is-not-testable"),
        pytest.param("bug", "unknown", "info", False, id="unknown-severity"),
    ],
)
def test_provable(category: str, severity: str, threshold: str, expected: bool) -> None:
    assert provable(category, severity, prove_severity=threshold) is expected


def _c(index: int, severity: str, category: str = "bug", title: str = "t") -> ProofCandidate:
    return ProofCandidate(index, "a.py", f"{title}{index}", category, severity)


def test_plan_most_severe_first_capped() -> None:
    found = [_c(0, "high"), _c(1, "critical"), _c(2, "medium"), _c(3, "high"), _c(4, "high")]
    plan = plan_proofs(found, test_command="pytest {tests}", prove_severity="high", max_proofs=3)
    assert plan.prove == (1, 0, 3)
    assert set(plan.not_tried) == {4}
    assert "review.max_proofs" in plan.not_tried[4]


def test_plan_without_a_command_tries_nothing() -> None:
    found = [_c(0, "high"), _c(1, "low"), _c(2, "high", "style")]
    plan = plan_proofs(found, test_command=None, prove_severity="high", max_proofs=5)
    assert plan.prove == ()
    assert list(plan.not_tried) == [0] and "review.test_command" in plan.not_tried[0]


def test_plan_leaves_out_findings_already_raised() -> None:
    found = [_c(0, "high", title="Mean divides by zero"), _c(1, "high")]
    known = [("a.py", "mean divide by zero0"), ("b.py", "t1")]
    plan = plan_proofs(found, test_command="x", prove_severity="high", max_proofs=5, known=known)
    assert plan.prove == (1,) and plan.not_tried == {}


def test_command_for_tests_quotes_each_test() -> None:
    assert command_for_tests("pytest -q {tests}", ["tests/a b.py", "t;rm -rf /"]) == (
        "pytest -q 'tests/a b.py' 't;rm -rf /'"
    )
    assert command_for_tests("make test", ["x.py"]) == "make test"


def test_proof_key_changes_with_any_input() -> None:
    base = {"head": "h", "finding": {"path": "a.py", "title": "t"}, "test_command": "c"}
    key = proof_key(**base)  # type: ignore[arg-type]
    assert key == proof_key(**base)  # type: ignore[arg-type]
    assert key != proof_key(head="h2", finding=base["finding"], test_command="c")  # type: ignore[arg-type]
    assert key != proof_key(head="h", finding={"path": "a.py", "title": "u"}, test_command="c")
    assert key != proof_key(head="h", finding=base["finding"], test_command="d")  # type: ignore[arg-type]


FAILS = ProofRun(1, "`pytest` failed (exit code 1)")
PASSES = ProofRun(0, "`pytest` passed")


@pytest.mark.parametrize(
    ("kwargs", "status", "words"),
    [
        pytest.param({"test": None, "on_head": None}, "not_tried", "no test", id="no-test"),
        pytest.param({"test": "t", "on_head": None}, "not_tried", "not run", id="not-run"),
        pytest.param(
            {"test": "t", "on_head": ProofRun(None, "the sandbox is not available")},
            "not_tried",
            "sandbox",
            id="no-sandbox",
        ),
        pytest.param(
            {"test": "t", "on_head": ProofRun(None, "ran past its time limit", timed_out=True)},
            "not_reproduced",
            "time limit",
            id="loops",
        ),
        pytest.param(
            {"test": "t", "on_head": ProofRun(127, "failed")},
            "not_tried",
            "could not start",
            id="command-not-found",
        ),
        pytest.param({"test": "t", "on_head": PASSES}, "not_reproduced", "passes", id="passes"),
        pytest.param(
            {"test": "t", "on_head": FAILS, "ruling": (False, "ImportError")},
            "not_reproduced",
            "ImportError",
            id="other-reason",
        ),
        pytest.param({"test": "t", "on_head": FAILS}, "not_tried", "ruled", id="no-ruling"),
        pytest.param(
            {"test": "t", "on_head": FAILS, "ruling": (True, "divides by zero")},
            "reproduced",
            "divides by zero",
            id="reproduced",
        ),
        pytest.param(
            {"test": "t", "on_head": FAILS, "ruling": (True, "z"), "with_fix": PASSES},
            "reproduced",
            "z",
            id="reproduced-fix-passes",
        ),
        pytest.param(
            {"test": "t", "on_head": FAILS, "ruling": (True, "z"), "with_fix": FAILS},
            "not_reproduced",
            "fix applied",
            id="fix-still-fails",
        ),
    ],
)
def test_outcome(kwargs: dict[str, object], status: str, words: str) -> None:
    done = outcome(**kwargs)  # type: ignore[arg-type]
    assert done.status == status and words in done.reason


@pytest.mark.parametrize(
    ("category", "severity", "status", "require", "expected"),
    [
        pytest.param("bug", "high", "not_reproduced", False, True, id="not-required"),
        pytest.param("bug", "high", "reproduced", True, True, id="reproduced"),
        pytest.param("bug", "high", "not_reproduced", True, False, id="not-reproduced"),
        pytest.param("bug", "high", "not_tried", True, False, id="not-tried"),
        pytest.param("bug", "high", None, True, False, id="no-proof"),
        pytest.param("style", "high", None, True, True, id="style-never-needs-proof"),
        pytest.param("bug", "low", None, True, True, id="below-prove-severity"),
    ],
)
def test_posted_inline(
    category: str, severity: str, status: str | None, require: bool, expected: bool
) -> None:
    got = posted_inline(
        category,
        severity,
        status,  # type: ignore[arg-type]
        require_proof=require,
        prove_severity="high",
    )
    assert got is expected


def test_counts_line() -> None:
    assert counts_line([]) == ""
    assert counts_line(["reproduced", "not_tried", "not_reproduced", "reproduced"]) == (
        "**Proofs:** 2 reproduced · 1 not reproduced · 1 not tried"
    )
