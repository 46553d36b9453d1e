"""End to end: findings proven by a failing test, through `bot serve`, the fake GitHub and the
fake model, on the `fixtures/repos/calc` pull request.

`mean` divides by zero on an empty list: the fake model's prover writes a unittest that calls
`mean([])` (and prints a token-shaped string first), the repository's `review.test_command`
runs it in the sandbox on the head, it fails with ZeroDivisionError, the verifier rules that
this is the finding, and with the finding's fix applied it passes: "Reproduced". A second,
wrong finding (that `mean` of one value is wrong) gets a test that passes on the head: not
reproduced, and with `review.require_proof` not posted inline but listed in the summary. A
`review full` of the same head proves nothing again, and `@app fix` on the pull request
pushes the fix with the reproducing test in its commit, after running it. One server serves
the module; the tests run in order.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from bot.agents.sandbox import probe_sandbox
from tests.e2e_world import ADMIN_AND_WRITER, ReviewWorld, review_world
from tests.fakes.fix_model import Edit, FixModel
from tests.fakes.llm import Reply
from tests.fakes.review_model import ProofScript, ReviewModel, Rule, user_prompt
from tests.review._calc import snapshot

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not probe_sandbox().ok, reason="proofs run in the sandbox"),
]

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"

MEAN_TEST = f"""import unittest

from calc import ops


class MeanOfEmptyList(unittest.TestCase):
    def test_mean_of_empty_list(self) -> None:
        print("debug {TOKEN}")
        self.assertEqual(ops.mean([]), 0.0)
"""

SINGLE_TEST = """import unittest

from calc import ops


class MeanOfOne(unittest.TestCase):
    def test_mean_of_one_value(self) -> None:
        self.assertEqual(ops.mean([5]), 5)
"""

RULES = (
    Rule(
        "return div(total, len(values))",
        "mean divides by zero on an empty list",
        replacement="    return div(total, len(values)) if values else 0.0",
        proof=ProofScript(
            "tests/test_proof_mean.py", "test_mean_of_empty_list", MEAN_TEST, "ZeroDivisionError"
        ),
    ),
    Rule(
        "total = sum(values)",
        "mean is wrong for a single value",
        proof=ProofScript(
            "tests/test_proof_one.py", "test_mean_of_one_value", SINGLE_TEST, "AssertionError"
        ),
    ),
)

CONFIG = """\
review:
  check_command: python3 check.py
  check_timeout: 60
  test_command: python3 -m unittest {tests}
  require_proof: true
"""


OPS = str(snapshot("head1")["calc/ops.py"])
OPS_FIXED = OPS.replace(
    "    return div(total, len(values))", "    return div(total, len(values)) if values else 0.0"
)


@dataclass
class ReviewAndFix(ReviewModel):
    """The review's fake model, and the fix's for the fix's prompts."""

    fixer: FixModel = field(
        default_factory=lambda: FixModel([Edit("empty list", {"calc/ops.py": OPS_FIXED})])
    )

    def __call__(self, body: dict[str, Any]) -> Reply:
        if user_prompt(body).startswith(("Plan the change", "Make the change", "Check this")):
            return self.fixer(body)
        return super().__call__(body)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReviewWorld]:
    root = tmp_path_factory.mktemp("proofs-e2e")
    with review_world(
        root,
        ReviewAndFix(RULES),
        permissions=ADMIN_AND_WRITER,
        default_files={".github/bot.yml": CONFIG},
    ) as w:
        yield w


def test_a_real_bug_is_posted_reproduced_and_a_wrong_one_is_held_back(world: ReviewWorld) -> None:
    world.review_opened()
    assert world.model.calls["prove"] >= 2 and world.model.calls["ruling"] == 1

    (review,) = world.reviews()
    inline = world.review_comments()
    mean = next(c for c in inline if "mean divides by zero" in c["body"])
    assert (mean["path"], mean["line"]) == ("calc/ops.py", 18)
    head = world.calc.head1[:12]
    assert (
        f"**Reproduced:** `tests/test_proof_mean.py::test_mean_of_empty_list` fails on `{head}`."
        in mean["body"]
    )
    assert "<details><summary>The test and its failure</summary>" in mean["body"]
    assert "ZeroDivisionError" in mean["body"] and "ops.mean([])" in mean["body"]
    # What the test printed is redacted.
    assert TOKEN not in mean["body"] and "ghp_A1b2" not in mean["body"]
    assert all(TOKEN not in c["body"] for c in inline)
    assert TOKEN not in review["body"]

    # The wrong finding's test passes on the head: not posted inline, listed in the summary.
    assert not any("single value" in c["body"] for c in inline)
    assert "single value" not in review["body"]
    (summary,) = world.own_comments()
    body = summary["body"]
    assert "**Proofs:** 1 reproduced · 1 not reproduced · 0 not tried" in body
    assert "Not reproduced, not commented inline: 1" in body
    assert "mean is wrong for a single value (not reproduced: the test passes on the head)" in body
    assert TOKEN not in body

    # The tests were never pushed, and no branch or worktree is left in the mirror.
    assert not any("git-receive-pack" in c.path for c in world.fake.calls)
    heads = subprocess.run(
        ["git", f"--git-dir={world.mirror()}", "for-each-ref", "refs/heads/bot/"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert heads == ""
    worktrees = world.mirror() / "worktrees"
    assert not worktrees.exists() or not any(worktrees.iterdir())


def test_a_re_review_of_the_same_head_proves_nothing_again(world: ReviewWorld) -> None:
    proofs, rulings = world.model.calls["prove"], world.model.calls["ruling"]
    reviews = world.model.calls["review"]
    guid = world.command("@repo-agent review full")
    _, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-3000:]
    assert world.model.calls["review"] > reviews  # the unit was reviewed again
    assert world.model.calls["prove"] == proofs and world.model.calls["ruling"] == rulings


def test_a_fix_of_the_pull_request_carries_the_reproducing_test(world: ReviewWorld) -> None:
    guid = world.command("@repo-agent fix mean on an empty list")
    run_id, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-4000:]
    new = [p for p in world.fake.repos["octo/hello"].pulls.values() if p["base"]["ref"] == "topic"]
    (fix_pull,) = new
    branch = fix_pull["head"]["ref"]

    def show(*what: str) -> str:
        return subprocess.run(
            ["git", f"--git-dir={world.calc.git_dir}", "show", *what],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    # One commit on the pull request's head: the fix and the test that reproduced the bug.
    assert show(f"{branch}~1").startswith(f"commit {world.calc.head1}")
    assert show(f"{branch}:calc/ops.py") == OPS_FIXED
    test = show(f"{branch}:tests/test_proof_mean.py")
    assert "def test_mean_of_empty_list" in test and TOKEN not in test
    assert "tests/test_proof_one.py" not in show("--stat", "--format=", branch)
    (outcome,) = world.query("SELECT outcome FROM runs WHERE id = ?", run_id)[0]
    assert "**Reproducing tests:** `tests/test_proof_mean.py` added;" in outcome
    assert "passed" in outcome
