"""The review's changes read from real git objects: names git quotes, and submodule pointers.

GitHub names a file by its path as it is; git's patch text quotes some names and ends others
with a tab. The review must see the same names, or every finding on such a file is dropped
while the summary lists the file as reviewed.
"""

from __future__ import annotations

from pathlib import Path

import anyio

from bot.workflows.review import diffs
from bot.workflows.review.runner import limits_of
from policies.config import ReviewConfig
from policies.diff import anchor_for
from policies.review_plan import changed_file, plan_review
from tests.fakes.gitrepo import Gitlink, Link, commit_files, init_bare_repo

SUB_A = "a1" * 20
SUB_B = "b2" * 20
NAMES = ("src/evil module.py", "café.py", 'tab\there "q".py', "new\nline.py")


def changed(git_dir: Path, base: str, head: str) -> diffs.PullChanges:
    return anyio.run(diffs.pull_changes, git_dir, base, head)


def test_every_name_is_read_as_github_names_it_and_its_lines_anchor(tmp_path: Path) -> None:
    bare = init_bare_repo(tmp_path / "r.git", {"README.md": "# r\n", "old name.txt": "o\n" * 9})
    base = commit_files(bare, "main", {}, "Start")
    head = commit_files(
        bare,
        "topic",
        {
            **{name: "x = 1\ny = 2\n" for name in NAMES},
            "old name.txt": None,
            "moved/new name.txt": "o\n" * 8 + "p\n",
            "link to readme": Link("README.md"),
        },
        "Add files with odd names",
        base="main",
    )
    files = changed(bare, base, head).by_path()
    assert set(files) == {*NAMES, "moved/new name.txt", "link to readme"}
    for name in NAMES:
        patch = files[name]
        assert (patch.status, patch.additions) == ("added", 2)
        anchor = anchor_for(patch, 2)
        assert anchor is not None and (anchor.path, anchor.line) == (name, 2)
    moved = files["moved/new name.txt"]
    assert (moved.status, moved.old_path) == ("renamed", "old name.txt")
    assert files["link to readme"].symlink


def test_a_submodule_bump_is_listed_as_not_reviewed(tmp_path: Path) -> None:
    bare = init_bare_repo(tmp_path / "r.git", {"README.md": "# r\n", "libs/core": Gitlink(SUB_A)})
    base = commit_files(bare, "main", {}, "Start")
    head = commit_files(
        bare, "topic", {"libs/core": Gitlink(SUB_B), "app.py": "a = 1\n"}, "Bump", base="main"
    )
    files = changed(bare, base, head).by_path()
    sub = files["libs/core"]
    assert sub.submodule and (sub.old_oid, sub.new_oid) == (SUB_A, SUB_B)
    plan = plan_review([changed_file(f) for f in files.values()], limits_of(ReviewConfig()))
    assert plan.paths == ("app.py",)
    assert [(s.path, s.reason) for s in plan.skipped] == [
        ("libs/core", f"submodule pointer moved from {SUB_A[:12]} to {SUB_B[:12]}: not reviewed")
    ]
