"""policies.linked_issues: the issues a description closes, and which may be read."""

from __future__ import annotations

import pytest

from policies.linked_issues import IssueRef, Links, linked_issues


@pytest.mark.parametrize(
    ("body", "readable", "foreign"),
    [
        pytest.param("Fixes #3", [("octo", "hello", 3)], [], id="short"),
        pytest.param(
            "closes: octo/other#4 and RESOLVED #5",
            [("octo", "other", 4), ("octo", "hello", 5)],
            [],
            id="keywords-colon-case",
        ),
        pytest.param(
            "Resolves https://github.com/octo/hello/issues/6",
            [("octo", "hello", 6)],
            [],
            id="address",
        ),
        pytest.param("fixes evil/private#7", [], [("evil", "private", 7)], id="another-owner"),
        pytest.param(
            "Fixes #3, fixes #3, Fixes OCTO/hello#3", [("octo", "hello", 3)], [], id="each-once"
        ),
        pytest.param(
            "See #3. Prefixes #4. fix#5 `fixes #6`\n\n```\nfixes #7\n```\n> fixes #8\n"
            "<!-- fixes #9 -->",
            [],
            [],
            id="not-links",
        ),
        pytest.param("fixes #0 and fixes #12abc", [], [], id="not-numbers"),
        pytest.param(None, [], [], id="no-body"),
    ],
)
def test_linked_issues(
    body: str | None, readable: list[tuple[str, str, int]], foreign: list[tuple[str, str, int]]
) -> None:
    links = linked_issues(body, "octo", "hello")
    assert links == Links(
        tuple(IssueRef(*r) for r in readable), tuple(IssueRef(*r) for r in foreign)
    )


def test_at_most_five_and_the_rest_counted() -> None:
    links = linked_issues(" ".join(f"Fixes #{n}" for n in range(1, 9)), "octo", "hello")
    assert [r.number for r in links.readable] == [1, 2, 3, 4, 5] and links.more == 3


def test_labels() -> None:
    assert IssueRef("octo", "hello", 3).label("Octo", "Hello") == "#3"
    assert IssueRef("octo", "other", 4).label("octo", "hello") == "octo/other#4"
    assert IssueRef("octo", "other", 4).full_name == "octo/other"
