"""bot.workflows.fix.proof_tests: a fix's commit with the reproducing tests of its pull request."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bot.store.sqlite import Store
from bot.workflows.fix import proof_tests
from policies.review_state import ReviewState
from tests.fakes.gitrepo import commit_files, init_bare_repo

pytestmark = pytest.mark.anyio


def git(bare: Path, *args: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={bare}", *args], capture_output=True, text=True, check=True
    ).stdout


async def test_the_tests_join_the_fix_commit_with_its_parent_and_message(tmp_path: Path) -> None:
    bare = init_bare_repo(tmp_path / "r.git", {"m.py": "x = 1\n"})
    head = commit_files(bare, "main", {}, "start")
    fix = commit_files(
        bare, "bot/fix", {"m.py": "x = 2\n"}, "Fix x\n\nCo-authored-by: a <a@b>", base=head
    )
    sha = await proof_tests.with_tests(
        bare, fix, {"tests/test_x.py": "assert True\n"}, name="app[bot]", email="app@x"
    )
    assert git(bare, "rev-parse", f"{sha}^").strip() == head
    assert git(bare, "log", "-1", "--format=%B", sha).strip() == "Fix x\n\nCo-authored-by: a <a@b>"
    assert git(bare, "log", "-1", "--format=%an <%ae>", sha).strip() == "app[bot] <app@x>"
    assert git(bare, "show", f"{sha}:tests/test_x.py") == "assert True\n"
    assert git(bare, "show", f"{sha}:m.py") == "x = 2\n"


@pytest.mark.parametrize(
    ("path", "ok"),
    [
        pytest.param("tests/test_x.py", True, id="plain"),
        pytest.param("../x.py", False, id="parent"),
        pytest.param("/etc/x.py", False, id="absolute"),
        pytest.param(".git/hooks/pre-commit", False, id="git-dir"),
        pytest.param("tests//x.py", False, id="empty-part"),
        pytest.param("", False, id="empty"),
    ],
)
def test_only_plain_paths_are_written(path: str, ok: bool) -> None:
    assert proof_tests._safe(path) is ok


async def test_only_whole_reproducing_tests_of_the_head_are_taken(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "bot.sqlite3")
    proofs = {
        "k1": {"status": "reproduced", "head": "h1", "test": "tests/a.py::t", "source": "a\n"},
        "k2": {"status": "not_reproduced", "head": "h1", "test": "tests/b.py::t", "source": "b"},
        "k3": {"status": "reproduced", "head": "h0", "test": "tests/c.py::t", "source": "c"},
        "k4": {"status": "reproduced", "head": "h1", "test": "../d.py::t", "source": "d"},
        "k5": {"status": "reproduced", "head": "h1", "test": "tests/e.py::t", "source": "e" * 4000},
        "k6": {"status": "reproduced", "head": "h1", "test": "tests/f.py::t", "source": "f"},
    }
    store.put_review_state("octo/hello", 1, ReviewState(proofs=proofs).model_dump_json())
    try:
        found = await proof_tests.reproduced_tests(store, "octo/hello", 1, "h1", bot_login="b")
    finally:
        store.close()
    assert found == {"tests/a.py": "a\n", "tests/f.py": "f\n"}
