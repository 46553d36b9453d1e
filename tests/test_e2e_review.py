"""End to end: pull request reviews through `bot serve`, the fake GitHub and the fake model.

The pull request is `fixtures/repos/calc`: a first version with two bugs (`mean` divides by
zero on an empty list, `clamp` swaps its bounds), then a push that fixes `clamp`. The fake
model (`tests.fakes.review_model`) plays every role of the review and reports what its rules
match, again and again, like a model that does not remember: the app's memory must stop
repeats. One server serves the module; the tests run in order, as the pull request's story.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.e2e_world import ADMIN_AND_WRITER, ReviewWorld, review_world
from tests.fakes.github import commit_files
from tests.fakes.review_model import CALC_RULES, ReviewModel
from tests.review._calc import snapshot

pytestmark = pytest.mark.slow

World = ReviewWorld


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("review-e2e")
    with review_world(root, ReviewModel(CALC_RULES), permissions=ADMIN_AND_WRITER) as w:
        yield w


def test_first_review_posts_one_review_one_summary_one_check(world: World) -> None:
    fake = world.fake
    start = len(fake.calls)
    world.review_opened()

    (review,) = world.reviews()
    assert review["commit_id"] == world.calc.head1
    inline = world.review_comments()
    by_title = {c["body"].split("\n", 1)[0]: c for c in inline}
    mean = next(c for t, c in by_title.items() if "mean divides by zero" in t)
    clamp = next(c for t, c in by_title.items() if "clamp swaps" in t)
    assert (mean["path"], mean["line"]) == ("calc/ops.py", 18)
    assert (clamp["path"], clamp["line"]) == ("calc/ops.py", 22)
    # The clamp fix passes the repository's check: a suggestion block. The mean fix fails it.
    assert "```suggestion\n    return max(lo, min(hi, x))\n```" in clamp["body"]
    assert "```suggestion" not in mean["body"] and "check.py` failed" in mean["body"]
    # A finding outside the diff goes into the review's body.
    assert "**Outside the diff**" in review["body"] and "calc/ops.py:12" in review["body"]

    (summary,) = world.own_comments()
    assert "### Review" in summary["body"] and "2 new" not in summary["body"]
    assert "3 new" in summary["body"] and "bot:review-state" in summary["body"]
    runs = [r for r in fake.check_runs.values() if r["head_sha"] == world.calc.head1]
    assert len(runs) == 1 and runs[0]["status"] == "completed"

    writes = [c for c in fake.calls[start:] if c.method in ("POST", "PATCH", "PUT")]
    kinds = [
        (c.method, c.path.rsplit("/", 1)[-1] if "/pulls/" not in c.path else "reviews")
        for c in writes
    ]
    assert sum(1 for c in writes if c.path.endswith("/reviews")) == 1
    sticky_writes = [c for c in writes if "/issues/" in c.path and "comments" in c.path]
    assert len(sticky_writes) <= 2, kinds
    assert sum(1 for c in writes if c.path.endswith("/check-runs")) == 1
    # `.github/bot.yml` is read once to decide and once for the run, however many of the
    # run's steps (its flow, its language, its agent types) need it.
    config_reads = [c for c in fake.calls[start:] if c.path.endswith("/contents/.github/bot.yml")]
    assert len(config_reads) == 2, [(c.method, c.path) for c in config_reads]
    # Nothing pushed, no branch or worktree left in the mirror.
    assert not any("git-receive-pack" in c.path for c in fake.calls)
    heads = subprocess.run(
        ["git", f"--git-dir={world.mirror()}", "for-each-ref", "refs/heads/bot/"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert heads == ""
    worktrees = world.mirror() / "worktrees"
    assert not worktrees.exists() or not any(worktrees.iterdir())
    world.notes["mean"] = mean
    world.notes["clamp"] = clamp


def test_push_reviews_only_what_changed_and_closes_the_fixed_thread(world: World) -> None:
    fake = world.fake
    person = fake.add_review_comment(
        "octo", "hello", 1, "Why a new file?", user="maint", path="tests/test_mean.py", line=4
    )
    reviewed_before = len(world.model.reviewed_paths)
    reviews_before = len(world.reviews())
    guid = world.push(world.calc.head2)
    _, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-3000:]

    # Only the files the push changed went to the reviewer.
    sent = [p for paths in world.model.reviewed_paths[reviewed_before:] for p in paths]
    assert sent and set(sent) <= {"calc/ops.py", "tests/test_mean.py"}
    assert all(world.model.focused[reviewed_before:])  # shown what the push changed
    # Nothing new: no second review, no finding twice.
    assert len(world.reviews()) == reviews_before
    clamp, mean = world.notes["clamp"], world.notes["mean"]
    replies = [c for c in world.review_comments() if c.get("in_reply_to_id")]
    assert [(r["in_reply_to_id"], r["body"]) for r in replies] == [
        (clamp["id"], f"Fixed in {world.calc.head2}.")
    ]
    assert fake.thread_of(clamp["id"])["resolved"] is True
    assert fake.thread_of(mean["id"])["resolved"] is False
    # A person's thread is never touched.
    assert fake.thread_of(person["id"])["resolved"] is False
    assert fake.thread_of(person["id"])["comments"] == [person["id"]]
    (summary,) = world.own_comments()
    assert "1 fixed" in summary["body"] and "0 new" in summary["body"]
    assert f"`{world.calc.head1[:12]}`..`{world.calc.head2[:12]}`" in summary["body"]
    runs = [r for r in fake.check_runs.values() if r["head_sha"] == world.calc.head2]
    assert len(runs) == 1 and runs[0]["conclusion"] == "success"


def test_a_finding_a_person_resolved_is_not_raised_again(world: World) -> None:
    fake = world.fake
    mean = world.notes["mean"]
    fake.resolve_thread(mean["id"], "maint")  # a writer (the author, alice, could not)
    reviews_before = len(world.reviews())
    calls_before = world.model.calls["review"]
    guid = world.command("@repo-agent review full")
    _, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-3000:]
    assert world.model.calls["review"] > calls_before  # the model saw it, and reported it again
    assert len(world.reviews()) == reviews_before
    (summary,) = world.own_comments()
    assert "1 dismissed" in summary["body"] and "0 new" in summary["body"]
    assert "thread resolved by @maint" in summary["body"]


def merge_commit(bare: Path, ours: str, theirs: str, message: str) -> str:
    """A merge of `theirs` into `ours` whose tree is `ours` plus the files `theirs` added."""

    def git(*args: str, env: dict[str, str] | None = None) -> str:
        import os

        done = subprocess.run(
            ["git", f"--git-dir={bare}", *args],
            capture_output=True,
            check=True,
            env={
                **os.environ,
                "GIT_AUTHOR_NAME": "t",
                "GIT_AUTHOR_EMAIL": "t@e",
                "GIT_COMMITTER_NAME": "t",
                "GIT_COMMITTER_EMAIL": "t@e",
                **(env or {}),
            },
        )
        return done.stdout.decode().strip()

    index = {"GIT_INDEX_FILE": str(bare / "merge-index")}
    git("read-tree", ours, env=index)
    added = git("diff", "--name-only", f"{ours}...{theirs}").split()
    for path in added:
        blob = git("rev-parse", f"{theirs}:{path}")
        git("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=index)
    tree = git("write-tree", env=index)
    (bare / "merge-index").unlink()
    return git("commit-tree", tree, "-p", ours, "-p", theirs, "-m", message)


def test_a_merge_of_the_base_branch_brings_nothing_to_review(world: World) -> None:
    bare = world.calc.git_dir
    main = commit_files(bare, "main", {"NOTES.md": "Release notes.\n"}, "Notes")
    merged = merge_commit(bare, world.pull()["head"]["sha"], main, "Merge main")
    calls_before = dict(world.model.calls)
    reviews_before = len(world.reviews())
    guid = world.push(merged)
    _, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-3000:]
    assert world.model.calls == calls_before  # no model call at all
    assert len(world.reviews()) == reviews_before
    (summary,) = world.own_comments()
    assert "Nothing changed that needs a review" in summary["body"]


def test_a_force_push_reviews_what_changed_in_the_files_whose_patch_changed(world: World) -> None:
    bare = world.calc.git_dir
    files = {**snapshot("head1"), **snapshot("head2")}
    files["tests/test_mean.py"] = str(files["tests/test_mean.py"]) + (
        "\n\ndef test_mean_one() -> None:\n    assert ops.mean([4]) == 4\n"
    )
    rewritten = commit_files(bare, "rewritten", files, "Add mean and clamp (rebased)", base="main")
    reviewed_before = len(world.model.reviewed_paths)
    guid = world.push(rewritten)
    _, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-3000:]
    sent = [p for paths in world.model.reviewed_paths[reviewed_before:] for p in paths]
    assert sent == ["tests/test_mean.py"]
    # The base is where it was, so the diff between the old head and the rewritten one is the
    # pull request's own change: the reviewer is shown that, not the whole patch.
    assert world.model.focused[reviewed_before:] == [True]


def test_a_push_during_a_review_supersedes_it(world: World) -> None:
    fake, bare = world.fake, world.calc.git_dir
    first = commit_files(bare, "topic2", snapshot("head1"), "Add mean again", base="main")
    pull = anyio.run(lambda: fake.add_pull("octo", "hello", head="topic2", user="alice", number=2))
    assert pull["head"]["sha"] == first
    world.model.review_delay = 1.5
    try:
        calls = world.model.calls["review"]
        slow = world.post("pull_request", world.pull_payload("opened", number=2))
        world.wait(
            "the first review to reach the model", lambda: world.model.calls["review"] > calls
        )
        second = commit_files(bare, "topic2", snapshot("head2"), "Fix clamp")
        fast = world.push(second, number=2)
        _, slow_status = world.finished(slow)
        _, fast_status = world.finished(fast)
    finally:
        world.model.review_delay = 0.0
    assert slow_status == "skipped"
    (outcome,) = world.query("SELECT outcome FROM runs WHERE delivery_id = ?", slow)[0]
    assert "**Superseded:** a newer push arrived" in json.loads(outcome)["summary"]
    assert fast_status == "succeeded", world.log.read_text()[-3000:]
    (review,) = world.reviews(2)
    assert review["commit_id"] == second
    (summary,) = world.own_comments(2)
    assert f"`{second[:12]}`" in summary["body"] and "Superseded" not in summary["body"]


def test_a_fork_pull_request_is_reviewed_and_nothing_is_pushed(world: World) -> None:
    fake, bare = world.fake, world.calc.git_dir
    commit_files(bare, "fork-topic", snapshot("head1"), "From a fork", base="main")
    anyio.run(
        lambda: fake.add_pull(
            "octo",
            "hello",
            head="fork-topic",
            head_repo="stranger/hello",
            user="stranger",
            number=3,
        )
    )
    guid = world.post("pull_request", world.pull_payload("opened", number=3))
    _, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-3000:]
    assert len(world.reviews(3)) == 1
    assert not any("git-receive-pack" in c.path for c in fake.calls)
    refs = subprocess.run(
        ["git", f"--git-dir={bare}", "for-each-ref", "refs/heads/bot/"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert refs == ""


def test_pause_and_resume_turn_automatic_reviews_off_and_on(world: World) -> None:
    bare = world.calc.git_dir
    _, status = world.finished(world.command("@repo-agent pause"))
    assert status == "succeeded"
    replies = [c for c in world.own_comments() if "paused" in c["body"]]
    assert replies and "@repo-agent resume" in replies[-1]["body"]
    calls_before = dict(world.model.calls)
    files = {**snapshot("head1"), **snapshot("head2"), "README.md": "# calc\n\nPaused.\n"}
    paused_head = commit_files(bare, "paused", files, "Docs while paused", base="main")
    _, status = world.finished(world.push(paused_head))
    assert status == "skipped" and world.model.calls == calls_before
    _, status = world.finished(world.command("@repo-agent resume"))
    assert status == "succeeded"
    files["README.md"] = "# calc\n\nResumed.\n"
    resumed = commit_files(bare, "resumed", files, "Docs again", base="main")
    _, status = world.finished(world.push(resumed))
    assert status == "succeeded" and world.model.calls["review"] > calls_before["review"]
