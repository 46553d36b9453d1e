"""bot.workflows.review.suggest: a fix becomes a suggestion only when it applies, stays put and passes."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from bot.agents.sandbox import probe_sandbox
from bot.workflows.review.suggest import prove_suggestion, reclaim, replacement_lines, syntax_error
from tests.fakes.gitrepo import commit_files, init_bare_repo

pytestmark = pytest.mark.anyio

SOURCE = "def f(x):\n    return x + 1\n\n\ndef g():\n    return 2\n"


@pytest.mark.parametrize(
    ("new", "start", "end", "expected"),
    [
        pytest.param(SOURCE.replace("x + 1", "x - 1"), 2, 2, "    return x - 1", id="one-line"),
        pytest.param(
            SOURCE.replace("    return x + 1\n", "    y = x\n    return y - 1\n"),
            2,
            2,
            "    y = x\n    return y - 1",
            id="grows",
        ),
        pytest.param(SOURCE.replace("return 2", "return 3"), 2, 2, None, id="outside-range"),
        pytest.param(SOURCE, 2, 2, None, id="no-change"),
        pytest.param(SOURCE.replace("x + 1", "x - 1"), 3, 2, None, id="bad-range"),
        pytest.param(SOURCE.replace("x + 1", "x - 1"), 2, 99, None, id="past-end"),
        pytest.param(
            SOURCE.replace("def f(x):\n    return x + 1\n", ""), 1, 2, "", id="deletes-lines"
        ),
    ],
)
def test_replacement_lines(new: str, start: int, end: int, expected: str | None) -> None:
    assert replacement_lines(SOURCE, new, start, end) == expected


@pytest.mark.parametrize(
    ("path", "text", "ok"),
    [
        pytest.param("a.py", "x = 1\n", None, id="python-ok"),
        pytest.param("a.json", '{"a": 1}', None, id="json-ok"),
        pytest.param("a.toml", "a = 1\n", None, id="toml-ok"),
        pytest.param("a.yaml", "a: [1\n", "error", id="yaml-bad"),
        pytest.param("a.md", "anything", "", id="no-check"),
    ],
)
def test_syntax_error(path: str, text: str, ok: str | None) -> None:
    got = syntax_error(path, text)
    if ok == "error":
        assert got
    else:
        assert got == ok
    assert syntax_error("b.py", "def (:\n")


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    bare = init_bare_repo(tmp_path / "r.git", {"m.py": SOURCE, "other.py": "z = 1\n"})
    head = commit_files(bare, "main", {"m.py": SOURCE}, "noop")
    return bare, head


async def prove(bare: Path, head: str, commit: str | None, check: str | None = None):  # type: ignore[no-untyped-def]
    return await prove_suggestion(
        bare,
        head=head,
        commit=commit,
        path="m.py",
        start=2,
        end=2,
        check_command=check,
        time_limit=60,
    )


async def test_a_fix_that_parses_is_proven(repo: tuple[Path, str]) -> None:
    bare, head = repo
    fixed = commit_files(
        bare, "bot/s-1", {"m.py": SOURCE.replace("x + 1", "x - 1")}, "fix", base=head
    )
    proof = await prove(bare, head, fixed)
    assert proof.ok and proof.text == "    return x - 1"


@pytest.mark.parametrize(
    ("files", "reason"),
    [
        pytest.param({"m.py": SOURCE.replace("x + 1", "x +")}, "no longer parses", id="broken"),
        pytest.param(
            {"m.py": SOURCE.replace("x + 1", "x - 1"), "other.py": "z = 2\n"},
            "other files",
            id="touches-another-file",
        ),
        pytest.param({"m.py": SOURCE.replace("return 2", "return 3")}, "outside", id="outside"),
    ],
)
async def test_bad_fixes_are_not_proven(
    repo: tuple[Path, str], files: dict[str, str], reason: str
) -> None:
    bare, head = repo
    commit = commit_files(bare, "bot/s-2", files, "fix", base=head)  # type: ignore[arg-type]
    proof = await prove(bare, head, commit)
    assert not proof.ok and reason in proof.reason and proof.text is None


async def test_no_commit_or_unrelated_commit(repo: tuple[Path, str], tmp_path: Path) -> None:
    bare, head = repo
    assert "no fix" in (await prove(bare, head, None)).reason
    elsewhere = commit_files(bare, "side", {"m.py": "x\n"}, "root", base="main~1")
    assert "not a commit on top" in (await prove(bare, head, elsewhere)).reason


@pytest.mark.skipif(not probe_sandbox().ok, reason="bubblewrap is needed for the check command")
async def test_the_check_command_decides(repo: tuple[Path, str]) -> None:
    bare, head = repo
    # The engine's worktrees turn per-worktree config on in the mirror (bare: core.bare=true).
    await anyio.run_process(
        ["git", f"--git-dir={bare}", "config", "extensions.worktreeConfig", "true"]
    )
    good = commit_files(bare, "bot/s-3", {"m.py": SOURCE.replace("x + 1", "x - 1")}, "f", base=head)
    passing = await prove(bare, head, good, "python3 -c 'import m; assert m.f(3) == 2'")
    assert passing.ok and "passed" in passing.reason
    failing = await prove(bare, head, good, "python3 -c 'import m; assert m.f(3) == 4'")
    assert not failing.ok and "failed" in failing.reason
    worktrees = bare / "worktrees"
    assert not worktrees.exists() or not any(worktrees.iterdir())


async def test_reclaim_removes_branches_and_directories(
    repo: tuple[Path, str], tmp_path: Path
) -> None:
    bare, head = repo
    commit_files(bare, "bot/s-4", {"m.py": "y\n"}, "f", base=head)
    leftover = tmp_path / "wt"
    (leftover / "sub").mkdir(parents=True)
    (leftover / "link").symlink_to(bare)
    await reclaim(bare, [str(leftover)], ["bot/s-4", "main"])
    assert not leftover.exists() and bare.is_dir()
    assert not (bare / "refs" / "heads" / "bot" / "s-4").exists()
    assert (bare / "refs" / "heads" / "main").exists() or (bare / "packed-refs").exists()
