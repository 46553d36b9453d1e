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


def test_help_lists_every_command() -> None:
    text = render_help("my-app", slash_commands=True)
    for name in COMMANDS:
        assert f"`@my-app {name}`" in text
    assert "/<command>" in text
    assert "/<command>" not in render_help("my-app")
    assert "@<app> review" in HELP_TEXT


PIECES = ["@app-slug", "@", "`", "```", "~~~", ">", "\n", "\r\n", " ", "    ", "\t", "/", "review"]
PIECES += ["ask", "fix", "x", "(", ")", "<!--", "-->", "-", ":", "é", "\u200b"]


def test_any_text_parses_to_a_known_command_or_none() -> None:
    """Seeded random comments built from the grammar's own symbols never break the parser."""
    rnd = random.Random(7)
    for _ in range(3000):
        body = "".join(rnd.choice(PIECES) for _ in range(rnd.randint(0, 30)))
        for slash in (True, False):
            command = parse_command(body, app_slug=SLUG, slash_commands=slash)
            assert command is None or command.name in {*COMMANDS, "unknown"}, repr(body)
        assert len(strip_non_prose(body)) == len(body.replace("\r\n", "\n")), repr(body)
