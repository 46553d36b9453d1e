"""The review's text, with names and model text that try to ping, close or suggest: the paths
stay in their code spans, nobody is mentioned, and a ```suggestion block is only ever the
prover's."""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

from bot.publish.render import render_outcome
from bot.workflows.fix.workflow import review_lines
from bot.workflows.review.render import Shown, SummaryFacts, comment_body, review_body, summary_text
from policies.outcome import Outcome

_MD = MarkdownIt("commonmark", {"html": True})
_LIVE_MENTION = re.compile(r"(?<![A-Za-z0-9_])@[A-Za-z0-9]")
ODD = "docs/a` @octo/security-team `b.md"
RUN = "wf_0123456789ab"
SUGGESTION = "```suggestion\nreturn 42\n```"


def shown(**changes: object) -> Shown:
    fields: dict[str, object] = {
        "fingerprint": "0123456789abcdef",
        "path": ODD,
        "start_line": 3,
        "end_line": 3,
        "severity": "high",
        "category": "bug @octo/team",
        "title": "Closes #3 for @octo/team",
        "explanation": f"Do this:\n\n{SUGGESTION}\n\n> ~~~suggestion\n> x\n> ~~~",
        **changes,
    }
    return Shown(**fields)  # type: ignore[arg-type]


def fences(body: str) -> list[tuple[str, str]]:
    return [(t.info, t.content) for t in _MD.parse(body) if t.type == "fence"]


def codes(body: str) -> list[str]:
    return [
        c.content.replace("\u200b", "")
        for t in _MD.parse(body)
        for c in t.children or ()
        if c.type == "code_inline"
    ]


def test_a_suggestion_fence_the_model_wrote_is_plain_code() -> None:
    body = comment_body(shown())
    assert [info for info, _ in fences(body)] == ["", ""]
    assert _LIVE_MENTION.search(body) is None


def test_the_provers_suggestion_is_the_only_one() -> None:
    body = comment_body(shown(suggestion="return 1", proof="`check` passed"))
    assert fences(body) == [("", "return 42\n"), ("", "x\n"), ("suggestion", "return 1\n")]


def test_names_stay_in_their_code_spans_everywhere_a_review_lists_them() -> None:
    facts = SummaryFacts(
        base="b" * 40,
        previous=None,
        head="c" * 40,
        counts={"new": 1},
        reviewed=[ODD],
        skipped=[(ODD, "binary")],
        unverified=[ODD],
        fixed=[("Closes #3 @octo/team", "c" * 40)],
    )
    summary = render_outcome(Outcome("succeeded", summary_text(facts, "ok"), RUN, "review"))
    review = review_body(RUN, head="c" * 40, inline=0, outside=[shown()], overflow=[shown()])
    for body in (summary, review):
        assert _LIVE_MENTION.search(body) is None, body
        assert "@octo" not in body
    assert codes(summary).count(ODD) == 3
    assert codes(review).count(f"{ODD}:3") == 2


def test_the_fix_reviewers_rulings_ping_nobody() -> None:
    lines = review_lines(
        {
            "criteria": [
                {"id": "a` @octo/x `b", "status": "accepted", "note": "@octo/team, closes #3"},
                {"id": "tests", "status": "rejected", "note": ""},
            ]
        }
    )
    text = "\n".join(lines)
    assert _LIVE_MENTION.search(text) is None and "closes #3" not in text
    assert codes(lines[0]) == ["a` @octo/x `b"]
    assert lines[1] == "- ❌ `tests`"
