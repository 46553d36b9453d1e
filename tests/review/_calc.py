"""The `fixtures/repos/calc` pull request as a bare git repository: main, then two pushes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.conftest import FIXTURES
from tests.fakes.gitrepo import commit_files, init_bare_repo

CALC = FIXTURES / "repos" / "calc"


def snapshot(name: str) -> dict[str, str | bytes | None]:
    root = CALC / name
    return {
        p.relative_to(root).as_posix(): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@dataclass(frozen=True)
class CalcRepo:
    git_dir: Path
    base: str
    head1: str
    head2: str


def build_calc(root: Path, *, name: str = "hello") -> CalcRepo:
    """`root/remote/octo/<name>.git`: `main` at the base, branch `topic` at head1 then head2
    (head2 is committed on a side ref first, so the pull starts at head1)."""
    bare = init_bare_repo(root / "remote" / "octo" / f"{name}.git", snapshot("base"))
    base = commit_files(bare, "main", {}, "Start")
    head1 = commit_files(bare, "topic", snapshot("head1"), "Add mean and clamp", base="main")
    head2 = commit_files(bare, "next", snapshot("head2"), "Fix clamp's bounds", base="topic")
    return CalcRepo(bare, base, head1, head2)
