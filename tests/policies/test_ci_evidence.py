"""policies.ci_evidence: whose CI counts, which annotations reach the reviewer, how they read."""

from __future__ import annotations

import pytest

from policies.ci_evidence import (
    MAX_ANNOTATIONS,
    Annotation,
    Check,
    Evidence,
    Status,
    agreeing,
    evidence,
    foreign_checks,
    foreign_statuses,
    render_evidence,
    reported_by,
    tool_of,
    wants_annotations,
)
from policies.untrusted_text import ZWSP


def note(path: str = "calc/ops.py", start: int = 18, end: int = 18, msg: str = "bad") -> Annotation:
    return Annotation(path, start, end, "failure", "", msg)


def check(
    name: str = "lint",
    *,
    app_id: int | None = 7,
    slug: str | None = "ci-app",
    conclusion: str | None = "failure",
    status: str = "completed",
    count: int = 1,
    notes: tuple[Annotation, ...] = (),
) -> Check:
    return Check(1, name, app_id, slug, status, conclusion, count, notes)


@pytest.mark.parametrize(
    ("run", "kept"),
    [
        pytest.param(check(), True, id="another-app"),
        pytest.param(check(app_id=1001), False, id="own-app-id"),
        pytest.param(check(slug="Repo-Agent", app_id=None), False, id="own-slug-any-case"),
        pytest.param(check(app_id=None, slug=None), False, id="no-app-named"),
        pytest.param(check(app_id=None, slug="ci-app"), True, id="slug-only"),
    ],
)
def test_only_other_apps_checks_count(run: Check, kept: bool) -> None:
    assert (foreign_checks([run], app_id=1001, app_slug="repo-agent") == [run]) is kept


def test_foreign_checks_without_a_known_app_id_compare_slugs() -> None:
    assert foreign_checks([check(app_id=1001)], app_id=None, app_slug="repo-agent")


def test_statuses_set_by_the_apps_own_account_are_left_out() -> None:
    own = Status("review", "success", "", "Repo-Agent[bot]")
    other = Status("ci/build", "failure", "broke", "ci[bot]")
    anonymous = Status("legacy", "error", "", None)
    got = foreign_statuses([own, other, anonymous], bot_login="repo-agent[bot]")
    assert got == [other, anonymous]


@pytest.mark.parametrize(
    ("run", "wanted"),
    [
        pytest.param(check(conclusion="failure"), True, id="failure"),
        pytest.param(check(conclusion="neutral"), True, id="neutral"),
        pytest.param(check(conclusion="timed_out"), True, id="timed-out"),
        pytest.param(check(conclusion="action_required"), True, id="action-required"),
        pytest.param(check(conclusion="success"), False, id="success"),
        pytest.param(check(conclusion="skipped"), False, id="skipped"),
        pytest.param(check(conclusion=None, status="in_progress"), False, id="running"),
        pytest.param(check(count=0), False, id="no-annotations"),
    ],
)
def test_which_checks_annotations_are_read(run: Check, wanted: bool) -> None:
    assert wants_annotations(run) is wanted


def test_evidence_keeps_flagged_checks_annotations_on_changed_files_up_to_the_cap() -> None:
    many = tuple(note(start=i + 1) for i in range(MAX_ANNOTATIONS + 10))
    failed = check("ruff", notes=(note("elsewhere.py"), note(start=0), *many))
    passed = check("mypy", conclusion="success", notes=(note(),))
    found = evidence([failed, passed], [], changed=frozenset({"calc/ops.py"}))
    assert len(found.annotations) == MAX_ANNOTATIONS
    assert {name for name, _ in found.annotations} == {"ruff"}
    assert all(n.path == "calc/ops.py" and n.start_line >= 1 for _, n in found.annotations)
    assert found.checks == (failed, passed) and not found.empty


def test_nothing_from_ci_renders_nothing() -> None:
    assert render_evidence(Evidence()) == "" and Evidence().empty


def test_untrusted_annotation_text_is_trimmed_and_neutralised() -> None:
    hostile = (
        "<script>alert(1)</script><b>bold</b> @octo/admins please <!-- hide --> "
        "Fixes #3 \u202eevil\x07 " + "x" * 65_536
    )
    run = check(
        "ci <img src=x>",
        notes=(Annotation("calc/ops.py", 18, 20, "failure", "@alice title", hostile),),
    )
    status = Status("ci/@bot", "failure", "see <a href=x>here</a>", "ci[bot]")
    text = render_evidence(evidence([run], [status], changed=frozenset({"calc/ops.py"})))
    assert "<script>" not in text and "<b>" not in text and "<img" not in text
    assert "<a href" not in text and "\u202e" not in text and "\x07" not in text
    assert f"@{ZWSP}octo/admins" in text and f"@{ZWSP}alice" in text and f"@{ZWSP}bot" in text
    assert "<!--" not in text and f"F{ZWSP}ixes" in text
    assert "calc/ops.py:18-20 [ci, failure]" in text
    assert len(text) < 2_000  # the 64 KiB message is cut to a few hundred characters
    assert "…" in text and f'status "ci/@{ZWSP}bot": failure: see here' in text


def test_a_one_line_annotation_and_a_check_without_app_render() -> None:
    run = Check(2, "build", 9, None, "completed", "neutral", 1, (note(msg="warn"),))
    text = render_evidence(evidence([run], [], changed=frozenset({"calc/ops.py"})))
    assert '- check "build": neutral' in text and "calc/ops.py:18 [build, failure] warn" in text
    empty = Status("ci", "pending", "", None)
    assert '- status "ci": pending' in render_evidence(Evidence(statuses=(empty,)))


@pytest.mark.parametrize(
    ("start", "end", "names"),
    [
        pytest.param(18, 18, ("ruff", "mypy"), id="same-line"),
        pytest.param(16, 18, ("ruff", "mypy"), id="range-covers"),
        pytest.param(19, 19, ("mypy",), id="inside-a-range"),
        pytest.param(21, 22, (), id="after"),
    ],
)
def test_agreeing_checks_overlap_the_findings_lines(
    start: int, end: int, names: tuple[str, ...]
) -> None:
    found = Evidence(
        annotations=(
            ("ruff", note(start=18)),
            ("mypy", note(start=18, end=20)),
            ("ruff", note(start=18)),
            ("ruff", note("other.py", 18)),
        )
    )
    assert agreeing(found, "calc/ops.py", start, end) == names
    assert agreeing(None, "calc/ops.py", start, end) == ()


@pytest.mark.parametrize(
    ("command", "tool"),
    [
        pytest.param("ruff check --output-format=concise {files}", "ruff", id="plain"),
        pytest.param("python -m mypy {files}", "mypy", id="python-m"),
        pytest.param("FOO=1 /usr/bin/flake8 .", "flake8", id="env-and-path"),
        pytest.param("uv run pylint x", "pylint", id="uv-run"),
        pytest.param("python3 tools/lint.py {files}", "lint", id="script"),
        pytest.param("npx eslint 'unterminated", "eslint", id="bad-quoting"),
        pytest.param("python -m", "", id="only-a-runner"),
    ],
)
def test_tool_of(command: str, tool: str) -> None:
    assert tool_of(command) == tool


@pytest.mark.parametrize(
    ("checks", "command", "skip"),
    [
        pytest.param([check("ruff")], "ruff check {files}", "ruff", id="same-name"),
        pytest.param([check("Lint (Ruff)")], "ruff check .", "Lint (Ruff)", id="in-a-name"),
        pytest.param([check("checks", slug="ruff-action")], "ruff check", "checks", id="slug"),
        pytest.param([check("ruffian")], "ruff check", None, id="not-a-word"),
        pytest.param([check("ruff", status="in_progress")], "ruff", None, id="still-running"),
        pytest.param([check("mypy")], "ruff check", None, id="another-tool"),
        pytest.param([check("x")], "python -m", None, id="no-tool"),
    ],
)
def test_reported_by_another_apps_check_of_the_same_tool(
    checks: list[Check], command: str, skip: str | None
) -> None:
    assert reported_by(checks, command) == skip
