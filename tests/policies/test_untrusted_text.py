"""Tests for policies/untrusted_text.py: the one escaping path for text the app did not write.

The code span is checked against a CommonMark parser (markdown-it-py) with random strings: it
must come out as exactly one code span holding the same text (line ends read as spaces, as
CommonMark reads them inside a span), whatever backticks, spaces and markup the string holds,
and wherever in a line of the app's it stands. The rest are the attacks: mentions, closing
keywords, hidden comments and suggestion fences in text a model or a person wrote.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token

from policies.untrusted_text import ZWSP, code_span, defuse, plain_fences, untrusted

_MD = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
_ALPHABET = st.sampled_from(
    [*"ab `` ```\n\r\t<>!-@/#*_~[]()\\|:.é", "<!--", "-->", "@octo/team", "Closes #3"]
)
_TEXT = st.lists(_ALPHABET, max_size=30).map("".join)


def _inline(body: str) -> list[Token]:
    tokens = _MD.parse(body)
    return [child for token in tokens if token.children for child in token.children]


def _visible(text: str) -> str:
    """The text as a reader sees it: the zero-width spaces that defuse it left out."""
    return text.replace(ZWSP, "")


def _flat(text: str) -> str:
    return re.sub(r"\r\n|\r|\n", " ", text)


@settings(max_examples=400, deadline=None)
@given(_TEXT)
@example("docs/a` @octo/security-team `b.md")
@example("` a `")
@example("``")
@example("   ")
@example(" x")
@example("x\n")
def test_any_string_is_one_code_span_with_the_same_text(text: str) -> None:
    assume(text)
    span = code_span(text)
    for line, around in ((span, ""), (f"- see {span}: why", "see : why"), (f"| {span} |", "|  |")):
        inline = _inline(line)
        codes = [t for t in inline if t.type == "code_inline"]
        assert len(codes) == 1, (text, line)
        assert _visible(codes[0].content) == _flat(text), (text, line)
        # Nothing of the string leaks out of the span into the line around it.
        assert "".join(t.content for t in inline if t.type != "code_inline") == around


def test_a_code_span_defuses_what_it_holds() -> None:
    span = code_span("docs/a` @octo/security-team `b.md <!-- bot:review-state x -->")
    assert "<!--" not in span and "@octo" not in span
    assert _visible(span).count("@octo/security-team") == 1


@pytest.mark.parametrize(
    ("text", "live"),
    [
        pytest.param("ping @octocat now", "@octocat", id="user"),
        pytest.param("@acme/security", "@acme", id="team-at-start"),
        pytest.param("(@a) and\n@b", "@b", id="punctuation-newline"),
        pytest.param("`@decorator`", "@decorator", id="code-span-start"),
        pytest.param("see src/@types/x", "@types", id="after-a-slash"),
        pytest.param("a `` `@team", "@team", id="after-backticks"),
        pytest.param("\\@octo", "@octo", id="escaped"),
        pytest.param("&#64;octo and &#x40;octo and &commat;octo", "octo", id="entities"),
    ],
)
def test_mentions_are_defused(text: str, live: str) -> None:
    out = defuse(text)
    assert not re.search(r"(?<![A-Za-z0-9_])@[A-Za-z0-9]", out), out
    assert live.lstrip("@") in out
    assert "&#64;" not in out and "&#x40;" not in out and "&commat;" not in out


@pytest.mark.parametrize("text", ["mail a@b.io", "@ alone", "x@y", "a @ b"])
def test_what_is_no_mention_stays(text: str) -> None:
    assert defuse(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "Closes #3",
        "this fixes #12.",
        "Resolved: #4",
        "FIXED #5",
        "close octo/hello#6",
        "resolves https://github.com/octo/hello/issues/7",
        "Fixes\n#8",
        "fixes \\#9",
        "closes &#35;10",
    ],
)
def test_closing_keywords_are_defused(text: str) -> None:
    out = defuse(text)
    keyword = re.compile(r"(?i)\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\b")
    assert not keyword.search(out), out
    assert _visible(out) == text


@pytest.mark.parametrize("text", ["fixes the bug", "closed for now", "prefix #3", "fixture #2"])
def test_keywords_without_an_issue_stay(text: str) -> None:
    assert defuse(text) == text


def test_hidden_comments_are_neutralised() -> None:
    out = defuse("a <!-- bot:review-state {} --> b <!---> c")
    assert "<!--" not in out and _visible(out) == "a <!-- bot:review-state {} --> b <!---> c"


def test_defusing_twice_changes_nothing() -> None:
    text = "Closes #3 @octo/team <!-- x --> `@a` fixes octo/r#1"
    assert defuse(defuse(text)) == defuse(text)


@pytest.mark.parametrize(
    "text",
    [
        "```suggestion\nx = 1\n```",
        "Intro\n```suggestion\nx = 1\n```\n",
        "   ~~~suggestion  extra\nx\n~~~",
        "> ```suggestion\n> x\n> ```",
        "- item\n\n  ````suggestion\n  x\n  ````",
        "1. > ```Suggestion\n   > x",
        "```python\nprint(1)\n```",
    ],
)
def test_every_fence_in_untrusted_text_is_plain(text: str) -> None:
    out = plain_fences(text)
    infos = [t.info for t in _MD.parse(out) if t.type == "fence"]
    assert infos and all(info == "" for info in infos), (out, infos)
    assert untrusted(text).count("\n") == text.count("\n")


def test_inline_code_that_looks_like_a_fence_stays() -> None:
    assert plain_fences("```suggestion x```") == "```suggestion x```"
