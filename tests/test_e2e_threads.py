"""End to end: commands written in pull request review threads, answered in those threads.

`bot serve` on the fake GitHub (which takes replies only under a thread's first comment, as
GitHub does) and a fake model that plays the review, `ask` and `fix` roles. Pull request #1
is alice's `fixtures/repos/calc` change; pull request #2 is the app's own (`bot/fix-7-mean`, the
same change): its review's finding is fixed from the finding's thread. One server serves the
module; the tests run in order, as the pull requests' story. The last test does the same on a
real starlette pull request from `../shared/real-repos`.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from tests.e2e_world import ADMIN_AND_WRITER, RealPull, ReviewWorld, needs_real, review_world
from tests.fakes.fix_model import Edit, FixModel
from tests.fakes.github import FakeGitHub
from tests.fakes.llm import Reply
from tests.fakes.review_model import CALC_RULES, ReviewModel
from tests.review._calc import snapshot
from tests.scripted import ModelScript, user_prompt

pytestmark = pytest.mark.slow

World = ReviewWorld
ANSWER = "Because `mean` divides by `len(values)`, which is 0 for an empty list."
MEAN_FIXED = str(snapshot("head1")["calc/ops.py"]).replace(
    "    return div(total, len(values))", "    return div(total, len(values)) if values else 0.0"
)
CLAMP_FIXED = str(snapshot("head1")["calc/ops.py"]).replace(
    "return max(hi, min(lo, x))", "return max(lo, min(hi, x))"
)
OWN_BRANCH = "bot/fix-7-mean"


@dataclass
class ThreadModel(ReviewModel):
    """The review model, plus `ask`'s explorers and advisor and `fix`'s roles; keeps the
    prompts of the `ask` and `fix` runs."""

    asks: ModelScript = field(
        default_factory=lambda: ModelScript(
            answer={
                "answer": ANSWER,
                "references": [{"path": "calc/ops.py", "line": 18}],
                "assumptions": [],
            }
        )
    )
    fixes: FixModel = field(
        default_factory=lambda: FixModel(
            (
                # First: pull request #1's context also holds the mean finding's comment.
                Edit("upper bound first", {"calc/ops.py": CLAMP_FIXED}, "Order clamp's bounds"),
                Edit("mean divides by zero", {"calc/ops.py": MEAN_FIXED}, "Guard mean"),
            )
        )
    )
    prompts: list[str] = field(default_factory=list)

    def __call__(self, body: dict[str, Any]) -> Reply:
        prompt = user_prompt(body)
        if prompt.startswith(("Someone with write access", "Answer this question")):
            self.prompts.append(prompt)
            return self.asks(body)
        if prompt.startswith(("Plan the change", "Make the change", "Check this change")):
            self.prompts.append(prompt)
            return self.fixes(body)
        return super().__call__(body)


def own_pull(fake: FakeGitHub) -> None:
    """Pull request #2: the app's own branch, holding alice's change."""
    bare = fake.repos["octo/hello"].git_dir
    head = fake.repos["octo/hello"].pulls[1]["head"]["sha"]
    subprocess.run(["git", f"--git-dir={bare}", "branch", OWN_BRANCH, head], check=True)
    anyio.run(
        lambda: fake.add_pull(
            "octo", "hello", head=OWN_BRANCH, user=fake.bot_login, title="Fix mean"
        )
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("threads-e2e")
    model = ThreadModel(CALC_RULES)
    with review_world(root, model, permissions=ADMIN_AND_WRITER, prepare=own_pull) as w:
        yield w


def model_of(world: World) -> ThreadModel:
    assert isinstance(world.model, ThreadModel)
    return world.model


def in_thread(
    world: World, body: str, *, reply_to: int, number: int = 1, user: str = "maint"
) -> tuple[str, dict[str, Any]]:
    """`user` writes `body` as a reply under review comment `reply_to`; the delivery's GUID
    and its payload."""
    first = world.fake.review_comment_by_id[reply_to]
    comment = world.fake.add_review_comment(
        "octo",
        "hello",
        number,
        body,
        user=user,
        path=first["path"],
        line=first["line"],
        in_reply_to=reply_to,
    )
    return world.post(
        "pull_request_review_comment", world.review_comment_event(comment, number)
    ), comment


def finding(world: World, title: str, number: int = 1) -> dict[str, Any]:
    return next(
        c
        for c in world.review_comments(number)
        if c["user"]["login"] == world.fake.bot_login
        and not c.get("in_reply_to_id")
        and title in c["body"]
    )


def replies_to(world: World, comment_id: int, number: int = 1) -> list[dict[str, Any]]:
    return [
        c
        for c in world.review_comments(number)
        if c["user"]["login"] == world.fake.bot_login and c.get("in_reply_to_id") == comment_id
    ]


def posts_to(world: World, suffix: str, since: int) -> list[Any]:
    return [c for c in world.fake.calls[since:] if c.method == "POST" and c.path.endswith(suffix)]


def test_an_ask_in_a_findings_thread_is_answered_in_that_thread_and_nowhere_else(
    world: World,
) -> None:
    world.review_opened()
    mean = finding(world, "mean divides by zero")
    conversation = len(world.own_comments())
    start = len(world.fake.calls)
    guid, asked = in_thread(world, "@repo-agent ask why is this unsafe?", reply_to=mean["id"])
    _, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-3000:]

    (reply,) = replies_to(world, mean["id"])
    assert ANSWER in reply["body"]
    assert len(world.own_comments()) == conversation
    assert posts_to(world, "/issues/1/comments", start) == []
    reactions = [
        r for r in world.fake.reactions if r["target"].get("review_comment_id") == asked["id"]
    ]
    assert [r["content"] for r in reactions] == ["eyes"]
    # The thread, its code and the app's finding were what the model read.
    prompt = next(p for p in model_of(world).prompts if p.startswith("Answer this question"))
    assert "in one of its review threads" in prompt
    assert f'source="thread comment {mean["id"]}"' in prompt
    assert f'source="thread comment {asked["id"]}"' in prompt
    assert "18> " in prompt and "return div(total, len(values))" in prompt
    assert "Status in the review memory: open" in prompt


def test_a_retried_run_and_a_replayed_delivery_reply_no_second_time(world: World) -> None:
    mean = finding(world, "mean divides by zero")
    before = len(replies_to(world, mean["id"]))
    start = len(world.fake.calls)
    # GitHub fails the run's last write (its check run) long enough for the job to be
    # tried again: the retry posts the recorded answer, and must find its reply.
    world.fake.fail_next("POST", "/repos/octo/hello/check-runs", 500, times=4)
    guid, asked = in_thread(world, "@repo-agent ask and for one value?", reply_to=mean["id"])
    run_id, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-3000:]
    (attempts,) = world.query("SELECT attempts FROM runs WHERE id = ?", run_id)[0]
    assert attempts >= 2
    assert len(replies_to(world, mean["id"])) == before + 1
    assert len(posts_to(world, f"/comments/{mean['id']}/replies", start)) == 1

    conversation = len(world.own_comments())
    again = world.post("pull_request_review_comment", world.review_comment_event(asked, 1))

    def decided() -> bool:
        rows = world.query("SELECT decision FROM deliveries WHERE guid = ?", again)
        return bool(rows) and rows[0][0] is not None

    world.wait("the replayed delivery's decision", decided)
    ((decision, reason),) = world.query(
        "SELECT decision, reason FROM deliveries WHERE guid = ?", again
    )
    assert (decision, reason.split(":")[0]) == ("skip", "replayed")
    assert world.query("SELECT COUNT(*) FROM runs WHERE delivery_id = ?", again) == [(0,)]
    assert len(replies_to(world, mean["id"])) == before + 1
    assert len(world.own_comments()) == conversation


def test_a_reply_whose_first_comment_was_deleted_is_answered_in_the_conversation(
    world: World,
) -> None:
    first = world.fake.add_review_comment(
        "octo", "hello", 1, "Is this right?", user="bob", path="calc/ops.py", line=22
    )
    comment = world.fake.add_review_comment(
        "octo",
        "hello",
        1,
        "@repo-agent ask is it?",
        user="maint",
        path="calc/ops.py",
        line=22,
        in_reply_to=first["id"],
    )
    world.fake.delete_review_comment(first["id"])
    conversation = len(world.own_comments())
    guid = world.post("pull_request_review_comment", world.review_comment_event(comment, 1))
    _, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-3000:]
    assert replies_to(world, first["id"]) == [] and replies_to(world, comment["id"]) == []
    answers = world.own_comments()[conversation:]
    (answer,) = answers
    assert "first comment of its review thread was deleted" in answer["body"]
    assert ANSWER in answer["body"]


def test_fix_from_the_apps_own_findings_thread_commits_on_its_head_and_resolves_it(
    world: World,
) -> None:
    git_dir = world.calc.git_dir
    guid = world.command("@repo-agent review", number=2)
    _, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-3000:]
    mean = finding(world, "mean divides by zero", number=2)
    before = _rev(git_dir, OWN_BRANCH)
    conversation = len(world.own_comments(2))
    pulls = len(world.fake.repos["octo/hello"].pulls)
    start = len(world.fake.calls)

    guid, _ = in_thread(world, "@repo-agent fix", reply_to=mean["id"], number=2)
    run_id, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-4000:]

    head = _rev(git_dir, OWN_BRANCH)
    assert _rev(git_dir, f"{OWN_BRANCH}~1") == before  # one commit, on its head
    assert "if values else 0.0" in _show(git_dir, f"{OWN_BRANCH}:calc/ops.py")
    assert world.fake.pushes[-1].ref == f"refs/heads/{OWN_BRANCH}"
    assert world.pull(2)["head"]["sha"] == head
    assert len(world.fake.repos["octo/hello"].pulls) == pulls  # no new pull request
    (reply,) = replies_to(world, mean["id"], number=2)
    assert f"Pushed `{head[:12]}`" in reply["body"]
    thread = world.fake.thread_of(mean["id"])
    assert thread["resolved"] and thread["resolved_by"] == world.fake.slug
    assert len(world.own_comments(2)) == conversation
    assert posts_to(world, "/issues/2/comments", start) == []
    plan = next(p for p in model_of(world).prompts if p.startswith("Plan the change"))
    assert "Fix what the review thread on calc/ops.py:18 is about" in plan
    (raw,) = world.query("SELECT state FROM review_states WHERE number = 2")[0]
    (stored,) = [f for f in json.loads(raw)["findings"] if f.get("comment_id") == mean["id"]]
    assert stored["status"] == "fixed" and head[:12] in stored["resolution"]
    (args,) = world.query("SELECT args FROM runs WHERE id = ?", run_id)[0]
    assert json.loads(args)["thread"] == {
        "first_comment_id": mean["id"],
        "own": True,
        "finding": stored["fingerprint"],
    }


def test_fix_in_a_new_thread_on_someone_elses_pull_request_opens_a_draft_into_it(
    world: World,
) -> None:
    before = _rev(world.calc.git_dir, "topic")
    pulls = set(world.fake.repos["octo/hello"].pulls)
    conversation = len(world.own_comments())
    asked = world.fake.add_review_comment(
        "octo",
        "hello",
        1,
        "@repo-agent fix the upper bound first, as the docs say",
        user="maint",
        path="calc/ops.py",
        line=22,
    )
    guid = world.post("pull_request_review_comment", world.review_comment_event(asked, 1))
    _, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-4000:]
    (number,) = set(world.fake.repos["octo/hello"].pulls) - pulls
    draft = world.pull(number)
    assert draft["draft"] and draft["base"]["ref"] == "topic"
    assert "max(lo, min(hi, x))" in _show(world.calc.git_dir, f"{draft['head']['ref']}:calc/ops.py")
    assert _rev(world.calc.git_dir, "topic") == before  # alice's branch is hers
    (reply,) = replies_to(world, asked["id"])
    assert f"Opened draft pull request #{number}." in reply["body"]
    assert not world.fake.thread_of(asked["id"])["resolved"]  # a person's thread is theirs
    assert len(world.own_comments()) == conversation


def _rev(git_dir: Any, ref: str) -> str:
    return _git(git_dir, "rev-parse", ref).strip()


def _show(git_dir: Any, spec: str) -> str:
    return _git(git_dir, "show", spec)


def _git(git_dir: Any, *args: str) -> str:
    done = subprocess.run(
        ["git", f"--git-dir={git_dir}", *args], capture_output=True, text=True, check=True
    )
    return done.stdout


@needs_real
def test_an_ask_in_a_thread_of_a_real_pull_request(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    pull = RealPull.clone(tmp_path_factory.mktemp("threads-real"), 867)
    model = ThreadModel(generic=True, outside=True)
    with pull.serving(model, user="aviramha") as world:
        world.review_opened()
        first = next(
            c for c in world.review_comments() if c["user"]["login"] == world.fake.bot_login
        )
        conversation = len(world.own_comments())
        guid, _ = in_thread(world, "@repo-agent ask why?", reply_to=first["id"], user="octo")
        _, status = world.finished(guid)
        assert status == "succeeded", world.log.read_text()[-3000:]
        (reply,) = replies_to(world, first["id"])
        assert ANSWER in reply["body"]
        assert len(world.own_comments()) == conversation
        prompt = next(p for p in model.prompts if p.startswith("Answer this question"))
        assert f'source="thread comment {first["id"]}"' in prompt
        assert f"{first['line']}> " in prompt  # the real file at the head, around the line
