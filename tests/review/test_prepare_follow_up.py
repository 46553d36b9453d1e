"""bot.workflows.review.runner.prepare on a follow-up after the base moved, and when the push's
delta would cost more than a full review: only the pull request's own changes are shown."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import anyio
import pytest

from bot.github.models import GitRef, PullRequest, User
from bot.workflows.review.runner import Prepared, prepare
from policies.config import ReviewConfig
from policies.review_state import ReviewState, StoredFinding, with_heads
from tests.fakes.gitrepo import commit_files, init_bare_repo


def lines(name: str, n: int = 30, **changed: str) -> str:
    """`n` lines `name<i> = <i>`, with the lines named `l<i>` in `changed` replaced."""
    out = [f"{name}{i} = {i}" for i in range(1, n + 1)]
    for key, text in changed.items():
        out[int(key.removeprefix("l")) - 1] = text
    return "\n".join(out) + "\n"


def pull(base: str, head: str) -> PullRequest:
    return PullRequest(
        id=1,
        number=1,
        head=GitRef(ref="topic", sha=head),
        base=GitRef(ref="main", sha=base),
        user=User(login="author"),
    )


def review(git_dir: Path, base: str, head: str, state: ReviewState) -> Prepared:
    async def run() -> Prepared:
        return await prepare(
            git_dir,
            pull=pull(base, head),
            state=state,
            config=ReviewConfig(),
            full=False,
            fence="F",
            author_trusted=True,
        )

    return anyio.run(run)


def reviewed(prep: Prepared) -> ReviewState:
    return with_heads(prep.state, prep.base, prep.head, prep.signatures)


def merge(git_dir: Path, tree_of: str, *parents: str) -> str:
    """A commit with the tree of `tree_of` and these parents (a merge, with two)."""

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", f"--git-dir={git_dir}", *args],
            capture_output=True,
            check=True,
            env={
                **os.environ,
                "GIT_AUTHOR_NAME": "t",
                "GIT_AUTHOR_EMAIL": "t@e",
                "GIT_COMMITTER_NAME": "t",
                "GIT_COMMITTER_EMAIL": "t@e",
            },
        )
        return done.stdout.decode().strip()

    flags = [arg for parent in parents for arg in ("-p", parent)]
    return git("commit-tree", git("rev-parse", f"{tree_of}^{{tree}}"), *flags, "-m", "Merge")


def blocks(prep: Prepared) -> dict[str, str]:
    return {path: text for unit in prep.units for path, text in unit["file_blocks"].items()}


@pytest.mark.parametrize("how", ["merge", "rebase"])
def test_after_the_base_moved_only_the_pull_requests_own_changes_are_shown(
    tmp_path: Path, how: str
) -> None:
    bare = init_bare_repo(
        tmp_path / "r.git", {"a.py": lines("a"), "b.py": lines("b"), "c.py": lines("c")}
    )
    main0 = commit_files(bare, "main", {}, "Start")
    v1 = commit_files(
        bare,
        "topic",
        {
            "a.py": lines("a", l5="a5 = 'five'"),
            "b.py": lines("b", l20="b20 = 'twenty'"),
            "c.py": lines("c", l10="c10 = 'ten'"),
        },
        "Change a, b and c",
        base="main",
    )
    first = review(bare, main0, v1, ReviewState())
    # The base branch moves on: b.py and c.py change far from the pull request's lines, and
    # c.py's line next to its change too.
    main1 = commit_files(
        bare,
        "main",
        {
            "b.py": lines("b", l2="b2 = 'two'"),
            "c.py": lines("c", l2="c2 = 'two'", l8="c8 = 'eight'"),
            "NEWS.md": "News.\n",
        },
        "Base moves",
    )
    # The pull request adds a line to a.py and changes its line in b.py again.
    files = {
        "a.py": lines("a", l5="a5 = 'five'", l25="a25 = 'more'"),
        "b.py": lines("b", l2="b2 = 'two'", l20="b20 = 'TWENTY'"),
        "c.py": lines("c", l2="c2 = 'two'", l8="c8 = 'eight'", l10="c10 = 'ten'"),
        "NEWS.md": "News.\n",
    }
    tree = commit_files(bare, "scratch", files, "The new tree", base=main1)
    v2 = merge(bare, tree, v1, main1) if how == "merge" else merge(bare, tree, main1)
    second = review(bare, main1, v2, reviewed(first))

    assert set(second.plan.paths) == {"a.py", "b.py"}
    # c.py's own change is the same; the base changed the line next to it.
    assert [(s.path, s.reason) for s in second.plan.skipped] == [
        ("c.py", "unchanged since the last review")
    ]
    shown = blocks(second)
    # a.py: the base left it as it was, so the diff between the heads is the pull request's.
    assert "(changed since the last review)" in shown["a.py"]
    assert "+a25 = 'more'" in shown["a.py"] and "five" not in shown["a.py"]
    # b.py: the base changed it, so the diff between the heads would show the base's line
    # as the pull request's; its whole patch is shown instead.
    assert "(modified, +1 -1)" in shown["b.py"]
    assert "+b20 = 'TWENTY'" in shown["b.py"] and "b2 = 'two'" not in shown["b.py"].split("@@")[2]


def test_a_delta_that_costs_a_full_review_is_reviewed_whole_and_re_checks_its_findings(
    tmp_path: Path,
) -> None:
    padding = "\n".join(f"pad_{i} = 'a line the push takes out again, {i}'" for i in range(300))
    bare = init_bare_repo(tmp_path / "r.git", {"a.py": lines("a")})
    main0 = commit_files(bare, "main", {}, "Start")
    v1 = commit_files(
        bare, "topic", {"a.py": lines("a", l5="a5 = 'five'") + padding + "\n"}, "Pad", base="main"
    )
    first = review(bare, main0, v1, ReviewState())
    finding = StoredFinding(fingerprint="f1", path="a.py", line=5, code="0" * 16, title="Five")
    state = reviewed(first).model_copy(update={"findings": [finding]})
    v2 = commit_files(bare, "topic", {"a.py": lines("a", l5="a5 = 'FIVE'")}, "Unpad")
    second = review(bare, main0, v2, state)

    (unit,) = second.units
    # The push's delta takes out 300 lines: more than a full review of the one-line change.
    assert not unit["focus"] and not unit["one_call"]
    assert "(modified, +1 -1)" in unit["block"] and "pad_" not in unit["block"]
    # What the follow-up owed stays: the open finding whose code changed is re-checked.
    assert [item["fingerprint"] for item in second.recheck] == ["f1"]
