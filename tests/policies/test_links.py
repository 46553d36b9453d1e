"""policies.links: following a symbolic link through the others of its tree."""

from __future__ import annotations

import pytest

from policies.links import MAX_HOPS, resolves_outside


@pytest.mark.parametrize(
    ("path", "target", "links", "outside", "through"),
    [
        ("a", "b", {}, False, {"a"}),
        ("a/b/c", "../../d", {}, False, {"a/b/c"}),
        ("a/b/c", "../../../d", {}, True, {"a/b/c"}),
        ("a", "/etc", {}, True, {"a"}),
        ("a", "C:/Windows", {}, True, {"a"}),
        ("a", "\\\\server\\share", {}, True, {"a"}),
        ("a", "", {}, True, {"a"}),
        ("a", "x/../y/./z", {}, False, {"a"}),
        ("a", "ext/etc", {"ext": "/"}, True, {"a", "ext"}),
        ("s/a", "../up/x", {"up": "s/.."}, False, {"s/a", "up"}),
        ("s/a", "../up/../x", {"up": "."}, True, {"s/a", "up"}),
        ("a", "b", {"a": "b", "b": "a"}, True, {"a", "b"}),
    ],
)
def test_resolves_outside(
    path: str, target: str, links: dict[str, str], outside: bool, through: set[str]
) -> None:
    found = resolves_outside(path, target, links)
    assert (found.outside, set(found.through)) == (outside, through)


def test_a_long_chain_inside_the_tree_ends_and_stays_inside() -> None:
    links = {f"l{n}": f"l{n + 1}" for n in range(MAX_HOPS - 1)}
    assert not resolves_outside("start", "l0", links).outside
    links[f"l{MAX_HOPS - 1}"] = f"l{MAX_HOPS}"
    links[f"l{MAX_HOPS}"] = "end"
    assert resolves_outside("start", "l0", links).outside
