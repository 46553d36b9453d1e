"""Tests for bot/publish/markdown_out.py: model-written Markdown posted without HTML, images,
hidden comments or links other than https."""

from __future__ import annotations

import pytest

from bot.publish.markdown_out import as_code_block, clean_model_markdown, clean_within
from tests.github._markdown_check import hidden_comments, problems


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        pytest.param("look ![cat](https://evil.test/pixel.png)", "cat", id="image"),
        pytest.param("![](https://evil.test/p.png)", "image", id="image-without-alt"),
        pytest.param('<img src="https://evil.test/p.png" alt="chart">', "chart", id="img-tag"),
        pytest.param("x <img src=https://evil.test/p.png> y", "x", id="inline-img-tag"),
        pytest.param("a <!-- hidden --> b", "a", id="inline-comment"),
        pytest.param("<!-- hidden\nover lines -->\nafter", "after", id="block-comment"),
        pytest.param(
            "<!-- bot:run=wf_0123456789ab kind=triage -->\n<!-- bot:sticky=triage -->\nok",
            "ok",
            id="forged-markers",
        ),
        pytest.param('<a href="javascript:alert(1)">click</a>', "click", id="a-javascript"),
        pytest.param("<a href=javascript:alert(1)>click</a>", "click", id="a-unquoted"),
        pytest.param("[click](http://x.test)", "click", id="http-link"),
        pytest.param("[click](javascript:alert(1))", "click", id="javascript-link"),
        pytest.param("[click](data:text/html;base64,PHNjcmlwdD4=)", "click", id="data-link"),
        pytest.param("[click](/relative)", "click", id="relative-link"),
        pytest.param("[click][r]\n\n[r]: http://x.test", "click", id="reference-http"),
        pytest.param("<http://x.test/a>", "x.test", id="autolink-http"),
        pytest.param("<javascript:alert(1)>", "alert", id="autolink-javascript"),
        pytest.param("<me@x.test>", "me@x.test", id="autolink-email"),
        pytest.param("see http://x.test/a.", "x.test", id="bare-http"),
        pytest.param("see www.x.test/a", "x.test", id="bare-www"),
        pytest.param("mail me@x.test", "me@x.test", id="bare-email"),
        pytest.param(
            "<details><summary>More</summary>\n\nhidden\n\n</details>", "More", id="details"
        ),
        pytest.param("<div>\n<p>para</p>\n<img src=a alt=b>\n</div>\n\nafter", "para", id="div"),
        pytest.param("> quoted <b>bold</b> ![x](http://e.test)", "bold", id="in-quote"),
        pytest.param("- item <span>x</span>\n  ![y](http://e.test)", "item", id="in-list"),
        pytest.param("# Title <img src=x alt=t>", "Title", id="in-heading"),
        pytest.param(
            "| a | b |\n|---|---|\n| ![x](http://e.test) | <i>y</i> `a\\|b` |", "y", id="in-table"
        ),
        pytest.param("[![badge](http://e.test/b.svg)](https://ok.test)", "badge", id="badge"),
        pytest.param("[x <img src=y> z](http://e.test)", "z", id="html-in-link-text"),
        pytest.param("<script>alert(1)</script>", "alert", id="script"),
        pytest.param("[t](https://ok.test 'a hidden title')", "t", id="link-title"),
    ],
)
def test_hostile_constructs_are_posted_clean(text: str, shown: str) -> None:
    out = clean_model_markdown(text)
    assert problems(out) == []
    assert hidden_comments(out) == []
    assert "bot:run" not in out and "bot:sticky" not in out
    assert shown in out.replace("\\", "")


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("Plain **bold** text with `code` and a list:\n\n- one\n- two", id="plain"),
        pytest.param("[docs](https://docs.test/a_b) and https://ok.test/x", id="https"),
        pytest.param("`<img src=x>` and `http://x.test` in code", id="code-span"),
        pytest.param("```html\n<img src=x>\n<!-- c -->\n```", id="fence"),
        pytest.param("    <img src=x> indented code", id="indented-code"),
        pytest.param("| a | b |\n|---|:-:|\n| 1 | `x\\|y` |", id="table"),
        pytest.param("a \\< b and 3 > 2", id="escaped"),
    ],
)
def test_ordinary_markdown_is_left_as_written(text: str) -> None:
    assert clean_model_markdown(text) == text


def test_https_links_stay_clickable() -> None:
    out = clean_model_markdown('[ref][r] and [t](https://a.test "title")\n\n[r]: https://b.test')
    assert "(<https://b.test>)" in out
    assert "(<https://a.test>)" in out
    assert problems(out) == []


def test_a_code_fence_left_open_is_closed() -> None:
    out = clean_model_markdown("```python\nprint(1)\n")
    assert out.rstrip().endswith("```")
    after = clean_model_markdown("```python\nprint(1)\n") + "\n\n<!-- bot:tail -->"
    assert problems(after, allowed_html=("<!-- bot:tail -->",)) == []
    assert hidden_comments(after) == ["<!-- bot:tail -->"]


def test_every_less_than_sign_in_running_text_is_escaped() -> None:
    out = clean_model_markdown("if a <= b or 1<2 (a <b c> is a tag)")
    assert out == "if a \\<= b or 1\\<2 (a  is a tag)"


def test_text_too_deeply_nested_is_posted_as_code() -> None:
    text = ">" * 150 + " ![x](http://e.test)"
    out = clean_model_markdown(text)
    assert out == as_code_block(text)
    assert problems(out) == []


def test_code_block_fallback_cannot_be_closed_from_inside() -> None:
    text = "````\n<img src=x>\n```"
    block = as_code_block(text)
    assert block.startswith("`````text\n")
    assert problems(block) == []


def test_a_cut_never_opens_a_code_span() -> None:
    text = "x" * 900 + " `<img src=https://evil.test/p.png>` and `http://evil.test`" * 20
    for limit in (930, 950, 1000, 1200):
        out = clean_within(text, limit)
        assert len(out) <= limit
        assert problems(out) == []
        assert "[truncated:" in out
    assert clean_within(text, 10) == ""


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("\n> .\\@awww.evil.test/x", id="escaped-at"),
        pytest.param("see www\\.evil.test/a", id="escaped-www-dot"),
        pytest.param("x http\\://evil.test", id="escaped-colon"),
        pytest.param("mailto\\:x@y.z", id="escaped-mailto"),
    ],
)
def test_an_escape_inside_a_bare_address_does_not_keep_it_a_link(text: str) -> None:
    """GitHub finds bare addresses in the text after escapes are undone."""
    cleaned = clean_model_markdown(text)
    assert problems(cleaned) == [], cleaned
    assert "`" in cleaned
