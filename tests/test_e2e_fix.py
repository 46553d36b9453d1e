"""End to end: `@app fix` through `bot serve`, the fake GitHub (git push included) and a fake model.

The repository is small: `app/greet.py` says "helo", `check.py` (the configured
`fix.check_command`) fails until it says "hello". Issue #1 asks for the fix. The fake model
(`tests.fakes.fix_model`) plans, edits and reviews by what the request says. One server serves
the module; the tests run in order, as the issue's story.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest

from tests import e2e_world
from tests.fakes.fix_model import Edit, FixModel
from tests.fakes.github import FakeGitHub
from tests.fakes.gitrepo import commit_files, init_bare_repo

pytestmark = pytest.mark.slow

FINAL = ("succeeded", "no_changes", "blocked", "failed", "skipped", "needs_info")
GREET_BUG = 'def greet(name):\n    return "helo, " + name\n'
GREET_FIXED = 'def greet(name):\n    return "hello, " + name\n'
BASE = {
    ".github/bot.yml": "fix:\n  check_command: python3 check.py\n  check_timeout: 60\n",
    ".github/workflows/ci.yml": "name: ci\non: push\njobs: {}\n",
    "app/__init__.py": "",
    "app/greet.py": GREET_BUG,
    "check.py": 'from app.greet import greet\n\nassert greet("x") == "hello, x", greet("x")\n',
    "README.md": "# hello\n",
}
EDITS = (
    Edit("fix nothing-needed", {}),
    Edit("also document it", {"docs/greet.md": "# greet\n\nSays hello.\n"}, "Document greet"),
    Edit(
        "fix and then escape",
        {"app/greet.py": GREET_FIXED},
        attack=(
            ("write_file", {"path": "../../../outside.txt", "content": "escaped"}),
            ("run_command", {"command": "git push origin HEAD:refs/heads/main"}),
        ),
    ),
    Edit(
        "fix it quietly",
        {"app/greet.py": GREET_FIXED, ".github/workflows/ci.yml": "name: ci\non: push\n# x\n"},
        plan=(("app/greet.py", "modify"),),
    ),
    Edit("tidy the readme", {"README.md": "# hello\n\nSays hello.\n"}, "Tidy the README"),
    Edit("ci.yml", {".github/workflows/ci.yml": "name: ci\non: push\njobs: {}\n# 3.12\n"}),
    Edit("", {"app/greet.py": GREET_FIXED}),
)


@dataclass(kw_only=True)
class World(e2e_world.World):
    model: FixModel
    git_dir: Path

    guid_prefix: ClassVar[str] = "fix"
    final: ClassVar[tuple[str, ...]] = FINAL
    patience: ClassVar[float] = 90.0

    def outcome(self, run_id: str) -> dict[str, Any]:
        (raw,) = self.query("SELECT outcome FROM runs WHERE id = ?", run_id)[0]
        return dict(json.loads(raw))

    def branches(self) -> dict[str, str]:
        out = subprocess.run(
            [
                "git",
                f"--git-dir={self.git_dir}",
                "for-each-ref",
                "--format=%(refname:short) %(objectname)",
                "refs/heads/",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return dict(line.split(" ", 1) for line in out.splitlines())

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", f"--git-dir={self.git_dir}", *args], capture_output=True, text=True, check=True
        ).stdout

    def pulls(self) -> dict[int, dict[str, Any]]:
        return dict(self.fake.repos["octo/hello"].pulls)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("fix-e2e")
    bare = init_bare_repo(root / "remote" / "octo" / "hello.git", BASE)
    commit_files(bare, "main", {}, "Start")
    fake = FakeGitHub()
    fake.add_repo("octo", "hello", bare)
    fake.add_installation(42, "octo", ["octo/hello"])
    fake.set_permission("octo", "hello", "maint", "write")
    fake.set_permission("octo", "hello", "reader", "read")
    fake.add_issue(
        "octo", "hello", title="greet says helo", body="It should say hello.", user="alice"
    )
    model = FixModel(EDITS)
    with World.serving(root, fake, model, model=model, git_dir=bare) as w:
        yield w


def test_fix_on_an_issue_pushes_a_branch_and_opens_a_draft_pull_request(world: World) -> None:
    main_before = world.branches()["main"]
    guid = world.command(f"@{world.fake.slug} fix")
    run_id, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-4000:]

    branches = world.branches()
    (branch,) = [b for b in branches if b.startswith("bot/")]
    assert branch == "bot/fix-1-greet-says-helo"
    assert branches["main"] == main_before
    assert world.git("show", f"{branch}:app/greet.py") == GREET_FIXED
    message = world.git("log", "-1", "--format=%B", branch)
    uid = world.fake.repos["octo/hello"].issues[1]  # the issue exists; the trailer names maint
    assert uid and "Co-authored-by: maint <" in message and "@users.noreply.github.com>" in message
    assert world.git("rev-parse", f"{branch}~1").strip() == main_before  # one commit on main

    (pull,) = world.pulls().values()
    assert pull["draft"] is True and pull["head"]["ref"] == branch and pull["base"]["ref"] == "main"
    assert "Fixes #1" in pull["body"] and "python3 check.py" in pull["body"]
    assert "passed" in pull["body"]
    assert [r["login"] for r in pull["requested_reviewers"]] == ["maint"]
    assert [p.ref for p in world.fake.pushes] == [f"refs/heads/{branch}"]

    (comment,) = world.own_comments()
    assert f"Opened draft pull request #{pull['number']}" in comment["body"]
    assert world.outcome(run_id)["branches"] == [branch]
    # The mirror keeps no worktree or agent branch.
    mirror = world.root / "data" / "repos" / "octo" / "hello.git"
    worktrees = mirror / "worktrees"
    assert not worktrees.exists() or not any(worktrees.iterdir())


def test_a_second_fix_adds_a_commit_to_the_same_pull_request(world: World) -> None:
    (branch,) = [b for b in world.branches() if b.startswith("bot/")]
    before = world.branches()[branch]
    guid = world.command(f"@{world.fake.slug} fix also document it")
    _, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-4000:]
    after = world.branches()
    assert [b for b in after if b.startswith("bot/")] == [branch]
    assert world.git("rev-parse", f"{branch}~1").strip() == before
    assert world.git("show", f"{branch}:docs/greet.md").startswith("# greet")
    assert len(world.pulls()) == 1
    (comment,) = world.own_comments()  # the sticky fix comment, edited
    assert "The commit is on pull request #" in comment["body"]


def test_a_fix_on_the_apps_own_pull_request_commits_onto_its_branch(world: World) -> None:
    (number, pull), *_ = world.pulls().items()
    branch = pull["head"]["ref"]
    before = world.branches()[branch]
    pulls = len(world.pulls())
    guid = world.command(f"@{world.fake.slug} fix tidy the readme", number=number)
    _, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-4000:]
    assert world.git("rev-parse", f"{branch}~1").strip() == before
    assert "Says hello." in world.git("show", f"{branch}:README.md")
    assert len(world.pulls()) == pulls
    assert world.fake.pushes[-1].ref == f"refs/heads/{branch}"


def test_a_fix_on_someone_elses_pull_request_opens_one_into_its_branch(world: World) -> None:
    commit_files(world.git_dir, "feature", {"NOTES.md": "notes\n"}, "Add notes", base="main")
    pull = anyio.run(
        lambda: world.fake.add_pull("octo", "hello", head="feature", user="bob", title="Notes")
    )
    before = world.branches()["feature"]
    guid = world.command(f"@{world.fake.slug} fix tidy the readme", number=pull["number"])
    _, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-4000:]
    assert world.branches()["feature"] == before  # never pushed to someone else's branch
    new = [p for p in world.pulls().values() if p["base"]["ref"] == "feature"]
    (fix_pull,) = new
    branch = fix_pull["head"]["ref"]
    assert branch.startswith(f"bot/fix-{pull['number']}-") and fix_pull["draft"]
    assert world.git("rev-parse", f"{branch}~1").strip() == before
    assert f"Requested in #{pull['number']}" in fix_pull["body"]


def test_a_fix_that_commits_nothing_pushes_nothing_and_says_why(world: World) -> None:
    pushes = len(world.fake.pushes)
    guid = world.command(f"@{world.fake.slug} fix nothing-needed")
    run_id, status = world.finished(guid)
    assert status == "no_changes", world.log.read_text()[-4000:]
    assert len(world.fake.pushes) == pushes
    assert "committed nothing" in world.outcome(run_id)["summary"]
    assert "already does what the issue asks" in world.outcome(run_id)["summary"]


def test_a_reader_cannot_ask_for_a_fix(world: World) -> None:
    runs = len(world.query("SELECT id FROM runs"))
    guid = world.command(f"@{world.fake.slug} fix", user="reader")
    world.wait(
        "the decision",
        lambda: bool(
            world.query(
                "SELECT decision FROM deliveries WHERE guid = ? AND decision IS NOT NULL", guid
            )
        ),
    )
    assert len(world.query("SELECT id FROM runs")) == runs


def test_an_agent_cannot_push_or_write_outside_its_worktree(world: World) -> None:
    fr = world.fake.repos["octo/hello"]
    world.fake.add_issue("octo", "hello", title="escape", body="x", user="alice")
    number = max(fr.issues)
    main_before = world.branches()["main"]
    guid = world.command(f"@{world.fake.slug} fix and then escape", number=number)
    _, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-4000:]
    assert world.branches()["main"] == main_before
    assert all(p.ref.startswith("refs/heads/bot/") for p in world.fake.pushes)
    assert not any(world.root.rglob("outside.txt"))
    results = world.model.tool_results
    assert any("`..` are refused" in r for r in results), results
    # The sandbox has no network and no credentials: git's push fails inside it.
    pushed = [r for r in results if "[exit code" in r and "outside" not in r]
    assert pushed and all("[exit code 0]" not in r for r in pushed), results


def test_a_fork_pull_request_gets_the_patch_and_no_push(world: World) -> None:
    commit_files(
        world.git_dir, "forked", {"README.md": "# hello from a fork\n"}, "Fork work", base="main"
    )
    pull = anyio.run(
        lambda: world.fake.add_pull(
            "octo",
            "hello",
            head="forked",
            user="mallory",
            title="Fork change",
            head_repo="mallory/hello",
        )
    )
    pushes = len(world.fake.pushes)
    guid = world.command(f"@{world.fake.slug} fix", number=pull["number"])
    run_id, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-4000:]
    assert len(world.fake.pushes) == pushes
    summary = world.outcome(run_id)["summary"]
    assert "fork" in summary and "```diff" in summary and '+    return "hello, " + name' in summary
    (comment,) = world.own_comments(pull["number"])
    assert "<details>" in comment["body"]


def test_a_change_beyond_the_plan_into_workflows_ends_blocked_and_pushes_nothing(
    world: World,
) -> None:
    fr = world.fake.repos["octo/hello"]
    world.fake.add_issue("octo", "hello", title="quiet", body="x", user="alice")
    number = max(fr.issues)
    pushes = len(world.fake.pushes)
    guid = world.command(f"@{world.fake.slug} fix it quietly", number=number)
    run_id, status = world.finished(guid)
    assert status == "blocked", world.log.read_text()[-4000:]
    assert len(world.fake.pushes) == pushes
    blocked = world.outcome(run_id)["blocked"]
    assert ".github/workflows/ci.yml" in blocked["decision"]
    assert not any("Go ahead" in option for option in blocked["options"])  # not pushable


def test_a_workflow_change_ends_blocked_and_decide_resumes_it_with_replays(world: World) -> None:
    fr = world.fake.repos["octo/hello"]
    world.fake.add_issue("octo", "hello", title="ci python", body="Use 3.12 in CI.", user="alice")
    number = max(fr.issues)
    pushes = len(world.fake.pushes)
    guid = world.command(f"@{world.fake.slug} fix update .github/workflows/ci.yml", number=number)
    _, status = world.finished(guid)
    assert status == "blocked", world.log.read_text()[-4000:]
    (report,) = world.own_comments(number)
    assert "workflows/ci.yml" in report["body"]
    assert f"@{world.fake.slug} decide " in report["body"]
    implemented = world.model.calls["implement"]

    # A reader's answer does nothing: no run, no comment.
    runs = len(world.query("SELECT id FROM runs"))
    reader = world.command(f"@{world.fake.slug} decide 1", number=number, user="reader")
    world.wait(
        "the reader's decision",
        lambda: bool(
            world.query("SELECT 1 FROM deliveries WHERE guid = ? AND decision IS NOT NULL", reader)
        ),
    )
    assert len(world.query("SELECT id FROM runs")) == runs
    assert len(world.own_comments(number)) == 1

    # A writer's answer resumes it: option 1 is "make the change, push nothing".
    guid = world.command(f"@{world.fake.slug} decide 1", number=number)
    follow_id, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-4000:]
    assert world.model.calls["implement"] > implemented
    assert len(world.fake.pushes) == pushes  # a workflow change is never pushed
    comments = world.own_comments(number)
    assert len(comments) == 2
    first, follow = comments
    match = re.search(r"replayed (\d+) of (\d+) agent calls", follow["body"])
    assert match and int(match.group(1)) > 0, follow["body"]
    assert "```diff" in follow["body"] and "workflows/ci.yml" in follow["body"]
    assert "**Answered**" in first["body"] and follow_id in first["body"]
    assert world.outcome(follow_id)["status"] == "succeeded"
