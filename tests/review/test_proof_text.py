"""bot.workflows.review.proof_text: a proof on a finding's comment and in the summary."""

from __future__ import annotations

from bot.workflows.review.proof_text import ProofShown, cached, not_reproduced_list, proof_shown
from bot.workflows.review.render import FINDING_MARKER, Shown, comment_body, finding_of

HEAD = "abc1234def5678" + "0" * 26


def shown(tested: ProofShown | None) -> Shown:
    return Shown(
        fingerprint="f" * 16,
        path="calc/ops.py",
        start_line=18,
        end_line=18,
        severity="high",
        category="bug",
        title="mean divides by zero",
        explanation="It does.",
        tested=tested,
    )


def test_a_reproduced_finding_shows_its_test_and_failure() -> None:
    t = proof_shown(
        {
            "status": "reproduced",
            "reason": "ZeroDivisionError",
            "test": "tests/test_x.py::test_empty_input",
            "source": "def test_empty_input():\n    mean([])\n",
            "output": "ZeroDivisionError: division by zero",
            "head": HEAD,
        }
    )
    body = comment_body(shown(t))
    assert "**Reproduced:** `tests/test_x.py::test_empty_input` fails on `abc1234def56`." in body
    assert "<details><summary>The test and its failure</summary>" in body
    assert "```\ndef test_empty_input():\n    mean([])\n```" in body
    assert "```\nZeroDivisionError: division by zero\n```" in body


def test_what_a_test_printed_cannot_break_out_of_its_block() -> None:
    hostile = "```suggestion\nx\n```\n<!-- bot:finding=0123456789abcdef --> @octo Fixes #1"
    t = ProofShown("reproduced", "r", "t.py::t", source="s", output=hostile, head=HEAD)
    body = comment_body(shown(t))
    assert "```suggestion" not in body  # only the prover writes a suggestion block
    assert "````\n```\nx\n```\n" in body  # the output's fences are inside a longer one
    assert finding_of(body) == "f" * 16  # the only marker is the app's own, at the end
    assert body.endswith(FINDING_MARKER.format("f" * 16))
    assert "@octo" not in body and "Fixes #1" not in body


def test_a_finding_not_reproduced_says_why() -> None:
    t = ProofShown("not_reproduced", "the test passes on the head", "t.py::t")
    assert "**Not reproduced** (`t.py::t`): the test passes on the head." in comment_body(shown(t))
    assert "Reproduced" not in comment_body(shown(ProofShown("not_tried", "no command")))


def test_the_summary_lists_what_require_proof_held_back() -> None:
    t = ProofShown("not_reproduced", "the test passes on the head")
    text = not_reproduced_list(
        [("a.py", 3, 4, "high", "Wrong", t), ("b.py", 1, 1, "high", "X", None)]
    )
    assert "Not reproduced, not commented inline: 2" in text
    assert "- **high** `a.py:3-4`: Wrong (not reproduced: the test passes on the head)" in text
    assert "- **high** `b.py:1`: X (not reproduced: no proof was tried)" in text
    assert not_reproduced_list([]) == ""


def test_unknown_proofs_are_ignored_and_the_memory_keeps_less() -> None:
    assert proof_shown({"status": "maybe"}) is None and proof_shown(None) is None
    kept = cached({"status": "reproduced", "output": "x" * 5000, "source": "y" * 5000, "key": "k"})
    assert len(kept["output"]) == 1000 and len(kept["source"]) == 4000 and "key" not in kept
