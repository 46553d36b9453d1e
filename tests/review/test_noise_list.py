"""The summary's collapsed list of findings not commented inline (`bot.workflows.review.noise`):
what it says, and that model-written titles and odd paths in it ping, close and inject nothing."""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

from bot.publish.render import render_outcome
from bot.workflows.review.noise import MAX_LISTED, not_inline_list
from bot.workflows.review.render import Shown
from policies.outcome import Outcome
from policies.review_state import StoredFinding

_MD = MarkdownIt("commonmark", {"html": True})
_LIVE_MENTION = re.compile(r"(?<![A-Za-z0-9_])@[A-Za-z0-9]")
ODD = "docs/a` @octo/security-team `b.md"
RUN = "wf_0123456789ab"


def shown(title: str, severity: str = "low", line: int = 3) -> Shown:
    return Shown("0123456789abcdef", ODD, line, line, severity, "bug", title, "why")


def codes(body: str) -> list[str]:
    return [
        c.content.replace("\u200b", "")
        for t in _MD.parse(body)
        for c in t.children or ()
        if c.type == "code_inline"
    ]


def test_nothing_to_list_is_no_list() -> None:
    assert not_inline_list([], [], min_severity="low") == ""


def test_one_collapsed_list_says_why_each_group_is_there() -> None:
    earlier = StoredFinding(
        fingerprint="e" * 20, path="a.py", line=9, severity="info", title="old", head="d" * 40
    )
    text = not_inline_list(
        [shown("minor")], [shown("major", "high", 5)], min_severity="medium", earlier=[earlier]
    )
    body = render_outcome(Outcome("succeeded", text, RUN, "review"))
    assert body.count("<details>") == 1 and body.count("</details>") == 1
    assert (
        "Not commented inline: 1 below review.min_severity (medium), 1 past "
        "review.max_comments, 1 from earlier reviews below review.min_severity"
    ) in body
    lines = [line for line in body.split("\n") if line.startswith("- **")]
    assert [line.split(": ", 1)[1] for line in lines] == [
        "major",
        "minor",
        f"old (since `{'d' * 12}`)",
    ]
    assert lines[2].startswith("- **info** `a.py:9`")


def test_titles_and_paths_ping_close_and_inject_nothing() -> None:
    title = "Closes #3 for @octo/team <img src=https://x.example/a.png> <!-- hidden -->"
    body = render_outcome(
        Outcome(
            "succeeded", not_inline_list([shown(title)], [], min_severity="medium"), RUN, "review"
        )
    )
    assert _LIVE_MENTION.search(body) is None, body
    assert "<img" not in body and "<!-- hidden" not in body
    # The path stays whole in its code span (its mention defused inside it).
    assert f"{ODD}:3" in codes(body)


def test_a_long_list_is_cut_with_a_count() -> None:
    text = not_inline_list(
        [shown(f"t{n}", line=n + 1) for n in range(MAX_LISTED + 5)], [], min_severity="medium"
    )
    assert text.count("\n- **low**") == MAX_LISTED
    assert "- … and 5 more" in text
