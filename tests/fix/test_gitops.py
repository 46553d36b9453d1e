"""Reading a fix's change from git objects, and the one commit the app pushes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import pytest

from bot.workflows.fix import gitops
from tests.fakes.gitrepo import commit_files, init_bare_repo


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str, str]:
    bare = init_bare_repo(
        tmp_path / "r.git",
        {"a.txt": "one\ntwo\nthree\n", "old.txt": "moved\n" * 20, "gone.txt": "x\n"},
    )
    base = commit_files(bare, "main", {}, "Start")
    head = commit_files(
        bare,
        "work",
        {
            "a.txt": "one\n2\nthree\nfour\n",
            "old.txt": None,
            "new/place.txt": "moved\n" * 20,
            "gone.txt": None,
            "secret.env": 'API_KEY = "abcdefghijkl"\n',
        },
        "First line of the change\n\nBody.\n\nCo-authored-by: someone <x@y>",
        base="main",
    )
    head2 = commit_files(bare, "work", {"b.txt": "b\n"}, "Second\x1b[31m change")
    del head
    return bare, base, head2


def test_change_facts_reads_renames_deletions_and_added_text(repo: tuple[Path, str, str]) -> None:
    bare, base, head = repo
    facts = anyio.run(gitops.change_facts, bare, base, head)
    by_path = {c[1]: c for c in facts.changes}
    assert by_path["new/place.txt"][0] == "R" and by_path["new/place.txt"][2] == "old.txt"
    assert by_path["gone.txt"][0] == "D" and by_path["gone.txt"][4] == 1
    assert by_path["a.txt"][:1] == ("M",) and by_path["a.txt"][3:] == (2, 1)
    assert "API_KEY" in facts.added["secret.env"]
    assert facts.files == len(facts.changes) == 5


def test_the_pushed_commit_has_one_parent_the_agents_tree_and_a_clean_message(
    repo: tuple[Path, str, str],
) -> None:
    bare, base, head = repo
    message = anyio.run(gitops.commit_message, bare, base, head)
    assert message.splitlines()[0] == "First line of the change"
    assert "Co-authored-by: someone" not in message  # only the app writes trailers
    assert "\x1b" not in message and "- Second?[31m change" in message

    async def make() -> str:
        return await gitops.squash(
            bare,
            base,
            head,
            message + "\n\nCo-authored-by: m <1+m@x>",
            name="app[bot]",
            email="app[bot]@users.noreply.github.com",
        )

    sha = anyio.run(make)

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", f"--git-dir={bare}", *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    assert git("rev-parse", f"{sha}^{{tree}}") == git("rev-parse", f"{head}^{{tree}}")
    assert git("rev-list", "--parents", "-n1", sha).split() == [sha, base]
    assert (
        git("log", "-1", "--format=%an <%ae>", sha)
        == "app[bot] <app[bot]@users.noreply.github.com>"
    )


def test_the_diff_is_cut_and_says_so(repo: tuple[Path, str, str]) -> None:
    bare, base, head = repo
    text = anyio.run(lambda: gitops.diff_text(bare, base, head, cap=100))
    assert len(text) < 200 and text.endswith("(diff cut at 100 characters)")


def test_the_apps_own_commit_on_a_head_is_told_from_a_persons(
    repo: tuple[Path, str, str],
) -> None:
    """An iteration retried after its push asks this before taking the head for a person's."""
    bare, base, head = repo
    name, email = "app[bot]", "app[bot]@users.noreply.github.com"
    ours = anyio.run(
        lambda: gitops.squash(bare, base, head, "Address the review", name=name, email=email)
    )
    theirs = commit_files(bare, "theirs", {"t.txt": "t\n"}, "Theirs", base=base)  # tests' identity

    def made(commit: str, parent: str) -> bool:
        return anyio.run(gitops.made_by_on, bare, commit, parent, email)

    assert made(ours, base)
    assert not made(ours, head)  # not on that head
    assert not made(theirs, base)  # another identity
    assert not made("0" * 40, base)  # a commit the mirror lacks
    merge = subprocess.run(
        [
            "git",
            f"--git-dir={bare}",
            "commit-tree",
            f"{ours}^{{tree}}",
            "-p",
            base,
            "-p",
            head,
            "-m",
            "merge",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={
            "GIT_AUTHOR_NAME": name,
            "GIT_AUTHOR_EMAIL": email,
            "GIT_COMMITTER_NAME": name,
            "GIT_COMMITTER_EMAIL": email,
            "PATH": "/usr/bin:/bin",
        },
    ).stdout.strip()
    assert not made(merge, base)  # two parents: not one commit on that head
