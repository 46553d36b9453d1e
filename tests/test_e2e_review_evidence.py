"""End to end: a review that reads other Apps' CI and runs the repository's linter, through
`bot serve`, the fake GitHub and the fake model.

On the `fixtures/repos/calc` pull request: another App's failed check run annotates the line
where `mean` divides by zero (its message full of HTML, a team mention and 64 KiB of text), a
commit status failed, and `.github/bot.yml` sets a `lint_command` that flags one added line
and one unchanged line. The annotation reaches the reviewer's prompt, cleaned; the finding on
that line says "CI agrees"; the lint hit on the added line is verified and posted, the one on
the unchanged line is not. On a real starlette pull request (skipped without
`../shared/real-repos`), the same on its first added line.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.agents import sandbox
from policies.untrusted_text import ZWSP
from tests.e2e_world import RealPull, ReviewWorld, needs_real, review_world
from tests.fakes.github import FakeGitHub
from tests.fakes.review_model import CALC_RULES, ReviewModel, user_prompt
from tests.review._calc import build_calc

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sandbox.probe_sandbox().ok, reason="needs the sandbox (bubblewrap)"),
]

HOSTILE = (
    "<script>alert('x')</script><img src=x onerror=1> @octo/admins see "
    "ZeroDivisionError: division by zero <!-- hidden --> " + "A" * 65_536
)
LINT = """\
review:
  check_command: python3 check.py
  check_timeout: 60
  lint_command: >-
    awk '/total = sum|return a [+] b/ {{print FILENAME ":" FNR ":5: L100 {what}"}}' {{files}}
"""


def ci_app_check(fake: FakeGitHub, head: str, path: str, line: int, name: str = "pytest") -> None:
    fake.add_foreign_check_run(
        "octo/hello",
        head,
        name=name,
        app_slug="github-actions",
        app_id=15368,
        conclusion="failure",
        annotations=[
            {"path": path, "start_line": line, "annotation_level": "failure", "message": HOSTILE},
            {"path": "not/in/the/pull.py", "start_line": 1, "annotation_level": "failure",
             "message": "ELSEWHERE"},
        ],
    )  # fmt: skip


def prompts(world: ReviewWorld, start: str) -> list[str]:
    return [p for p in (user_prompt(b) for b in world.llm.bodies) if p.startswith(start)]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReviewWorld]:
    root = tmp_path_factory.mktemp("review-evidence")
    calc = build_calc(root)

    def failed_ci(fake: FakeGitHub) -> None:
        ci_app_check(fake, calc.head1, "calc/ops.py", 18)
        fake.add_commit_status(
            "octo/hello", calc.head1, context="ci/circleci", state="failure", description="2 failed"
        )

    with review_world(
        root,
        ReviewModel(CALC_RULES),
        calc=calc,
        default_files={".github/bot.yml": LINT.format(what="suspicious line")},
        prepare=failed_ci,
    ) as w:
        yield w


def test_ci_reaches_the_prompt_cleaned_and_marks_the_finding_it_agrees_with(
    world: ReviewWorld,
) -> None:
    world.review_opened()

    reviewers = prompts(world, "Review part of")
    assert len(reviewers) >= 2 and all('source="ci"' in p for p in reviewers)
    ci = reviewers[0].split('source="ci"', 1)[1].split("</untrusted-data", 1)[0]
    assert "calc/ops.py:18 [pytest, failure]" in ci and "ZeroDivisionError" in ci
    assert f"@{ZWSP}octo/admins" in ci and "<script>" not in ci and "<img" not in ci
    assert "<!--" not in ci and "A" * 1000 not in ci and "ELSEWHERE" not in ci
    assert 'status "ci/circleci": failure: 2 failed' in ci
    assert 'check "pytest" (github-actions): failure' in ci
    assert "repo-agent" not in ci  # the app's own check run is not evidence

    by_line = {(c["path"], c["line"]): c["body"] for c in world.review_comments()}
    assert "mean divides by zero" in by_line["calc/ops.py", 18]
    assert "CI agrees: `pytest`" in by_line["calc/ops.py", 18]
    assert "CI agrees" not in by_line["calc/ops.py", 22]


def test_a_lint_hit_on_a_changed_line_is_verified_and_posted_one_on_an_unchanged_line_is_not(
    world: ReviewWorld,
) -> None:
    verifying = [p for p in prompts(world, "You are verifying") if "awk: L100" in p]
    assert len(verifying) == 1 and '"start_line": 17' in verifying[0]
    by_line = {(c["path"], c["line"]): c["body"] for c in world.review_comments()}
    assert "awk: L100 suspicious line" in by_line["calc/ops.py", 17]
    (review,) = world.reviews()
    everything = review["body"] + "".join(by_line.values())
    # Not the hit on line 5, which the change left alone.
    assert everything.count("`awk` reports at") == 1 and "calc/ops.py:5:5" not in everything
    assert ("calc/ops.py", 5) not in by_line
    (summary,) = world.own_comments()
    assert "**Lint:** `awk` reported 1 hit on changed lines." in summary["body"]


def first_added_line(bare: Path, base: str, head: str, path: str) -> int:
    diff = subprocess.run(
        ["git", f"--git-dir={bare}", "diff", "-U0", base, head, "--", path],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    match = re.search(r"^@@ -\S+ \+(\d+)", diff, re.MULTILINE)
    assert match is not None
    return int(match.group(1))


@needs_real
def test_a_real_pull_request_gets_its_ci_and_lint_evidence(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    pull = RealPull.clone(tmp_path_factory.mktemp("review-evidence-real"), 867)
    head = pull.commit(-2)
    path = "starlette/requests.py"
    line = first_added_line(pull.bare, pull.pr["base"], head, path)
    lint = (
        "review:\n  lint_command: >-\n    awk 'FILENAME == \"" + path + "\" && (FNR == " + str(line)
        + ' || FNR == 1) {print FILENAME ":" FNR ": R1 real hit " FNR}\' {files}\n'
    )  # fmt: skip
    with pull.serving(
        ReviewModel(generic=True),
        user="aviramha",
        default_files={".github/bot.yml": lint},
        prepare=lambda fake: ci_app_check(fake, head, path, line, name="tests (3.8)"),
    ) as world:
        world.review_opened()
        reviewer = [p for p in prompts(world, "Review part of") if path in p]
        assert reviewer and all(f"{path}:{line} [tests (3.8), failure]" in p for p in reviewer)
        comments = [c for c in world.review_comments() if c["path"] == path]
        at_line = [c["body"] for c in comments if c["line"] == line]
        assert any("CI agrees: `tests (3.8)`" in body for body in at_line)
        assert any(f"awk: R1 real hit {line}" in body for body in at_line)
        posted = "".join(c["body"] for c in world.review_comments()) + world.reviews()[0]["body"]
        assert line > 1  # line 1 of the file is not one the change added: its hit is dropped
        assert f"reports at `{path}:1`" not in posted and f"reports at `{path}:{line}`" in posted
