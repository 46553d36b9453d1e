"""Tests for policies/config_notice.py: what the app says on GitHub about a broken config.

The error text comes from the repository's own file (keys, values, YAML's messages), so it
must reach GitHub without pinging anyone, opening a hidden comment or breaking out of the
code it is shown in; the sentences around it are the app's, fixed.
"""

from __future__ import annotations

import re

import pytest
from markdown_it import MarkdownIt

from policies.config import ConfigError, parse_repo_config
from policies.config_notice import CHECK_TITLE, MAX_PROBLEMS, config_error_check, config_error_reply
from policies.untrusted_text import ZWSP

SYNTAX = ".github/bot.yml line 1, column 5: invalid YAML: mapping values are not allowed here"
EXTENDED = (
    "octo/settings:.github/bot.yml line 2, column 1: invalid YAML: expected ',' or ']', but "
    "got '<stream end>' (while parsing a flow sequence started on line 1)"
)
_MD = MarkdownIt("commonmark", {"html": True})


def error_of(text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_repo_config(text)
    return str(caught.value)


def code_spans(markdown: str) -> list[str]:
    return [
        child.content
        for token in _MD.parse(markdown)
        if token.type == "inline"
        for child in token.children or []
        if child.type == "code_inline"
    ]


@pytest.mark.parametrize(
    ("detail", "file", "where", "what"),
    [
        pytest.param(SYNTAX, ".github/bot.yml", "line 1, column 5", "invalid YAML: mapping values are not allowed here", id="syntax"),
        pytest.param(EXTENDED, "octo/settings:.github/bot.yml", "line 2, column 1", "invalid YAML: expected ',' or ']'", id="extends-file"),
        pytest.param(".github/bot.yml: _extends: _extends loops back to octo/a:.github/bot.yml", ".github/bot.yml", "", "_extends loops back", id="no-line"),
        pytest.param('.github/bot.yml line 2: triage.enabled: expected true or false, got "sometimes"', ".github/bot.yml", "line 2", 'triage.enabled: expected true or false, got "sometimes"', id="line-only"),
    ],
)  # fmt: skip
def test_the_reply_names_the_file_line_column_and_error(
    detail: str, file: str, where: str, what: str
) -> None:
    reply = config_error_reply(detail, command="ask")
    spans = code_spans(reply)
    assert file in spans
    assert any(what in span for span in spans), reply
    if where:
        assert f"`{file}` {where}:" in reply
    assert "stays off in this repository until" in reply
    assert "`ask` was not run" in reply


def test_the_check_says_the_same_without_a_command() -> None:
    check = config_error_check(SYNTAX)
    assert check["title"] == CHECK_TITLE
    assert "`.github/bot.yml` line 1, column 5:" in check["summary"]
    assert "stays off in this repository until" in check["summary"]
    assert "was not run" not in check["summary"]


def test_text_from_the_file_pings_nobody_and_hides_nothing() -> None:
    detail = error_of('review:\n  "@octo/admins <!-- x `y`": 1\n  drafts: "@alice closes #3"\n')
    for text in (
        config_error_reply(detail, command="review"),
        config_error_check(detail)["summary"],
    ):
        assert "<!--" not in text
        assert not re.search(r"(?<![\w`])@(?=[A-Za-z])", text), text
        assert f"@{ZWSP}octo/admins" in text and f"@{ZWSP}alice" in text
        assert "closes #3" not in text.replace(ZWSP, "") or f"c{ZWSP}loses" in text
        # Every piece of the file's text stays inside its code span.
        spans = code_spans(text)
        assert any("octo/admins" in span for span in spans)
        assert any("alice" in span for span in spans)


def test_a_line_that_does_not_read_as_a_location_is_still_shown_as_code() -> None:
    reply = config_error_reply("something odd **bold** @team", command=None)
    assert "`something odd **bold** @\u200bteam`" in reply
    assert "was not run" not in reply


def test_many_problems_are_cut_with_a_count() -> None:
    detail = "\n".join(f".github/bot.yml line {n}: k{n}: unknown key" for n in range(1, 40))
    reply = config_error_reply(detail, command="ask")
    assert reply.count("\n- `.github/bot.yml` line ") == MAX_PROBLEMS
    assert f"and {39 - MAX_PROBLEMS} more" in reply


def test_a_long_problem_is_cut() -> None:
    reply = config_error_reply(f".github/bot.yml line 1: {'x' * 5000}", command=None)
    assert len(reply) < 1500 and "…" in reply


def test_problems_in_two_files_name_each_and_the_lead_names_neither() -> None:
    detail = f"{SYNTAX}\n{EXTENDED}"
    reply = config_error_reply(detail, command="fix")
    assert "The repository's configuration cannot be used:" in reply
    assert "- `.github/bot.yml` line 1, column 5:" in reply
    assert "- `octo/settings:.github/bot.yml` line 2, column 1:" in reply


def test_an_empty_error_still_says_the_app_is_off() -> None:
    reply = config_error_reply("", command=None)
    assert "- ` `" in reply and "stays off in this repository" in reply
