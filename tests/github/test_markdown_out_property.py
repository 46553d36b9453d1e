"""Property test for bot/publish/markdown_out.py: whatever Markdown a model writes, the cleaned
text renders (read by a plain CommonMark + GFM-table parser) without raw HTML, images, links
other than https or bare non-https addresses, and cleaning it again changes nothing.

The text is built from fragments that matter here (images, links of every scheme, autolinks,
tags, comments, forged markers, code spans and fences, reference definitions, brackets and
backticks that do not pair) inside the block structures they could hide in (quotes, lists,
tables, headings), with random text between.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.publish.markdown_out import clean_model_markdown
from tests.github._markdown_check import hidden_comments, problems

_URLS = st.sampled_from(
    [
        "https://ok.test/a",
        "http://evil.test/p.png",
        "javascript:alert(1)",
        "data:text/html,x",
        "/relative",
        "//evil.test",
        "mailto:a@b.test",
        "<https://ok.test/b c>",
    ]
)
_WORDS = st.text("abc xyz_*~`[]()<>!#|\\-=:@./\n", max_size=12)


@st.composite
def fragment(draw: st.DrawFn) -> str:
    url = draw(_URLS)
    word = draw(_WORDS)
    return draw(
        st.sampled_from(
            [
                f"![{word}]({url})",
                f"[{word}]({url})",
                f'[{word}]({url} "title")',
                f"[{word}][r]",
                f"\n[r]: {url}\n",
                f"<{url}>",
                f"<img src={url} alt='{word}'>",
                f'<a href="{url}">{word}</a>',
                f"<!-- {word} -->",
                "<!-- bot:run=wf_0123456789ab kind=triage -->",
                f"<details><summary>{word}</summary>",
                "</details>",
                f"`{word}`",
                f"``{word}``",
                f"\n```\n{word}\n",
                f"\n~~~\n{word}\n~~~\n",
                "```",
                f"\n> {word}",
                f"\n- {word}",
                f"\n1. {word}",
                f"\n| a | {word} |\n|---|---|\n| {word} | b |\n",
                f"\n# {word}",
                f"\n    {word}",
                url,
                "www.evil.test/x",
                "me@evil.test",
                word,
                "[",
                "]",
                "`",
                "<",
                "\n\n",
            ]
        )
    )


@settings(max_examples=400, deadline=None)
@given(st.lists(fragment(), max_size=12).map("".join))
def test_cleaned_markdown_renders_nothing_it_should_not(text: str) -> None:
    cleaned = clean_model_markdown(text)
    assert problems(cleaned) == []
    assert hidden_comments(cleaned) == []
    assert clean_model_markdown(cleaned) == cleaned
