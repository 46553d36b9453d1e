"""What `fix` opens and pushes says only what the app means: its own `Fixes #n` is the only
closing keyword, its own `Co-authored-by` the only trailer, and no model text pings anyone."""

from __future__ import annotations

import re

import pytest

from policies.fix import agent_commit_message, pull_request_text
from policies.outcome import UsageSummary

_CLOSING = re.compile(
    r"(?i)(?<![A-Za-z0-9_])(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)(?![A-Za-z0-9_])"
    r"[\W_]{0,16}?(?:#|[\w.-]+/[\w.-]+#|https?://)"
)
_LIVE_MENTION = re.compile(r"(?<![A-Za-z0-9_])@[A-Za-z0-9]")
HOSTILE = "Closes #3 and @octo/security-team; resolves https://github.com/octo/hello/issues/4"


@pytest.mark.parametrize("closes", [True, False])
def test_model_text_in_the_pull_request_closes_and_pings_nothing(closes: bool) -> None:
    title, body = pull_request_text(
        number=7,
        title=f"greet {HOSTILE}",
        summary=f"It works.\n\n{HOSTILE}\n\n```suggestion\nx\n```",
        check=None,
        assumptions=[HOSTILE],
        usage=UsageSummary(),
        closes=closes,
    )
    found = [m.group() for m in _CLOSING.finditer(body)]
    assert found == (["Fixes #"] if closes else [])
    assert _CLOSING.search(title) is None
    assert _LIVE_MENTION.search(body) is None and _LIVE_MENTION.search(title) is None
    assert "```suggestion" not in body
    assert body.replace("\u200b", "").count(HOSTILE) == 2  # still readable


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        pytest.param(
            [
                "Fix the greeting\n\nBecause.\n\nSigned-off-by: M <m@evil.test>\n"
                "Reviewed-by: E <e@evil.test>\nCo-authored-by: E <e@evil.test>"
            ],
            "Fix the greeting\n\nBecause.",
            id="trailer-block",
        ),
        pytest.param(
            ["Fix it\n\nsigned-off-by: M <m@x>\nThe body goes on.\n  Acked-By: A <a@x>"],
            "Fix it\n\nThe body goes on.",
            id="person-trailers-anywhere",
        ),
        pytest.param(
            ["Fix it\n\nBody.\n\nChange-Id: I1234\nFixes: #3"],
            "Fix it\n\nBody.",
            id="git-trailer-paragraph",
        ),
        pytest.param(
            ["Fix it", "Co-authored-by: E <e@x>", "Second step"],
            "Fix it\n\n- Second step",
            id="later-messages",
        ),
        pytest.param(["Signed-off-by: M <m@x>"], "Apply the requested fix", id="only-a-trailer"),
        pytest.param(["", "  "], "Apply the requested fix", id="none"),
    ],
)
def test_the_agents_trailers_never_reach_the_pushed_commit(
    messages: list[str], expected: str
) -> None:
    assert agent_commit_message(messages) == expected


def test_closing_keywords_in_the_agents_message_are_defused() -> None:
    message = agent_commit_message(["Closes #3: greet\n\nAlso fixes octo/hello#4.", "Resolve #5"])
    assert _CLOSING.search(message) is None, message
    assert message.replace("\u200b", "") == (
        "Closes #3: greet\n\nAlso fixes octo/hello#4.\n- Resolve #5"
    )
