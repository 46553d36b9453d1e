"""End to end: a pull request whose files git names awkwardly, reviewed through `bot serve`.

`src/evil module.py` (git ends its `+++` line with a tab), `café.py` (git quotes it as
`"caf\\303\\251.py"` unless told otherwise), `src/say "hi".py` (quoted whatever git is told)
and a submodule pointer moved to another commit.
The fake model reports the first added line of every file it is shown; GitHub (the fake)
accepts an inline comment only at a path of the pull request's files.
"""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest

from tests.e2e_world import ReviewWorld
from tests.fakes.github import FakeGitHub
from tests.fakes.gitrepo import Gitlink, commit_files, init_bare_repo
from tests.fakes.review_model import ReviewModel
from tests.review._calc import CalcRepo

pytestmark = pytest.mark.slow

SUB_A = "a1" * 20
SUB_B = "b2" * 20
SPACED = "src/evil module.py"
ACCENTED = "café.py"
QUOTED = 'src/say "hi".py'


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReviewWorld]:
    root = tmp_path_factory.mktemp("review-paths")
    bare = init_bare_repo(
        root / "remote" / "octo" / "hello.git",
        {"README.md": "# hello\n", "libs/core": Gitlink(SUB_A)},
    )
    base = commit_files(bare, "main", {}, "Start")
    head = commit_files(
        bare,
        "topic",
        {
            SPACED: "import os\n\nos.system(input())\n",
            ACCENTED: "def f():\n    return eval(input())\n",
            QUOTED: "print('hi')\n",
            "libs/core": Gitlink(SUB_B),
        },
        "Add two modules and bump the core library",
        base="main",
    )
    fake = FakeGitHub()
    fake.add_repo("octo", "hello", bare)
    fake.add_installation(42, "octo", ["octo/hello"])
    fake.set_permission("octo", "hello", "octo", "admin")
    anyio.run(lambda: fake.add_pull("octo", "hello", head="topic", user="alice", title="Odd"))
    model = ReviewModel(generic=True)
    with ReviewWorld.serving(
        root, fake, model, model=model, calc=CalcRepo(bare, base, head, head)
    ) as w:
        yield w


def test_files_git_quotes_get_their_findings_inline_and_a_submodule_bump_is_named(
    world: ReviewWorld,
) -> None:
    guid = world.post("pull_request", world.pull_payload("opened"))
    _, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-3000:]

    (review,) = world.reviews()
    inline = {(c["path"], c["line"]) for c in world.review_comments()}
    assert inline == {(SPACED, 1), (ACCENTED, 1), (QUOTED, 1)}, review["body"]
    assert "Outside the diff" not in review["body"]
    reviewed = sorted(p for paths in world.model.reviewed_paths for p in paths)
    assert reviewed == sorted([SPACED, ACCENTED, QUOTED])

    (summary,) = world.own_comments()
    body = summary["body"]
    assert "Files reviewed: 3 · not reviewed: 1" in body
    assert (
        f"`libs/core`: submodule pointer moved from {SUB_A[:12]} to {SUB_B[:12]}: not reviewed"
        in body
    )
