"""`policies.ui_context`: a delivery's sender, command and title, from any JSON."""

from __future__ import annotations

import pytest

from policies.ui_context import COMMAND_CHARS, Context, command_line, context_of


def comment(body: object, *, title: str = "Crash") -> dict[str, object]:
    return {
        "comment": {"body": body},
        "issue": {"title": title},
        "sender": {"login": "alice"},
    }


@pytest.mark.parametrize(
    ("event", "payload", "expected"),
    [
        pytest.param(
            "issue_comment",
            comment("Thanks!\n\n@bot fix the parser please\nmore"),
            Context(sender="alice", command="@bot fix the parser please", title="Crash"),
            id="command-line",
        ),
        pytest.param(
            "issue_comment",
            comment("> quoted\n/review full"),
            Context(sender="alice", command="/review full", title="Crash"),
            id="slash-command",
        ),
        pytest.param(
            "issues",
            comment("@bot fix"),
            Context(sender="alice", command=None, title="Crash"),
            id="not-a-comment-event",
        ),
        pytest.param(
            "pull_request",
            {"pull_request": {"title": "Add x"}, "issue": {"title": "no"}, "sender": {}},
            Context(sender=None, command=None, title="Add x"),
            id="pull-title-first",
        ),
        pytest.param(
            "issue_comment",
            {"comment": {"body": 7}, "issue": ["x"], "sender": "alice"},
            Context(),
            id="wrong-shapes",
        ),
        pytest.param("issues", None, Context(), id="no-payload"),
        pytest.param("issues", [1, 2], Context(), id="a-list"),
    ],
)
def test_context_of(event: str, payload: object, expected: Context) -> None:
    assert context_of(event, payload, "bot") == expected


def test_a_command_line_is_cut_and_without_a_slug_any_mention_counts() -> None:
    line = command_line("hello\n@someone " + "x" * 500, None)
    assert line is not None and len(line) == COMMAND_CHARS and line.endswith("…")
    assert command_line("first line\nsecond", "bot") == "first line"
    assert command_line(" \n\t\n", "bot") is None
    assert command_line("@BOT Review", "bot") == "@BOT Review"


def test_a_long_title_is_cut() -> None:
    ctx = context_of("issues", {"issue": {"title": "t" * 500}}, None)
    assert ctx.title is not None and len(ctx.title) == 120
