"""policies.diff: parsing git's diffs and GitHub's anchor rules."""

from __future__ import annotations

import pytest

from policies.diff import Anchor, anchor_for, anchor_valid, changed_lines_overlap, parse_diff

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
