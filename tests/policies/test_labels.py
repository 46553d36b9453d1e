"""Tests for policies/labels.py: only the repository's own labels that `triage.labels` lists
are ever applied; the repository's others are held back, made-up ones dropped."""

from __future__ import annotations

import pytest

from policies.labels import LabelPlan, labels_to_apply

EXISTING = ["bug", "Docs", "good first issue", "deploy-approved"]
ALLOWED = ["BUG", "docs", "Good First Issue", "not-in-the-repository"]


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
        pytest.param(["not-in-the-repository"], (), id="allowed-but-not-in-the-repository"),
    ],
)
def test_labels_to_apply(chosen: list[str], expected: tuple[str, ...]) -> None:
    assert labels_to_apply(chosen, EXISTING, ALLOWED).apply == expected


def test_a_repository_without_labels_gets_none() -> None:
    assert labels_to_apply(["bug", "docs"], [], ALLOWED) == LabelPlan(apply=(), held_back=())


def test_a_label_the_allow_list_lacks_is_held_back() -> None:
    plan = labels_to_apply(["Deploy-Approved", "bug", "made-up"], EXISTING, ALLOWED)
    assert plan == LabelPlan(apply=("bug",), held_back=("deploy-approved",))


def test_an_empty_allow_list_applies_nothing() -> None:
    plan = labels_to_apply(["bug", "docs"], EXISTING, [])
    assert plan == LabelPlan(apply=(), held_back=("bug", "Docs"))
