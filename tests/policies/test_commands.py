"""The comment command grammar: mentions, slash commands, and what does not count."""

from __future__ import annotations

import random

import pytest

from policies.commands import (
    COMMANDS,
    HELP_TEXT,
    Command,
    parse_command,
    render_help,
    strip_non_prose,
)

SLUG = "app-slug"


def parse(body: str, *, slash: bool = False) -> Command | None:
    return parse_command(body, app_slug=SLUG, slash_commands=slash)


FOUND = [
    pytest.param("@app-slug review", Command("review", "", "review"), id="review"),
    pytest.param("@app-slug fix", Command("fix", "", "fix"), id="fix"),
    pytest.param("@app-slug stop", Command("stop", "", "stop"), id="stop"),
    pytest.param("@app-slug status", Command("status", "", "status"), id="status"),
    pytest.param("@app-slug help", Command("help", "", "help"), id="help"),
    pytest.param("@app-slug fix the failing test in ci", Command("fix", "the failing test in ci", "fix"), id="args"),
    pytest.param("@APP-SLUG Review", Command("review", "", "Review"), id="case-insensitive"),
    pytest.param("@app-slug[bot] status", Command("status", "", "status"), id="bot-suffix"),
    pytest.param("@app-slug: review", Command("review", "", "review"), id="colon"),
    pytest.param("@app-slug, review", Command("review", "", "review"), id="comma"),
    pytest.param("@app-slug\treview", Command("review", "", "review"), id="tab"),
    pytest.param("(@app-slug review)", Command("review", "", "review"), id="parentheses"),
    pytest.param("(@app-slug fix the typo)", Command("fix", "the typo", "fix"), id="parentheses-args"),
    pytest.param("Nice work!\n\n@app-slug review", Command("review", "", "review"), id="later-line"),
    pytest.param("please @app-slug review this", Command("review", "this", "review"), id="mid-sentence"),
    pytest.param("cc @app-slug.", Command("help"), id="bare-mention-is-help"),
    pytest.param("@app-slug", Command("help"), id="mention-alone"),
    pytest.param("@app-slug\nreview", Command("help"), id="command-on-next-line"),
    pytest.param("@app-slug frobnicate", Command("unknown", "", "frobnicate"), id="unknown"),
    pytest.param("thanks @app-slug for the help", Command("unknown", "", "for"), id="unknown-mid-sentence"),
    pytest.param("@app-slug review\n@app-slug fix", Command("review", "", "review"), id="first-counts"),
    pytest.param("@app-slug ask", Command("ask", "", "ask"), id="ask-without-question"),
    pytest.param("@app-slug ask why?", Command("ask", "why?", "ask"), id="ask"),
    pytest.param("@app-slug decide 2", Command("decide", "2", "decide"), id="decide-number"),
    pytest.param('@app-slug decide "use the cache"\nthanks', Command("decide", '"use the cache"', "decide"), id="decide-own-words-one-line"),
    pytest.param("@app-slug decide", Command("decide", "", "decide"), id="decide-bare"),
    pytest.param("@app-slug ask what does `parse()` return?", Command("ask", "what does `parse()` return?", "ask"), id="ask-keeps-code"),
    pytest.param("@app-slug ask line one\nline two\n\nnot this", Command("ask", "line one\nline two", "ask"), id="ask-paragraph"),
    pytest.param("@app-slug ask line one\r\nline two", Command("ask", "line one\nline two", "ask"), id="ask-crlf"),
    pytest.param("@app-slug ask why\n```\ncode\n```", Command("ask", "why", "ask"), id="ask-stops-at-fence"),
    pytest.param("@app-slug fix one\nnext line", Command("fix", "one", "fix"), id="args-one-line"),
    pytest.param("@app-slug ask why\n> quoted\nmore", Command("ask", "why", "ask"), id="ask-stops-at-quote"),
    pytest.param("@app-slug ask why\n  \t\nmore", Command("ask", "why", "ask"), id="ask-stops-at-blank-line"),
    pytest.param("@app-slug ask why <!-- hidden --> now", Command("ask", "why  now", "ask"), id="ask-drops-html-comment"),
    pytest.param("@app-slug fix it <!-- unclosed", Command("fix", "it", "fix"), id="unclosed-comment-in-args"),
    pytest.param("@app-slug review.", Command("review", "", "review"), id="punctuation-only-args"),
    pytest.param("@app-slug fix!!", Command("fix", "", "fix"), id="exclamations"),
    pytest.param("> @app-slug fix\n\n@app-slug review", Command("review", "", "review"), id="quote-then-command"),
    pytest.param("```\n@app-slug fix\n```\n@app-slug status", Command("status", "", "status"), id="fence-then-command"),
    pytest.param("  @app-slug review", Command("review", "", "review"), id="indented-2"),
    pytest.param("text\n    @app-slug review", Command("review", "", "review"), id="indented-continuation"),
    pytest.param("    log line\n\n@app-slug review", Command("review", "", "review"), id="after-indented-code"),
    pytest.param("> quote\n\n@app-slug fix", Command("fix", "", "fix"), id="after-quote-blank-line"),
    pytest.param("> ```\n@app-slug fix", Command("fix", "", "fix"), id="fence-in-quote-is-not-lazy"),
    pytest.param("<!-- note -->\n@app-slug fix", Command("fix", "", "fix"), id="after-comment-line"),
    pytest.param("<details>\n\nold\n\n</details>\n\n@app-slug fix", Command("fix", "", "fix"), id="after-details"),
    pytest.param("<blockquote>old</blockquote>\n\n@app-slug fix", Command("fix", "", "fix"), id="after-html-quote"),
    pytest.param("text </details> @app-slug fix", Command("fix", "", "fix"), id="stray-closing-tag"),
    pytest.param("- <details>\n\n@app-slug fix", Command("fix", "", "fix"), id="details-closed-by-list-end"),
    pytest.param("> <details>\n\n@app-slug fix", Command("fix", "", "fix"), id="details-closed-by-quote-end"),
    pytest.param("`code` and @app-slug fix it", Command("fix", "it", "fix"), id="after-code-span"),
    pytest.param("<i>note</i> @app-slug review", Command("review", "", "review"), id="after-inline-tag"),
    pytest.param("- @app-slug fix it", Command("fix", "it", "fix"), id="list-item"),
    pytest.param("1. note\n2. @app-slug review", Command("review", "", "review"), id="ordered-list-item"),
    pytest.param("# @app-slug fix it #", Command("fix", "it", "fix"), id="heading"),
    pytest.param("Why\n===\n@app-slug review", Command("review", "", "review"), id="after-setext-heading"),
    pytest.param("@app-slug ask why\n# Heading", Command("ask", "why", "ask"), id="ask-stops-at-heading"),
    pytest.param("- @app-slug ask why\n  and how\n- next", Command("ask", "why\n  and how", "ask"), id="ask-in-list-item"),
    pytest.param("Text <!-- open\n\n@app-slug fix", Command("fix", "", "fix"), id="comment-opener-as-text"),
    pytest.param("@app-slug fix \u0000x", Command("fix", "\ufffdx", "fix"), id="nul"),
]  # fmt: skip


@pytest.mark.parametrize(("body", "expected"), FOUND)
def test_mention(body: str, expected: Command) -> None:
    assert parse(body) == expected


NOT_FOUND = [
    pytest.param("", id="empty"),
    pytest.param("Looks good to me.", id="no-mention"),
    pytest.param("email@app-slug review", id="email-like"),
    pytest.param("@app-slug-x review", id="longer-name"),
    pytest.param("@app-slug2 review", id="name-with-digit"),
    pytest.param("x-@app-slug review", id="hyphen-before"),
    pytest.param("@other review", id="other-user"),
    pytest.param("> @app-slug fix", id="quoted"),
    pytest.param("  > > @app-slug fix", id="nested-quote"),
    pytest.param("```\n@app-slug fix\n```", id="fenced"),
    pytest.param("~~~python\n@app-slug fix\n~~~", id="tilde-fence"),
    pytest.param("````\n```\n@app-slug fix\n````", id="longer-fence"),
    pytest.param("```\nnever closed\n@app-slug fix", id="unclosed-fence"),
    pytest.param("run `@app-slug fix` to ask", id="inline-code"),
    pytest.param("run ``@app-slug `fix` `` to ask", id="double-backtick-code"),
    pytest.param("    @app-slug fix", id="indented-code"),
    pytest.param("Log:\n\n\t@app-slug fix", id="indented-code-tab"),
    pytest.param("Log:\n\n    line one\n\n    @app-slug fix", id="indented-code-continues"),
    pytest.param("<!-- @app-slug fix -->", id="html-comment"),
    pytest.param("<!-- unclosed\n@app-slug fix", id="unclosed-html-comment"),
    pytest.param("/review", id="slash-disabled"),
    pytest.param("> quote\n@app-slug fix", id="lazy-quote-continuation"),
    pytest.param("> quote\nmore\n@app-slug fix", id="lazy-quote-third-line"),
    pytest.param("- > quote\n@app-slug fix", id="lazy-quote-in-list"),
    pytest.param("> - item\n@app-slug fix", id="lazy-list-in-quote"),
    pytest.param("<details>\n\n@app-slug fix\n\n</details>", id="details"),
    pytest.param("<details>\n<summary>Log</summary>\n\n@app-slug fix\n\n</details>", id="details-with-summary"),
    pytest.param("<DETAILS open>\n\n@app-slug fix\n\n</Details>", id="details-any-case"),
    pytest.param("<details>\n\n@app-slug fix", id="details-unclosed"),
    pytest.param("<details>\n\n<details>\n\nx\n\n</details>\n\n@app-slug fix\n\n</details>", id="details-nested"),
    pytest.param("text <details> @app-slug fix </details>", id="details-inline"),
    pytest.param("<blockquote>@app-slug fix</blockquote>", id="html-blockquote"),
    pytest.param("<blockquote>\n\n@app-slug fix\n\n</blockquote>", id="html-blockquote-paragraph"),
    pytest.param("<q>@app-slug fix</q>", id="html-q"),
    pytest.param("<code>@app-slug fix</code>", id="html-code"),
    pytest.param("<pre>\n\n@app-slug fix\n\n</pre>", id="html-pre"),
    pytest.param("<!--\n\n@app-slug fix\n\n-->", id="html-comment-paragraphs"),
    pytest.param("<div><!--\n\n@app-slug fix\n\n-->", id="comment-opened-in-html-block"),
    pytest.param("<div>\n<!-- a --><!-- b\n\n@app-slug fix", id="second-comment-unclosed"),
    pytest.param("<div><!---->\n<!-->x<!--->y<!-- z\n\n@app-slug fix", id="empty-comments-then-open"),
    pytest.param("<div><!-- x --!>\n\nfine\n\n<div><!--\n\n@app-slug fix", id="bang-closed-comment"),
    pytest.param("<div>@app-slug fix</div>", id="html-block-text"),
    pytest.param("![@app-slug fix](image.png)", id="image-alt"),
    pytest.param('[docs](https://example.com "@app-slug fix")', id="link-title"),
    pytest.param("![see [@app-slug fix](https://example.com)](image.png)", id="link-in-image-alt"),
    pytest.param('[docs][ref]\n\n[ref]: https://example.com "@app-slug fix"', id="reference-title"),
    pytest.param("<details>\n\n    code\n\n@app-slug fix", id="details-with-code-inside"),
    pytest.param("<details>\n\n> </details>\n\n@app-slug fix", id="close-inside-quote-does-not-count"),
    pytest.param("<details>\n\n- </details>\n\n@app-slug fix", id="close-inside-list-does-not-count"),
]  # fmt: skip


@pytest.mark.parametrize("body", NOT_FOUND)
def test_not_addressed(body: str) -> None:
    assert parse(body) is None


SLASH = [
    pytest.param("/review", Command("review", "", "review"), id="review"),
    pytest.param("/fix the typo", Command("fix", "the typo", "fix"), id="args"),
    pytest.param("/ask why\nand how", Command("ask", "why\nand how", "ask"), id="ask-paragraph"),
    pytest.param("   /status", Command("status", "", "status"), id="indented-3"),
    pytest.param("First line\n/help", Command("help", "", "help"), id="later-line"),
    pytest.param("/cc @someone\n/review", Command("review", "", "review"), id="skips-foreign-slash"),
    pytest.param("/fix one\n@app-slug review", Command("fix", "one", "fix"), id="slash-first"),
    pytest.param("@app-slug review\n/fix one", Command("review", "", "review"), id="mention-first"),
    pytest.param("@app-slug bogus\n/fix", Command("unknown", "", "bogus"), id="unknown-mention-first"),
    pytest.param("> quote\n\n/fix", Command("fix", "", "fix"), id="after-quote"),
    pytest.param("- item\n  /fix", Command("fix", "", "fix"), id="in-list-continuation"),
    pytest.param("/ask why\n> quoted", Command("ask", "why", "ask"), id="ask-stops-at-quote"),
]  # fmt: skip


@pytest.mark.parametrize(("body", "expected"), SLASH)
def test_slash_command(body: str, expected: Command) -> None:
    assert parse(body, slash=True) == expected


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("see /path/to/file", id="mid-line"),
        pytest.param("/frobnicate", id="unknown-word"),
        pytest.param("/label bug", id="other-tool"),
        pytest.param("> /fix", id="quoted"),
        pytest.param("```\n/fix\n```", id="fenced"),
        pytest.param("    /fix", id="indented-4"),
        pytest.param("x\n\t/fix", id="tab-indented"),
        pytest.param("/ fix", id="space-after-slash"),
        pytest.param("> quote\n/fix", id="lazy-quote-continuation"),
        pytest.param("<details>\n\n/fix\n\n</details>", id="details"),
        pytest.param("- /fix", id="list-marker"),
        pytest.param("# /fix", id="heading"),
        pytest.param("`/fix`", id="code-span"),
    ],
)
def test_slash_not_a_command(body: str) -> None:
    assert parse(body, slash=True) is None


def test_slug_is_matched_literally() -> None:
    assert parse_command("@a.b review", app_slug="a.b", slash_commands=False) == Command(
        "review", "", "review"
    )
    assert parse_command("@axb review", app_slug="a.b", slash_commands=False) is None


def test_strip_non_prose_keeps_offsets() -> None:
    body = "a `b` c\n> q\n```\nx\n```\nd <!-- e --> f"
    stripped = strip_non_prose(body)
    assert len(stripped) == len(body)
    assert stripped.count("\n") == body.count("\n")
    assert stripped.split() == ["a", "c", "d", "f"]


def test_large_body_is_linear_enough() -> None:
    """GitHub allows 65,536 characters; an unmatched backtick run must not go quadratic."""
    body = "`" + " ``" * 20_000 + " ``` @app-slug review"
    assert parse(body) == Command("review", "", "review")


LIMIT = 65_536
"""The longest comment GitHub accepts, in characters."""


def fill(piece: str, tail: str) -> str:
    """`piece` repeated to fill a maximal comment, then `tail`."""
    return piece * ((LIMIT - len(tail)) // len(piece)) + tail


LARGE = [
    pytest.param(fill("<!-- ", "\n\n@app-slug review"), None, id="unclosed-comment-openers"),
    pytest.param(fill("x <!-- ", "@app-slug review"), Command("review", "", "review"), id="inline-comment-openers"),
    pytest.param(fill("x <? ", "@app-slug review"), Command("review", "", "review"), id="instruction-openers"),
    pytest.param(fill("x <![CDATA[ ", "@app-slug review"), Command("review", "", "review"), id="cdata-openers"),
    pytest.param(fill("x <!A ", "@app-slug review"), Command("review", "", "review"), id="declaration-openers"),
    pytest.param(fill("[", "@app-slug review"), Command("review", "", "review"), id="link-openers"),
    pytest.param(fill("![", "@app-slug review"), Command("review", "", "review"), id="image-openers"),
    pytest.param(fill("[a](", "@app-slug review"), Command("review", "", "review"), id="link-destinations"),
    pytest.param(fill("`` `", "@app-slug review"), Command("review", "", "review"), id="backtick-runs"),
    pytest.param(fill("*a _", "@app-slug review"), Command("review", "", "review"), id="emphasis-openers"),
    pytest.param(fill("<a b='", "@app-slug review"), Command("review", "", "review"), id="tag-openers"),
    pytest.param(fill("<details>", " @app-slug review"), None, id="inline-details"),
    pytest.param(fill("<details>\n\n", "@app-slug review"), None, id="details-blocks"),
    pytest.param(fill("</details>x\n\n", "@app-slug review"), Command("review", "", "review"), id="stray-closes"),
    pytest.param(fill("> ", "@app-slug review"), None, id="deep-quotes"),
    pytest.param(fill("- ", "@app-slug review"), None, id="deep-lists"),
    pytest.param(fill("> a\n", "@app-slug review"), None, id="long-quote"),
    pytest.param(fill("a\n", "@app-slug ask why"), Command("ask", "why", "ask"), id="long-paragraph"),
    pytest.param(fill("[a]: b\n", "@app-slug review"), Command("review", "", "review"), id="reference-definitions"),
]  # fmt: skip


@pytest.mark.parametrize(("body", "expected"), LARGE)
def test_maximal_comment(body: str, expected: Command | None) -> None:
    """Bodies that make careless parsers quadratic still parse to the right answer."""
    assert LIMIT - 20 < len(body) <= LIMIT
    assert parse(body) == expected


def test_help_lists_every_command() -> None:
    text = render_help("my-app", slash_commands=True)
    for name in COMMANDS:
        assert f"`@my-app {name}`" in text
    assert "/<command>" in text
    assert "/<command>" not in render_help("my-app")
    assert "@<app> review" in HELP_TEXT


PIECES = ["@app-slug", "@", "`", "```", "~~~", ">", "\n", "\r\n", " ", "    ", "\t", "/", "review"]
PIECES += ["ask", "fix", "x", "(", ")", "<!--", "-->", "-", ":", "é", "\u200b", "\u00a0", "\x00"]
PIECES += [
    "<details>",
    "</details>",
    "<q>",
    "</q>",
    "![",
    "[",
    "]",
    "](",
    '"',
    "#",
    "1.",
    "*",
    "\\",
]


def test_any_text_parses_to_a_known_command_or_none() -> None:
    """Seeded random comments built from the grammar's own symbols never break the parser."""
    rnd = random.Random(7)
    for _ in range(3000):
        body = "".join(rnd.choice(PIECES) for _ in range(rnd.randint(0, 30)))
        for slash in (True, False):
            command = parse_command(body, app_slug=SLUG, slash_commands=slash)
            assert command is None or command.name in {*COMMANDS, "unknown"}, repr(body)
        assert len(strip_non_prose(body)) == len(body.replace("\r\n", "\n")), repr(body)
