"""policies.repo_instructions: front matter, what a file answer means, caps, scopes, notes."""

from __future__ import annotations

import pytest

from policies.repo_instructions import (
    FILE_LIMIT,
    MAX_FILE_BYTES,
    TOTAL_LIMIT,
    Piece,
    Refused,
    collect,
    content_problem,
    split_front_matter,
)


@pytest.mark.parametrize(
    ("text", "globs", "body"),
    [
        pytest.param(
            '---\napplyTo: "src/**/*.py,tests/**"\n---\nUse types.\n',
            ("src/**/*.py", "tests/**"),
            "Use types.\n",
            id="quoted",
        ),
        pytest.param("---\napplyTo: '*.md'\n---\nShort.", ("*.md",), "Short.", id="single-quoted"),
        pytest.param(
            "---\r\napplyTo: a/** , , b\r\n---\r\nx", ("a/**", "b"), "x", id="crlf-spaces"
        ),
        pytest.param("---\ndescription: hi\n---\nx", None, "x", id="no-applyTo"),
        pytest.param('---\napplyTo: ""\n---\nx', (), "x", id="empty-applyTo"),
        pytest.param("No front matter.\n", None, "No front matter.\n", id="none"),
        pytest.param(
            "---\napplyTo: x\nnever closed", None, "---\napplyTo: x\nnever closed", id="unclosed"
        ),
    ],
)
def test_split_front_matter(text: str, globs: tuple[str, ...] | None, body: str) -> None:
    assert split_front_matter(text) == (globs, body)


OK_FILE = {"kind": "file", "path": "AGENTS.md", "size": 5, "encoding": "base64"}


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        pytest.param({**OK_FILE, "raw": b"hello"}, None, id="text"),
        pytest.param(
            {**OK_FILE, "kind": "symlink", "raw": None},
            "it is a symbolic link",
            id="link-elsewhere",
        ),
        pytest.param(
            {**OK_FILE, "path": "docs/real.md", "raw": b"x"},
            "it is a symbolic link",
            id="link-to-a-file",
        ),
        pytest.param(
            {**OK_FILE, "kind": "submodule", "raw": None},
            "it is not a file (submodule)",
            id="submodule",
        ),
        pytest.param(
            {**OK_FILE, "kind": None, "raw": None}, "it is not a file (unknown)", id="no-type"
        ),
        pytest.param(
            {**OK_FILE, "size": MAX_FILE_BYTES + 1, "encoding": "none", "raw": None},
            "it is over 1 MB",
            id="huge",
        ),
        pytest.param({**OK_FILE, "raw": b"ab\0cd"}, "it is binary", id="nul"),
        pytest.param(
            {**OK_FILE, "raw": b"\xff\xfe"}, "it is binary (not UTF-8 text)", id="not-utf8"
        ),
    ],
)
def test_content_problem(answer: dict[str, object], reason: str | None) -> None:
    assert content_problem("AGENTS.md", **answer) == reason  # type: ignore[arg-type]


def test_caps_cut_each_piece_and_the_total_and_say_so() -> None:
    pieces = [Piece(f"f{n}", "x" * 5_000) for n in range(4)] + [Piece("late", "y" * 10)]
    found = collect(pieces)
    assert [i.source for i in found.used] == ["f0", "f1", "f2"]
    assert all(i.cut and i.kept == FILE_LIMIT and i.length == 5_000 for i in found.used)
    assert found.used[0].text.endswith("[… cut: the first 4,000 of 5,000 characters shown]")
    assert sum(i.kept for i in found.used) == TOTAL_LIMIT
    assert found.refused == (
        Refused("f3", "over the 12,000-character total"),
        Refused("late", "over the 12,000-character total"),
    )
    notes = dict(found.notes())
    assert notes["f0"] == "used, cut to its first 4,000 of 5,000 characters"
    assert notes["late"] == "not used: over the 12,000-character total"


def test_a_piece_is_cut_to_the_room_left_or_left_out_when_little_is_left() -> None:
    found = collect(
        [
            Piece("a", "a" * 3_000),
            Piece("b", "b" * 4_000),
            Piece("c", "c" * 4_000),
            Piece("d", "d" * 1_500),
        ]
    )
    assert [(i.source, i.kept, i.cut) for i in found.used][-1] == ("d", 1_000, True)
    found = collect(
        [
            Piece("a", "a" * 3_900),
            Piece("b", "b" * 4_000),
            Piece("c", "c" * 4_000),
            Piece("d", "d" * 150),
        ]
    )
    assert [i.source for i in found.used] == ["a", "b", "c"]
    assert found.refused == (Refused("d", "over the 12,000-character total"),)


def test_scopes_reach_only_matching_paths() -> None:
    found = collect(
        [
            Piece("everywhere", "All."),
            Piece("py", "Python.", ("src/**/*.py",)),
            Piece("all", "Every file.", ("**",)),
            Piece("none", "Nothing.", ("nowhere/**",)),
            Piece("no-globs", "Applies nowhere.", ()),
            Piece("blank", "   \n"),
        ],
        [Refused("CLAUDE.md", "it is a symbolic link")],
    )
    assert [i.source for i in found.everywhere()] == ["everywhere"]
    assert [i.source for i in found.scoped_for(["src/a/b.py"])] == ["py", "all"]
    assert [i.source for i in found.scoped_for(["README.md"])] == ["all"]
    notes = found.notes(["src/a/b.py"])
    assert notes == [
        ("everywhere", "used, 4 characters"),
        ("py", "used, 7 characters, for `src/**/*.py`"),
        ("all", "used, 11 characters, for `**`"),
        ("none", "used, 8 characters, for `nowhere/**`, which matched no reviewed file"),
        ("CLAUDE.md", "not used: it is a symbolic link"),
        ("no-globs", "not used: no `applyTo` globs: it applies to no file"),
    ]
