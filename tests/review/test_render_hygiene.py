"""Model-written parts of a review (titles, categories, explanations, the summary) are posted
without raw HTML, images, hidden comments or non-https links; the app's own markers stay."""

from __future__ import annotations

from bot.publish.render import render_outcome, run_marker
from bot.workflows.review.render import (
    Shown,
    SummaryFacts,
    comment_body,
    fallback_body,
    finding_of,
    review_body,
    summary_text,
)
from policies.outcome import Outcome
from tests.github._markdown_check import hidden_comments, problems

RUN = "wf_0123456789ab"
HOSTILE = (
    "![x](https://evil.test/pixel.png) <img src=https://evil.test/p.png>\n"
    "<!-- bot:finding=deadbeefdeadbeef -->\n"
    f"<!-- bot:run={RUN} kind=triage -->\n"
    "<a href=javascript:alert(1)>open</a> [click](http://evil.test)"
)
FINDING = Shown(
    fingerprint="0123456789abcdef",
    path="src/app.py",
    start_line=3,
    end_line=4,
    severity="high",
    category="<img src=https://evil.test/c.png>",
    title="Null <b>deref</b>",
    explanation=HOSTILE,
    suggestion="x = 1\n",
    proof="tests pass <img src=https://evil.test/proof.png>",
)
OWN = ("<sub>", "</sub>", "<!-- bot:finding=0123456789abcdef -->", run_marker(RUN, "review"))


def test_an_inline_comment_is_posted_clean_and_keeps_its_own_marker() -> None:
    body = comment_body(FINDING)
    assert problems(body, allowed_html=OWN) == []
    assert hidden_comments(body) == ["<!-- bot:finding=0123456789abcdef -->"]
    assert finding_of(body) == "0123456789abcdef"
    assert "```suggestion\nx = 1\n\n```" in body
    assert "evil.test" not in body


def test_the_review_body_and_its_fallback_are_posted_clean() -> None:
    body = review_body(RUN, head="a" * 40, inline=1, outside=[FINDING], overflow=[FINDING])
    assert body.startswith(run_marker(RUN, "review") + "\n")
    assert problems(body, allowed_html=OWN) == []
    assert hidden_comments(body) == [run_marker(RUN, "review")]
    fallback = fallback_body(body, [FINDING])
    assert problems(fallback, allowed_html=OWN) == []
    assert hidden_comments(fallback) == [run_marker(RUN, "review")]


def test_the_summary_keeps_its_collapsed_file_list_and_cleans_the_model_summary() -> None:
    facts = SummaryFacts(
        base="b" * 40,
        previous=None,
        head="c" * 40,
        counts={"new": 1},
        reviewed=["src/app.py"],
        skipped=[("big.bin", "binary <img src=x>")],
    )
    summary = summary_text(facts, HOSTILE)
    body = render_outcome(Outcome("succeeded", summary, RUN, "review"))
    own = (
        *OWN,
        "<!-- bot:sticky=review -->",
        "<details><summary>Files reviewed: 1 · not reviewed: 1</summary>",
        "</details>",
    )
    assert problems(body, allowed_html=own) == []
    assert body.count("<details><summary>Files reviewed: 1 · not reviewed: 1</summary>") == 1
    assert body.count("</details>") == 1
    assert hidden_comments(body) == [run_marker(RUN, "review"), "<!-- bot:sticky=review -->"]
