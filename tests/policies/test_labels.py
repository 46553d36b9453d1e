"""Tests for policies/labels.py: only the repository's own labels are ever applied."""

from __future__ import annotations

import pytest

from policies.labels import labels_to_apply

EXISTING = ["bug", "Docs", "good first issue"]


@pytest.mark.parametrize(
    ("chosen", "expected"),
    [
        pytest.param(["bug"], ("bug",), id="known"),
        pytest.param(["BUG", " docs "], ("bug", "Docs"), id="repository-spelling"),
        pytest.param(["made-up", "bug"], ("bug",), id="unknown-dropped"),
        pytest.param(["bug", "Bug", "bug"], ("bug",), id="each-once"),
        pytest.param(["good first issue", "bug"], ("good first issue", "bug"), id="chosen-order"),
        pytest.param([], (), id="none-chosen"),
        pytest.param(["needs-info"], (), id="nothing-known"),
    ],
)
def test_labels_to_apply(chosen: list[str], expected: tuple[str, ...]) -> None:
    assert labels_to_apply(chosen, EXISTING) == expected


def test_a_repository_without_labels_gets_none() -> None:
    assert labels_to_apply(["bug", "docs"], []) == ()
