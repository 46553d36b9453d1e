"""End to end: a person's review of the app's own pull request, through `bot serve`, the fake
GitHub (git push included) and the fake model.

The repository is `fixtures/repos/calc`; the app's pull request #1 is `bot/fix-3-add-mean` at
the calc pull request's first head, opened by the app. `maint` may write, `reader` may only
read. The fake model (`tests.fakes.fix_model`) changes the files of the edit whose words are
in the request, which is how each test tells what the run was asked. One server serves the
module; the tests run in order, as the pull request's story: the first iteration, a reader's
review, a person's push before a review is addressed, a comment's request, iterations up to
`fix.max_iterations` (5) and the sixth, which gets the note.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest

from tests import e2e_world
from tests.fakes.fix_model import Edit, FixModel
from tests.fakes.github import FakeGitHub
from tests.fakes.gitrepo import commit_files
from tests.fakes.llm import Reply
from tests.review._calc import build_calc, snapshot

pytestmark = pytest.mark.slow

BRANCH = "bot/fix-3-add-mean"
OPS = str(snapshot("head1")["calc/ops.py"])
OPS_FIXED = OPS.replace("return max(hi, min(lo, x))", "return max(lo, min(hi, x))").replace(
    "    total = sum(values)\n",
    "    if not values:\n        raise ValueError('mean of nothing')\n    total = sum(values)\n",
)
THREE = [
    {"path": "calc/ops.py", "line": 22, "body": "clamp swaps its bounds"},
    {"path": "calc/ops.py", "line": 17, "body": "mean of an empty list divides by zero"},
    {"path": "calc/ops.py", "line": 26, "body": "say which text was empty"},
]
# The request names each comment as "(n) On `path` line N: ..." and the context as "path:N",
# so an edit's words below match the request of one run only, never an earlier thread.
EDITS = (
    *(
        Edit(f"line 18: note number {n}", {f"docs/note{n}.md": f"note {n}\n"}, f"Add note {n}")
        for n in range(2, 7)
    ),
    Edit("line 16: point 000", {"docs/points.md": "points\n"}, "Answer the points"),
    Edit("please document the cli", {"docs/cli.md": "# cli\n"}, "Document the cli"),
    Edit("line 22: clamp swaps its bounds", {"calc/ops.py": OPS_FIXED}, "Fix clamp and mean"),
)


@dataclass
class Model(FixModel):
    """The fix model, and `during`: what a person does while the next implementer works."""

    during: Callable[[], None] | None = None

    def implement(self, body: dict[str, Any], prompt: str) -> Reply:
        during, self.during = self.during, None
        if during is not None:
            during()
        return super().implement(body, prompt)


@dataclass(kw_only=True)
class World(e2e_world.World):
    model: Model
    git_dir: Path

    guid_prefix: ClassVar[str] = "iterate"
    patience: ClassVar[float] = 90.0

    def pull(self) -> dict[str, Any]:
        return self.fake.repos["octo/hello"].pulls[1]

    def head(self) -> str:
        return str(self.git("rev-parse", BRANCH)).strip()

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", f"--git-dir={self.git_dir}", *args], capture_output=True, text=True, check=True
        ).stdout

    def review(self, user: str = "maint", **review: Any) -> str:
        """`user` submits a review of #1 (`FakeGitHub.submit_review`); the delivery's GUID."""
        payload = self.fake.submit_review("octo", "hello", 1, user=user, **review)
        return self.post("pull_request_review", payload)

    def replies_to(self, comment_id: int) -> list[dict[str, Any]]:
        return [
            c
            for c in self.fake.repos["octo/hello"].review_comments.get(1, [])
            if c.get("in_reply_to_id") == comment_id
        ]

    def review_comments_by(self, user: str) -> list[dict[str, Any]]:
        comments = self.fake.repos["octo/hello"].review_comments.get(1, [])
        return [c for c in comments if c["user"]["login"] == user and not c.get("in_reply_to_id")]

    def outcome(self, run_id: str) -> dict[str, Any]:
        (raw,) = self.query("SELECT outcome FROM runs WHERE id = ?", run_id)[0]
        return dict(json.loads(raw))

    def decision(self, guid: str) -> tuple[str, str]:
        self.wait(
            f"the decision on {guid}",
            lambda: bool(self.query("SELECT decision FROM deliveries WHERE guid = ?", guid)[0][0]),
        )
        decision, reason = self.query(
            "SELECT decision, reason FROM deliveries WHERE guid = ?", guid
        )[0]
        return str(decision), str(reason or "")

    def fix_comment(self) -> str:
        (comment,) = self.own_comments()
        return str(comment["body"])


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("iterate-e2e")
    calc = build_calc(root)
    subprocess.run(
        ["git", f"--git-dir={calc.git_dir}", "update-ref", f"refs/heads/{BRANCH}", calc.head1],
        check=True,
    )
    fake = FakeGitHub()
    fake.add_repo("octo", "hello", calc.git_dir)
    fake.add_installation(42, "octo", ["octo/hello"])
    fake.set_permission("octo", "hello", "maint", "write")
    fake.set_permission("octo", "hello", "reader", "read")
    anyio.run(
        lambda: fake.add_pull(
            "octo", "hello", head=BRANCH, user=fake.bot_login, title="Add mean and clamp"
        )
    )
    model = Model(EDITS)
    # One process: the story needs no second receiver, and starts faster on a busy machine.
    serving = World.serving(
        root, fake, model, ("--receivers", "1"), model=model, git_dir=calc.git_dir
    )
    with serving as w:
        yield w


def test_a_writers_review_gives_one_commit_a_reply_in_each_thread_and_the_re_request(
    world: World,
) -> None:
    before = world.head()
    pushes = len(world.fake.pushes)
    guid = world.review(event="REQUEST_CHANGES", comments=THREE)
    run_id, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-4000:]

    after = world.head()
    assert world.git("rev-parse", f"{after}~1").strip() == before  # one commit, on the head
    assert world.git("show", f"{after}:calc/ops.py") == OPS_FIXED
    assert [p.ref for p in world.fake.pushes[pushes:]] == [f"refs/heads/{BRANCH}"]
    assert world.pull()["head"]["sha"] == after and len(world.fake.repos["octo/hello"].pulls) == 1
    # The request named all three comments, in the order of their lines.
    (plan_prompt,) = [
        m["content"]
        for body in world.llm.bodies
        for m in body.get("messages", [])
        if m.get("role") == "user" and str(m.get("content")).startswith("Plan the change")
    ]
    assert plan_prompt.index("mean of an empty list") < plan_prompt.index("clamp swaps")
    assert plan_prompt.index("clamp swaps") < plan_prompt.index("say which text was empty")

    for comment in world.review_comments_by("maint"):
        (reply,) = world.replies_to(comment["id"])
        assert reply["user"]["login"] == world.fake.bot_login
        assert reply["body"] == (
            f"Addressed in `{after[:7]}`: one commit for the 3 comments of this review."
        )
    assert [r["login"] for r in world.pull()["requested_reviewers"]] == ["maint"]
    body = world.fix_comment()
    assert f"Iteration 1 of 5: 3 comments of @maint's review, addressed in `{after[:12]}`." in body
    assert world.decision(guid) == ("trigger", "iterate")
    assert world.outcome(run_id)["branches"] == [BRANCH]


def test_a_readers_review_gives_nothing(world: World) -> None:
    before, writes = world.head(), len(world.fake.writes())
    guid = world.review(user="reader", comments=[{"path": "calc/ops.py", "line": 18, "body": "x"}])
    decision, reason = world.decision(guid)
    assert decision == "skip" and reason.startswith("no_permission"), reason
    assert world.query("SELECT count(*) FROM runs WHERE delivery_id = ?", guid) == [(0,)]
    assert world.head() == before and len(world.fake.writes()) == writes


def test_a_push_by_a_person_since_the_review_is_kept_and_nothing_is_changed(world: World) -> None:
    reviewed = world.head()
    ops = world.git("show", f"{reviewed}:calc/ops.py")
    theirs = commit_files(world.git_dir, BRANCH, {"calc/ops.py": ops + "\n# mine\n"}, "Mine")
    anyio.run(world.fake.push_pull, "octo", "hello", 1, theirs)
    pushes = len(world.fake.pushes)
    comment = [{"path": "calc/ops.py", "line": 18, "body": "note number 2 please"}]
    guid = world.review(comments=comment, commit=reviewed)
    _, status = world.finished(guid)
    assert status == "skipped", world.log.read_text()[-4000:]
    assert world.head() == theirs and len(world.fake.pushes) == pushes  # nothing pushed
    body = world.fix_comment()
    assert f"the head moved since this review (reviewed `{reviewed[:12]}`" in body
    assert f"now `{theirs[:12]}`" in body
    assert world.replies_to(world.review_comments_by("maint")[-1]["id"]) == []


def test_a_comment_to_the_app_on_its_pull_request_is_addressed_the_same_way(world: World) -> None:
    before = world.head()
    guid = world.command(f"@{world.fake.slug} please document the cli", number=1)
    _, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-4000:]
    after = world.head()
    assert world.git("rev-parse", f"{after}~1").strip() == before  # built on the person's commit
    assert world.git("show", f"{after}:docs/cli.md") == "# cli\n"
    assert "# mine" in world.git("show", f"{after}:calc/ops.py")
    assert "Iteration 2 of 5: @maint's request" in world.fix_comment()


def test_a_review_with_a_hundred_comments_addresses_the_first_thirty_and_names_the_rest(
    world: World,
) -> None:
    points = [
        {"path": "calc/ops.py", "line": 16 + i % 9, "body": f"point {i:03d}"} for i in range(100)
    ]
    guid = world.review(comments=points)
    _, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-4000:]
    sha = world.head()
    mine = world.review_comments_by("maint")[-100:]
    replied = [c for c in mine if world.replies_to(c["id"])]
    # By position: line 16's twelve, line 17's eleven, then the first seven of line 18.
    assert sorted(c["body"] for c in replied) == sorted(
        f"point {i:03d}" for i in range(100) if i % 9 in (0, 1) or (i % 9 == 2 and i < 63)
    )
    for comment in replied:
        (reply,) = world.replies_to(comment["id"])
        assert reply["body"].startswith(f"Addressed in `{sha[:7]}`: one commit for the 30 comments")
    body = world.fix_comment()
    assert "Iteration 3 of 5: 30 comments of @maint's review" in body
    assert "70 more comments were not addressed (one iteration takes the first 30" in body
    assert "`calc/ops.py` line 18" in body and "and 50 more." in body


def test_a_push_by_a_person_while_the_fix_runs_is_kept_and_nothing_is_forced(
    world: World,
) -> None:
    started_on = world.head()
    theirs: list[str] = []

    def push() -> None:
        theirs.append(commit_files(world.git_dir, BRANCH, {"README.md": "theirs\n"}, "Theirs"))

    world.model.during = push
    comment = {"path": "calc/ops.py", "line": 18, "body": "note number 4 please"}
    guid = world.review(comments=[comment])
    run_id, status = world.finished(guid)
    assert status == "failed", world.log.read_text()[-4000:]
    (their_commit,) = theirs
    assert world.head() == their_commit  # their commit is the branch's, as they pushed it
    assert world.git("rev-parse", f"{their_commit}~1").strip() == started_on
    summary = world.outcome(run_id)["summary"]
    assert f"moved while this ran (from `{started_on[:12]}` to `{their_commit[:12]}`)" in summary
    assert "never forces a push" in world.fix_comment()
    (reply,) = world.replies_to(world.review_comments_by("maint")[-1]["id"])
    assert reply["body"].startswith("Not addressed: the fix did not finish: `bot/fix-3-add-mean`")
    anyio.run(world.fake.push_pull, "octo", "hello", 1, their_commit)  # GitHub's view of it


def test_the_sixth_iteration_gives_the_note(world: World) -> None:
    fifth = {"path": "calc/ops.py", "line": 18, "body": "note number 5 please"}
    guid = world.review(event="COMMENT", comments=[fifth])
    _, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-4000:]
    assert "Iteration 5 of 5" in world.fix_comment()
    assert world.git("show", f"{world.head()}:README.md") == "theirs\n"  # built on theirs
    before, pushes = world.head(), len(world.fake.pushes)
    sixth = {"path": "calc/ops.py", "line": 18, "body": "note number 6 please"}
    guid = world.review(comments=[sixth])
    _, status = world.finished(guid)
    assert status == "skipped", world.log.read_text()[-4000:]
    assert world.head() == before and len(world.fake.pushes) == pushes
    body = world.fix_comment()
    assert "this pull request has had 5 iterations" in body
    assert "`fix.max_iterations` in `.github/bot.yml` allows (5)" in body
