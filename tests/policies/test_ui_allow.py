"""Who may sign in with GitHub: BOT_UI_ALLOW's rules, the grants sessions keep, the public
origin and the sign-in state's shape."""

from __future__ import annotations

import pytest

from policies.ui_allow import (
    Rule,
    callback_url,
    grant_of,
    parse_allow,
    parse_grant,
    public_origin,
    state_shape,
)


def test_rules_are_read_in_order_without_case_or_repeats() -> None:
    rules = parse_allow(" org:Acme , team:Acme/Ops-Team,repo-admins, ORG:acme ")
    assert rules == (
        Rule("org", org="acme"),
        Rule("team", org="acme", team="ops-team"),
        Rule("repo-admins"),
    )
    assert [str(r) for r in rules] == ["org:acme", "team:acme/ops-team", "repo-admins"]


@pytest.mark.parametrize(
    "text",
    ["", " , ", "acme", "org:", "org:-acme", "team:acme", "team:acme/", "user:octocat", "org:a b"],
)
def test_a_value_that_is_no_rule_is_refused_with_the_entry(text: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_allow(text)
    assert "org:NAME" in str(refused.value)


def test_a_grant_names_the_rule_and_for_admins_the_repository() -> None:
    assert grant_of(Rule("org", org="acme")) == "org:acme"
    assert grant_of(Rule("repo-admins"), "Octo/Hello") == "repo:octo/hello"
    assert parse_grant("repo:octo/hello") == (Rule("repo-admins"), "octo/hello")
    assert parse_grant("team:acme/ops") == (Rule("team", org="acme", team="ops"), None)
    for bad in ("", "repo-admins", "repo:", "repo:../x", "org:a,org:b", "anything"):
        assert parse_grant(bad) is None, bad
    with pytest.raises(ValueError):
        grant_of(Rule("repo-admins"))


def test_the_public_origin_has_no_path_and_the_callback_is_under_it() -> None:
    assert public_origin("https://Bot.Example.com/") == "https://bot.example.com"
    assert public_origin("http://127.0.0.1:8000") == "http://127.0.0.1:8000"
    # The default port is dropped, as a browser's Host header drops it.
    assert public_origin("https://bot.example.com:443") == "https://bot.example.com"
    assert public_origin("http://bot.example.com:80/") == "http://bot.example.com"
    assert public_origin("https://bot.example.com:8443") == "https://bot.example.com:8443"
    assert callback_url("https://bot.example.com") == "https://bot.example.com/ui/oauth/callback"
    for bad in (
        "bot.example.com",
        "ftp://x",
        "https://x/ui",
        "https://u:p@x",
        "https://x/?a=1",
        "https://",
        "https://a b",
        "https://x#top",
        "https://x:port",
    ):
        with pytest.raises(ValueError):
            public_origin(bad)


def test_a_state_has_the_shape_the_app_hands_out() -> None:
    assert state_shape("0123456789abcdef" * 2)
    for bad in (None, "", "0123456789ABCDEF" * 2, "a" * 31, "a" * 33, "g" * 32):
        assert not state_shape(bad)
