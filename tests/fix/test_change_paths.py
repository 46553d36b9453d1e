"""A fix's change read from real git objects: names git quotes, symbolic links and submodules.

Each test builds a repository, lets `gitops.change_facts` read the change the way the fix
does before it pushes, and asks `classify_change` whether a maintainer must decide first.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from bot.workflows.fix import gitops
from policies.config import FixConfig
from policies.fix import RiskReport
from tests.fakes.gitrepo import Entry, Gitlink, Link, commit_files, init_bare_repo

GITHUB_TOKEN = "ghp_" + "Ab3dE" * 8 + "xY12"
AWS_KEY = "AKIA" + "QWERTYUIOPASDFGH"
SUB_A = "1" * 40
SUB_B = "2" * 40


def risk_of(tmp_path: Path, before: dict[str, Entry], after: dict[str, Entry]) -> RiskReport | None:
    bare = init_bare_repo(tmp_path / "r.git", {"README.md": "# r\n", **before})
    base = commit_files(bare, "main", {}, "Start")
    head = commit_files(bare, "work", after, "The agent's change", base="main")
    facts = anyio.run(gitops.change_facts, bare, base, head)
    return facts.risk(FixConfig())


def reasons(report: RiskReport | None) -> dict[str, list[str]]:
    return {} if report is None else {r.kind: list(r.actions) for r in report.reasons}


def test_a_token_added_to_a_file_git_quotes_or_ends_with_a_tab_is_caught(tmp_path: Path) -> None:
    bare = init_bare_repo(tmp_path / "r.git", {"README.md": "# r\n"})
    base = commit_files(bare, "main", {}, "Start")
    head = commit_files(
        bare,
        "work",
        {"café.py": f"t = '{GITHUB_TOKEN}'\n", "src/a b.py": f"k = '{AWS_KEY}'\n"},
        "Add two modules",
        base="main",
    )
    facts = anyio.run(gitops.change_facts, bare, base, head)
    assert sorted(c[1] for c in facts.changes) == ["café.py", "src/a b.py"]
    assert set(facts.added) == {"café.py", "src/a b.py"}
    assert reasons(facts.risk(FixConfig())) == {
        "credentials": ["add a GitHub token to `café.py`", "add an AWS access key to `src/a b.py`"]
    }


def test_a_submodule_bump_needs_a_decision(tmp_path: Path) -> None:
    report = risk_of(tmp_path, {"vendor/lib": Gitlink(SUB_A)}, {"vendor/lib": Gitlink(SUB_B)})
    assert reasons(report) == {
        "submodule": [f"move the submodule `vendor/lib` from `{SUB_A[:12]}` to `{SUB_B[:12]}`"]
    }


def test_a_new_submodule_and_its_gitmodules_need_a_decision(tmp_path: Path) -> None:
    gitmodules = '[submodule "x"]\n\tpath = x\n\turl = https://example.com/x.git\n'
    report = risk_of(tmp_path, {}, {"x": Gitlink(SUB_B), ".gitmodules": gitmodules})
    assert reasons(report) == {
        "submodule": ["add `.gitmodules`", f"add the submodule `x` at `{SUB_B[:12]}`"]
    }


@pytest.mark.parametrize(
    ("path", "target"),
    [
        ("root", "/"),
        ("a/b/up", "../../.."),
        ("a/up", "../../etc/passwd"),
        ("docs/win", "C:\\Windows"),
        ("docs/back", "..\\..\\x"),
        ("a/sneaky", "b/../../../x"),
    ],
)
def test_a_link_that_leaves_the_tree_needs_a_decision(
    tmp_path: Path, path: str, target: str
) -> None:
    report = risk_of(tmp_path, {}, {path: Link(target)})
    assert reasons(report) == {"symlink": [f"link `{path}` to `{target}`, outside the repository"]}


@pytest.mark.parametrize(("path", "target"), [("a/b/ok", "../c.txt"), ("readme", "README.md")])
def test_a_link_inside_the_tree_is_an_ordinary_change(
    tmp_path: Path, path: str, target: str
) -> None:
    assert risk_of(tmp_path, {}, {path: Link(target)}) is None


def test_a_file_turned_into_a_link_and_back_needs_a_decision(tmp_path: Path) -> None:
    report = risk_of(
        tmp_path,
        {"conf.txt": "x = 1\n", "was_link": Link("README.md")},
        {"conf.txt": Link("README.md"), "was_link": "now a file\n"},
    )
    assert reasons(report) == {
        "symlink": [
            "turn `conf.txt` into a symbolic link",
            "turn the symbolic link `was_link` into a file",
        ]
    }


def test_retargeting_a_link_out_of_the_tree_needs_a_decision(tmp_path: Path) -> None:
    report = risk_of(tmp_path, {"l": Link("README.md")}, {"l": Link("/etc/shadow")})
    assert reasons(report) == {"symlink": ["link `l` to `/etc/shadow`, outside the repository"]}


def test_a_link_through_a_link_already_out_of_the_tree_needs_a_decision(tmp_path: Path) -> None:
    report = risk_of(tmp_path, {"ext": Link("/")}, {"conf/db.yml": Link("../ext/etc/passwd")})
    assert reasons(report) == {
        "symlink": ["link `conf/db.yml` to `../ext/etc/passwd`, outside the repository"]
    }


def test_a_link_inside_the_tree_that_sends_another_out_needs_a_decision(tmp_path: Path) -> None:
    # `top/r` led to `x` through the directory `d`; once `d` is a link to the root, the same
    # `..` after it climbs out of the repository.
    before: dict[str, Entry] = {"top/r": Link("../d/../x"), "d/f.txt": "f\n", "x": "x\n"}
    report = risk_of(tmp_path, before, {"d/f.txt": None, "d": Link(".")})
    assert reasons(report) == {
        "deleted_file": ["delete `d/f.txt`"],
        "symlink": ["link `top/r` to `../d/../x`, outside the repository (through `d`)"],
    }


def test_links_already_out_of_the_tree_do_not_block_an_unrelated_link(tmp_path: Path) -> None:
    report = risk_of(tmp_path, {"ext": Link("/")}, {"docs/readme": Link("../README.md")})
    assert report is None
