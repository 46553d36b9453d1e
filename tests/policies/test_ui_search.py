"""`policies.ui_search`: what the search box was given."""

from __future__ import annotations

import pytest

from policies.ui_search import MAX_QUERY, Guid, RunId, Target, Unrecognised, parse_search


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("wf_0123456789ab", RunId("wf_0123456789ab"), id="run-id"),
        pytest.param(" octo/app#12 ", Target("octo/app", 12), id="target"),
        pytest.param("my-org/my.repo_x#3", Target("my-org/my.repo_x", 3), id="target-odd-name"),
        pytest.param("https://github.com/octo/app/pull/7", Target("octo/app", 7), id="pull-url"),
        pytest.param(
            "https://github.example.com:8443/octo/app/issues/9#issuecomment-1",
            Target("octo/app", 9),
            id="issue-url-enterprise-anchor",
        ),
        pytest.param(
            "https://github.com/octo/app/pull/7/files?w=1", Target("octo/app", 7), id="pull-files"
        ),
        pytest.param(
            "72d3162e-cc78-11e3-81ab-4c9367dc0958",
            Guid("72d3162e-cc78-11e3-81ab-4c9367dc0958"),
            id="github-guid",
        ),
        pytest.param("e2e-0001", Guid("e2e-0001"), id="plain-guid"),
        pytest.param("wf_XYZ", Guid("wf_XYZ"), id="not-a-run-id-is-a-guid"),
    ],
)
def test_what_the_box_names(text: str, expected: object) -> None:
    assert parse_search(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("   ", id="blank"),
        pytest.param("' OR 1=1 --", id="sql"),
        pytest.param("x'; DROP TABLE runs; --", id="sql-drop"),
        pytest.param("<script>alert(1)</script>", id="html"),
        pytest.param("octo/app#", id="target-without-number"),
        pytest.param("octo/app#1x", id="target-bad-number"),
        pytest.param("javascript:alert(1)//github.com/a/b/issues/1", id="js-url"),
        pytest.param("ftp://github.com/a/b/issues/1", id="other-scheme"),
        pytest.param("octo/app#1234567890", id="number-too-long"),
    ],
)
def test_anything_else_is_unrecognised(text: str) -> None:
    assert isinstance(parse_search(text), Unrecognised)


def test_a_guid_is_at_most_a_hundred_characters_and_the_box_reads_three_hundred() -> None:
    assert parse_search("g" * 100) == Guid("g" * 100)
    assert isinstance(parse_search("g" * 101), Unrecognised)
    # Past MAX_QUERY nothing is read: what follows cannot turn a search into another.
    assert parse_search("octo/app#1" + " " * MAX_QUERY + "<script>") == Target("octo/app", 1)
