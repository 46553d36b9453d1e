"""policies.diff: parsing git's diffs and GitHub's anchor rules."""

from __future__ import annotations

import pytest

from policies.diff import (
    Anchor,
    anchor_for,
    anchor_valid,
    changed_lines_overlap,
    parse_diff,
    parse_raw_diff,
    unquote_path,
)

DIFF = """\
diff --git a/app/core.py b/app/core.py
index 1111111..2222222 100644
--- a/app/core.py
+++ b/app/core.py
@@ -1,4 +1,5 @@
 import os
+import sys
{blank}
 def main():
     return 1
@@ -20,3 +21,4 @@ def other():
     a = 1
-    b = 2
+    b = 3
+    c = 4
     return a
diff --git a/new.txt b/new.txt
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/new.txt
@@ -0,0 +1,2 @@
+hello
+world
\\ No newline at end of file
diff --git a/gone.py b/gone.py
deleted file mode 100644
index 4444444..0000000
--- a/gone.py
+++ /dev/null
@@ -1 +0,0 @@
-x = 1
diff --git a/old name.py b/new name.py
similarity index 100%
rename from old name.py
rename to new name.py
diff --git a/logo.png b/logo.png
index 5555555..6666666 100644
Binary files a/logo.png and b/logo.png differ
""".replace("{blank}", " ")


def test_parse_files_statuses_and_counts() -> None:
    files = {f.path: f for f in parse_diff(DIFF)}
    assert list(files) == ["app/core.py", "new.txt", "gone.py", "new name.py", "logo.png"]
    core = files["app/core.py"]
    assert (core.status, core.additions, core.deletions) == ("modified", 3, 1)
    assert [h.new_start for h in core.hunks] == [1, 21]
    assert core.hunks[0].shown == frozenset({1, 2, 3, 4, 5})
    assert core.hunks[0].added == frozenset({2})
    assert core.hunks[1].shown == frozenset({21, 22, 23, 24})
    assert core.added_lines() == frozenset({2, 22, 23})
    assert files["new.txt"].status == "added"
    assert files["new.txt"].hunks[0].shown == frozenset({1, 2})
    assert files["gone.py"].status == "removed"
    assert files["gone.py"].hunks[0].shown == frozenset()
    renamed = files["new name.py"]
    assert (renamed.status, renamed.old_path, renamed.hunks) == ("renamed", "old name.py", ())
    assert files["logo.png"].binary


def test_patch_is_the_hunks_without_the_file_header() -> None:
    core = parse_diff(DIFF)[0]
    assert core.patch.startswith("@@ -1,4 +1,5 @@\n import os\n+import sys")
    assert "--- a/app/core.py" not in core.patch


def test_a_hunk_ends_where_its_header_says_even_if_a_line_looks_like_a_header() -> None:
    text = (
        "diff --git a/a.md b/a.md\n--- a/a.md\n+++ b/a.md\n@@ -1,2 +1,3 @@\n one\n"
        "+--- b/evil\n two\n"
    )
    (only,) = parse_diff(text)
    assert only.path == "a.md"
    assert only.hunks[0].added == frozenset({2})


def test_garbage_is_ignored() -> None:
    assert parse_diff("not a diff\n@@ -1 +1 @@\n+x\n") == []
    assert parse_diff("") == []


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        pytest.param(2, None, Anchor("app/core.py", 2), id="one-added-line"),
        pytest.param(4, None, Anchor("app/core.py", 4), id="one-context-line"),
        pytest.param(2, 4, Anchor("app/core.py", 4, 2), id="range-in-hunk"),
        pytest.param(4, 9, Anchor("app/core.py", 5, 4), id="range-past-hunk-end-narrowed"),
        pytest.param(18, 22, Anchor("app/core.py", 22, 21), id="range-before-hunk-narrowed"),
        pytest.param(10, 12, None, id="between-hunks"),
        pytest.param(3, 3, Anchor("app/core.py", 3), id="single-line-range"),
        pytest.param(1, 40, Anchor("app/core.py", 5, 1), id="spans-hunks-keeps-one-hunk"),
    ],
)
def test_anchor_for(start: int, end: int | None, expected: Anchor | None) -> None:
    core = parse_diff(DIFF)[0]
    got = anchor_for(core, start, end)
    assert got == expected
    if got is not None:
        assert anchor_valid(core, got)


@pytest.mark.parametrize(
    ("anchor", "ok"),
    [
        pytest.param(Anchor("app/core.py", 5, 1), True, id="same-hunk"),
        pytest.param(Anchor("app/core.py", 22, 5), False, id="start-in-other-hunk"),
        pytest.param(Anchor("app/core.py", 3, 3), False, id="start-not-before-line"),
        pytest.param(Anchor("app/core.py", 10), False, id="line-outside"),
        pytest.param(Anchor("other.py", 2), False, id="other-file"),
    ],
)
def test_anchor_valid(anchor: Anchor, ok: bool) -> None:
    assert anchor_valid(parse_diff(DIFF)[0], anchor) is ok


def test_changed_lines_overlap() -> None:
    core = parse_diff(DIFF)[0]
    assert changed_lines_overlap(core, 20, 22)
    assert not changed_lines_overlap(core, 3, 20)


# --- paths as git writes them ---------------------------------------------------------------

QUOTED = (
    "diff --git a/src/evil module.py b/src/evil module.py\n"
    "new file mode 100644\n"
    "index 0000000..1111111\n"
    "--- /dev/null\n"
    "+++ b/src/evil module.py\t\n"
    "@@ -0,0 +1 @@\n"
    "+x = 1\n"
    'diff --git "a/caf\\303\\251.py" "b/caf\\303\\251.py"\n'
    "index 2222222..3333333 100644\n"
    '--- "a/caf\\303\\251.py"\n'
    '+++ "b/caf\\303\\251.py"\n'
    "@@ -1 +1 @@\n"
    "-a\n"
    "+b\n"
    'diff --git a/old one.py "b/tab\\there \\"q\\".py"\n'
    "similarity index 90%\n"
    "rename from old one.py\n"
    'rename to "tab\\there \\"q\\".py"\n'
    "--- a/old one.py\t\n"
    '+++ "b/tab\\there \\"q\\".py"\n'
    "@@ -1 +1 @@\n"
    "-c\n"
    "+d\n"
    "diff --git a/run me.sh b/run me.sh\n"
    "old mode 100644\n"
    "new mode 100755\n"
)


def test_paths_git_quotes_or_tab_terminates_are_read_as_the_names_they_are() -> None:
    files = parse_diff(QUOTED)
    assert [f.path for f in files] == [
        "src/evil module.py",
        "café.py",
        'tab\there "q".py',
        "run me.sh",
    ]
    assert files[0].status == "added" and files[0].added_lines() == frozenset({1})
    assert files[2].status == "renamed" and files[2].old_path == "old one.py"
    assert (files[3].old_mode, files[3].new_mode) == ("100644", "100755")


@pytest.mark.parametrize(
    ("quoted", "name"),
    [
        ('"caf\\303\\251.py"', "café.py"),
        ('"a\\\\b\\nc\\"d\\ae"', 'a\\b\nc"d\ae'),
        ("plain name.py", "plain name.py"),
        ('"unterminated', '"unterminated'),
        ('"bad \\q escape"', "bad \\q escape"),
    ],
)
def test_unquote_path(quoted: str, name: str) -> None:
    assert unquote_path(quoted) == name


def test_raw_z_output_names_the_paths_and_modes_whatever_they_contain() -> None:
    z = "0" * 40
    a, b, c = "a" * 40, "b" * 40, "c" * 40
    raw = (
        f":000000 100644 {z} {a} A\0src/evil module.py\0"
        f":160000 160000 {b} {c} M\0vendor/sub\0"
        f":100644 100644 {a} {b} R090\0old one.py\0new\nline.py\0"
        f":100644 120000 {a} {b} T\0link\0"
        "\0"
    )
    patch = (
        "diff --git a/src/evil module.py b/src/evil module.py\n"
        "new file mode 100644\n"
        "--- /dev/null\n"
        "+++ b/src/evil module.py\t\n"
        "@@ -0,0 +1 @@\n"
        "+x = 1\n"
        "diff --git a/vendor/sub b/vendor/sub\n"
        "index bbbbbbb..ccccccc 160000\n"
        "--- a/vendor/sub\n"
        "+++ b/vendor/sub\n"
        "@@ -1 +1 @@\n"
        f"-Subproject commit {b}\n"
        f"+Subproject commit {c}\n"
        'diff --git a/old one.py "b/new\\nline.py"\n'
        "similarity index 90%\n"
        "rename from old one.py\n"
        'rename to "new\\nline.py"\n'
        "--- a/old one.py\t\n"
        '+++ "b/new\\nline.py"\n'
        "@@ -1 +1 @@\n"
        "-c\n"
        "+d\n"
        "diff --git a/link b/link\n"
        "deleted file mode 100644\n"
        "--- a/link\n"
        "+++ /dev/null\n"
        "@@ -1,2 +0,0 @@\n"
        "-one\n"
        "-two\n"
        "diff --git a/link b/link\n"
        "new file mode 120000\n"
        "--- /dev/null\n"
        "+++ b/link\n"
        "@@ -0,0 +1 @@\n"
        "+/\n"
        "\\ No newline at end of file\n"
    )
    spaced, sub, renamed, link = parse_raw_diff(raw + patch)
    assert (spaced.path, spaced.code, spaced.status) == ("src/evil module.py", "A", "added")
    assert spaced.added_text() == "x = 1"
    assert (sub.path, sub.submodule, sub.old_oid, sub.new_oid) == ("vendor/sub", True, b, c)
    assert (renamed.path, renamed.old_path, renamed.code) == ("new\nline.py", "old one.py", "R")
    # A type change is two sections in the patch and one change: the new side's lines.
    assert (link.path, link.code, link.old_mode, link.new_mode) == ("link", "T", "100644", "120000")
    assert (link.additions, link.deletions, link.added_text()) == (1, 2, "/")
    assert link.symlink and not link.submodule


def test_raw_z_output_alone_and_garbage() -> None:
    z, a = "0" * 40, "a" * 40
    (only,) = parse_raw_diff(f":100644 000000 {a} {z} D\0gone file.py\0")
    assert (only.path, only.status, only.hunks) == ("gone file.py", "removed", ())
    assert parse_raw_diff("") == []
    assert parse_raw_diff(":garbage\0x\0") == []
