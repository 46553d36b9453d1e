"""policies.review_plan: units, ranking, skip reasons and the budget."""

from __future__ import annotations

import pytest

from policies.review_plan import (
    CALLS_PER_UNIT,
    OVERHEAD_TOKENS,
    SUMMARY_TOKENS,
    ChangedFile,
    PlanLimits,
    ReviewPlan,
    follow_up_tokens,
    full_review_tokens,
    glob_match,
    plan_review,
    review_whole,
    risk_of,
    skip_reason,
    tokens_for,
)


def cf(path: str, changed: int = 10, **kw: object) -> ChangedFile:
    return ChangedFile(path, additions=changed, patch_chars=changed * 40, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("path", "patterns", "ok"),
    [
        pytest.param("src/a.py", ["*.py"], True, id="basename-anywhere"),
        pytest.param("src/a.py", ["src/*.py"], True, id="anchored"),
        pytest.param("lib/src/a.py", ["src/*.py"], False, id="anchored-not-nested"),
        pytest.param("docs/x/y.md", ["docs/"], True, id="directory"),
        pytest.param("a/b/c/d.js", ["a/**/d.js"], True, id="double-star"),
        pytest.param("a/d.js", ["a/**/d.js"], True, id="double-star-zero-dirs"),
        pytest.param("x.txt", ["x.t?t"], True, id="question-mark"),
        pytest.param("x.py", ["", "  "], False, id="blank-patterns"),
        pytest.param("build/out/x.c", ["build"], True, id="name-matches-directory"),
    ],
)
def test_glob_match(path: str, patterns: list[str], ok: bool) -> None:
    assert glob_match(path, patterns) is ok


@pytest.mark.parametrize(
    ("file", "limits", "reason"),
    [
        pytest.param(cf("a.py", status="removed"), PlanLimits(), "removed", id="removed"),
        pytest.param(cf("a.png", binary=True), PlanLimits(), "binary", id="binary"),
        pytest.param(
            cf("docs/a.md"), PlanLimits(paths=("src/",)), "excluded by review.paths", id="paths"
        ),
        pytest.param(
            cf("src/a.py"), PlanLimits(ignore=("*.py",)), "excluded by review.ignore", id="ignore"
        ),
        pytest.param(cf("web/package-lock.json"), PlanLimits(), "lock file", id="lock"),
        pytest.param(cf("Cargo.lock"), PlanLimits(), "lock file", id="lock-case"),
        pytest.param(cf("vendor/x/y.go"), PlanLimits(), "vendored", id="vendored"),
        pytest.param(cf("static/app.min.js"), PlanLimits(), "generated", id="minified"),
        pytest.param(cf("proto/api_pb2.py"), PlanLimits(), "generated", id="protobuf"),
        pytest.param(
            cf("big.py", 2000),
            PlanLimits(),
            "too large (2000 changed lines, limit 1500)",
            id="too-large",
        ),
        pytest.param(cf("src/a.py"), PlanLimits(paths=("src/",)), None, id="kept"),
        pytest.param(
            cf("vendor/lib", 2, submodule=("1" * 40, "2" * 40)),
            PlanLimits(),
            "submodule pointer moved from 111111111111 to 222222222222: not reviewed",
            id="submodule-moved",
        ),
        pytest.param(
            cf("ext", 1, status="added", submodule=("", "3" * 40)),
            PlanLimits(paths=("src/",)),
            "submodule added at 333333333333: not reviewed",
            id="submodule-added",
        ),
        pytest.param(
            cf("ext", 1, status="removed", submodule=("4" * 40, "")),
            PlanLimits(),
            "submodule removed (it was at 444444444444): not reviewed",
            id="submodule-removed",
        ),
    ],
)
def test_skip_reason(file: ChangedFile, limits: PlanLimits, reason: str | None) -> None:
    assert skip_reason(file, limits) == reason


def test_risk_orders_source_config_tests_docs() -> None:
    assert risk_of("app/auth.py") > risk_of("app/core.py") > risk_of("setup.cfg")
    assert risk_of("setup.cfg") > risk_of("tests/test_core.py") > risk_of("README.md")
    assert risk_of("LICENSE") == 10


def test_plan_ranks_groups_and_names_every_file() -> None:
    files = [
        cf("README.md", 5),
        cf("app/core.py", 100),
        cf("app/util.py", 5),
        cf("tests/test_util.py", 5),
        cf("poetry.lock", 400),
        cf("app/auth.py", 20),
        cf("gone.py", 3, status="removed"),
    ]
    plan = plan_review(files, PlanLimits())
    # Related small files first, then what is left of the small ones packed in.
    assert plan.units[0].paths == ("app/auth.py", "app/util.py", "tests/test_util.py", "README.md")
    assert ("app/core.py",) in [u.paths for u in plan.units]
    named = set(plan.paths) | {s.path for s in plan.skipped}
    assert named == {f.path for f in files}
    assert {s.path: s.reason for s in plan.skipped} == {
        "poetry.lock": "lock file",
        "gone.py": "removed",
    }
    assert plan.tokens == sum(u.tokens for u in plan.units)


def test_small_groups_are_packed_up_to_the_unit_limits() -> None:
    files = [cf(f"d{i}/f{i}.py", 10) for i in range(6)] + [cf("big/x.py", 100)]
    plan = plan_review(files, PlanLimits())
    sizes = sorted(len(u.paths) for u in plan.units)
    assert sizes == [1, 2, 4]


def test_module_and_its_test_share_a_unit() -> None:
    plan = plan_review([cf("pkg/parser.py", 10), cf("tests/test_parser.py", 10)], PlanLimits())
    assert [u.paths for u in plan.units] == [("pkg/parser.py", "tests/test_parser.py")]


def test_budget_by_files_and_tokens() -> None:
    files = [cf(f"src/m{i}.py", 80) for i in range(5)]
    by_files = plan_review(files, PlanLimits(max_files=3))
    assert len(by_files.paths) == 3
    assert [s.reason for s in by_files.skipped] == ["over budget", "over budget"]
    one = tokens_for([files[0]])
    by_tokens = plan_review(files, PlanLimits(max_tokens=one * 2 + 1))
    assert len(by_tokens.paths) == 2
    assert by_tokens.tokens <= one * 2 + 1


def test_a_group_over_budget_is_tried_file_by_file() -> None:
    files = [cf("src/a.py", 10), cf("src/b.py", 10)]
    plan = plan_review(files, PlanLimits(max_files=1))
    assert plan.paths == ("src/a.py",)
    assert [(s.path, s.reason) for s in plan.skipped] == [("src/b.py", "over budget")]


def test_unchanged_files_cost_nothing_and_are_named() -> None:
    plan = plan_review([cf("a.py"), cf("b.py")], PlanLimits(), unchanged={"a.py"})
    assert plan.paths == ("b.py",)
    assert [(s.path, s.reason) for s in plan.skipped] == [
        ("a.py", "unchanged since the last review")
    ]


def test_only_a_small_follow_up_delta_is_reviewed_in_one_call() -> None:
    from policies.review_plan import ONE_CALL_LINES, one_call

    assert one_call(True, [10, ONE_CALL_LINES - 11])
    assert not one_call(True, [10, ONE_CALL_LINES - 10])  # as many lines as the threshold
    assert not one_call(False, [1])  # a first or full review: always two calls
    assert not one_call(True, [1, None])  # a file shown whole
    assert not one_call(True, [])


def _follow_up_and_full(
    delta: dict[str, int], whole: dict[str, int]
) -> tuple[ReviewPlan, ReviewPlan]:
    """A follow-up's plan sized by the push's deltas (changed lines per file), and a full
    review's plan of the pull request's whole patches."""
    follow_up = plan_review([cf(p, n) for p, n in delta.items()], PlanLimits())
    full = plan_review([cf(p, n) for p, n in whole.items()], PlanLimits())
    return follow_up, full


@pytest.mark.parametrize(
    ("delta", "whole", "one", "folded", "alone", "expected"),
    [
        pytest.param(
            {"docs/a.md": 100, "docs/b.md": 30, "docs/c.md": 30, "docs/d.md": 10},
            {"docs/a.md": 100, "docs/b.md": 30, "docs/c.md": 30, "docs/d.md": 10},
            False,
            0,
            1_000,
            True,
            id="deltas-as-large-as-the-patches-and-a-re-check-call",
        ),
        pytest.param(
            {"docs/a.md": 100, "docs/b.md": 30, "docs/c.md": 30, "docs/d.md": 10},
            {"docs/a.md": 100, "docs/b.md": 30, "docs/c.md": 30, "docs/d.md": 10},
            False,
            0,
            0,
            False,
            id="deltas-as-large-as-the-patches-cost-no-summary",
        ),
        pytest.param(
            {"docs/a.md": 100, "docs/b.md": 30},
            {"docs/a.md": 100, "docs/b.md": 30},
            False,
            8_000,
            0,
            True,
            id="re-checks-its-reviewers-rule-on-cost-more-than-a-summary",
        ),
        pytest.param(
            {"src/a.py": 120, "src/b.py": 200},
            {"src/a.py": 40, "src/b.py": 140},
            False,
            0,
            0,
            True,
            id="deltas-much-larger-than-the-patches",
        ),
        pytest.param(
            {"src/a.py": 50},
            {"src/a.py": 50, "src/b.py": 50},
            False,
            0,
            4_400,
            True,
            id="a-re-check-call-of-its-own-tips-it-over",
        ),
        pytest.param(
            {"tests/test_a.py": 12},
            {"src/a.py": 5, "tests/test_a.py": 20, "docs/a.md": 2},
            True,
            400,
            0,
            False,
            id="a-small-delta-in-one-call",
        ),
        pytest.param(
            {"src/a.py": 150},
            {"src/a.py": 300, "src/b.py": 200},
            False,
            2_000,
            0,
            False,
            id="a-delta-smaller-than-the-patch",
        ),
    ],
)
def test_a_follow_up_costing_a_full_review_reviews_whole_patches(
    delta: dict[str, int],
    whole: dict[str, int],
    one: bool,
    folded: int,
    alone: int,
    expected: bool,
) -> None:
    follow_up, full = _follow_up_and_full(delta, whole)
    tokens = follow_up_tokens(
        follow_up, [one] * len(follow_up.units), rechecked=folded, rechecked_alone=alone
    )
    assert review_whole(tokens, full_review_tokens(full)) is expected


def test_follow_up_and_full_review_estimates_count_their_calls() -> None:
    follow_up, full = _follow_up_and_full({"a.py": 10}, {"a.py": 10, "b.py": 10})
    (unit,) = follow_up.units
    assert follow_up_tokens(follow_up, [False]) == unit.tokens
    assert follow_up_tokens(follow_up, [True]) == unit.tokens // CALLS_PER_UNIT
    # Re-checks a unit's reviewer rules on cost their text; the others a call of their own.
    assert follow_up_tokens(follow_up, [True], rechecked=400) == unit.tokens // 2 + 100
    assert follow_up_tokens(follow_up, [True], rechecked_alone=400) == (
        unit.tokens // 2 + OVERHEAD_TOKENS + 100
    )
    # A full review always ends with the advisor's summary.
    assert full_review_tokens(full) == full.tokens + SUMMARY_TOKENS
    assert review_whole(5, 5) and not review_whole(4, 5)  # at least as much: whole
