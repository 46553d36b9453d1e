"""End to end: `bot action` as a GitHub Actions step, a subprocess per job, on the fake GitHub.

Each job gets what GitHub gives one: the event's name and payload file (shaped from the
recorded payloads in `fixtures/github-payloads/`, without `installation`, as a job's are),
the job's token (acting as `github-actions[bot]`), a step summary file and a fresh
`RUNNER_TEMP`. Nothing is shared between jobs but what the app posted on the pull request,
so the second review's memory can only come from the sticky summary's signed marker.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.action_world import JOB_PERMISSIONS, PAYLOADS, Jobs
from tests.e2e_world import head_files
from tests.fakes.github import FakeGitHub, commit_files, serve_fake_github
from tests.fakes.llm import FakeLLM, Reply, serve
from tests.fakes.review_model import CALC_RULES, ReviewModel
from tests.review._calc import CalcRepo, build_calc
from tests.scripted import ModelScript, user_prompt

pytestmark = pytest.mark.slow


@dataclass(kw_only=True)
class Actions(Jobs):
    """calc's pull request #1 by alice, reviewed by `model`."""

    calc: CalcRepo
    model: ReviewModel

    def pull_event(self, action: str, number: int = 1, **extra: Any) -> dict[str, Any]:
        recorded = json.loads((PAYLOADS / "pull_request" / "opened.payload.json").read_text())
        pull = self.fake.repos["octo/hello"].pulls[number]
        recorded.pop("installation")
        return {
            **recorded,
            "action": action,
            "number": number,
            "pull_request": pull,
            "repository": self.repository(),
            "sender": pull["user"],
            **extra,
        }

    def reviews(self) -> list[dict[str, Any]]:
        return list(self.fake.repos["octo/hello"].reviews.get(1, []))

    def review_comments(self) -> list[dict[str, Any]]:
        return list(self.fake.repos["octo/hello"].review_comments.get(1, []))


SLOW: dict[str, float] = {"delay": 0.0}
"""Seconds every model answer takes (a test sets it to keep a job busy)."""


def _responder(model: ReviewModel) -> Any:
    script = ModelScript()

    def respond(body: dict[str, Any]) -> Reply:
        if user_prompt(body).startswith("Answer this question"):
            reply = script(body)
        else:
            reply = model(body)
        return dataclasses.replace(reply, delay=SLOW["delay"]) if SLOW["delay"] else reply

    return respond


@pytest.fixture(scope="module")
def actions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Actions]:
    root = tmp_path_factory.mktemp("action-e2e")
    calc = build_calc(root)
    fake = FakeGitHub(slug="github-actions")
    fake.add_repo("octo", "hello", calc.git_dir, default_branch="main")
    fake.add_installation(42, "octo", ["octo/hello"])
    fake.set_permission("octo", "hello", "octo", "admin")
    fake.set_permission("octo", "hello", "maint", "write")
    fake.set_permission("octo", "hello", "reader", "read")
    anyio.run(lambda: fake.add_pull("octo", "hello", head="topic", user="alice", title="Add mean"))
    model = ReviewModel(CALC_RULES)
    model.files = head_files(calc.git_dir, fake)
    llm = FakeLLM()
    llm.respond_with(_responder(model))
    with serve_fake_github(fake) as gh_url, serve(llm) as llm_url:
        world = Actions(
            root=root,
            fake=fake,
            calc=calc,
            model=model,
            github_url=gh_url,
            llm_url=llm_url,
            llm=llm,
        )
        world.token = fake.issue_token(42, ["hello"], dict(JOB_PERMISSIONS)).value
        yield world


def checkout(actions: Actions, name: str, *depth: str) -> Path:
    """The job's `actions/checkout` of the pull request's head: origin is the server's."""
    where = actions.root / name
    source = actions.calc.git_dir.as_uri()
    subprocess.run(
        ["git", "clone", "-q", *depth, "--branch", "topic", source, str(where)], check=True
    )
    origin = f"{actions.github_url}/octo/hello.git"
    subprocess.run(["git", "-C", str(where), "remote", "set-url", "origin", origin], check=True)
    return where


def test_opened_posts_one_review_and_the_sticky_summary(actions: Actions) -> None:
    workspace = checkout(actions, "workspace-full")
    calls = len(actions.fake.calls)
    job = actions.job(
        "pull_request", actions.pull_event("opened"), env={"GITHUB_WORKSPACE": str(workspace)}
    )
    assert job.rc == 0, job.log[-4000:]
    # The checkout held every object the review read: the mirror fetched nothing.
    assert not [c.path for c in actions.fake.calls[calls:] if c.path.endswith("git-upload-pack")]

    (review,) = actions.reviews()
    assert review["user"]["login"] == "github-actions[bot]"
    assert review["commit_id"] == actions.calc.head1
    titles = [c["body"].split("\n", 1)[0] for c in actions.review_comments()]
    assert any("mean divides by zero" in t for t in titles)
    assert any("clamp swaps" in t for t in titles)
    (summary,) = actions.own_comments()
    assert "3 new" in summary["body"] and "bot:review-state" in summary["body"]
    checks = [r for r in actions.fake.check_runs.values() if r["head_sha"] == actions.calc.head1]
    assert len(checks) == 1 and checks[0]["status"] == "completed"
    assert "review" in job.summary and "succeeded" in job.summary


def test_a_push_in_a_new_job_reviews_only_what_changed_from_the_marker(
    actions: Actions,
) -> None:
    reviewed_before = len(actions.model.reviewed_paths)
    payload = anyio.run(actions.fake.push_pull, "octo", "hello", 1, actions.calc.head2)
    payload.pop("installation", None)
    # Someone copies the app's signed summary, marker and all: not the app's, so ignored.
    (own,) = actions.own_comments()
    actions.fake.add_comment("octo", "hello", 1, own["body"], user="mallory")
    shallow = checkout(actions, "workspace-shallow", "--depth", "1")
    job = actions.job("pull_request", payload, env={"GITHUB_WORKSPACE": str(shallow)})
    assert job.rc == 0, job.log[-4000:]
    assert "shallow" in job.summary and "fetch-depth: 0" in job.summary
    assert "markers that are not the app's signed summary line were ignored" in job.log

    # A new process with a new store: only the marker told it what was reviewed.
    sent = [p for paths in actions.model.reviewed_paths[reviewed_before:] for p in paths]
    assert sent and set(sent) <= {"calc/ops.py", "tests/test_mean.py"}
    assert len(actions.reviews()) == 1  # nothing new: no second review, no finding twice
    replies = [c for c in actions.review_comments() if c.get("in_reply_to_id")]
    assert [r["body"] for r in replies] == [f"Fixed in {actions.calc.head2}."]
    (summary,) = actions.own_comments()
    assert "1 fixed" in summary["body"] and "0 new" in summary["body"]


def test_a_writer_asks_and_is_answered_a_reader_is_not(actions: Actions) -> None:
    before = len(actions.own_comments())
    kept = actions.root / "artifacts"
    job = actions.job(
        "issue_comment",
        actions.comment_event("@github-actions ask where is mean?", "maint"),
        args=("--artifacts", str(kept)),
    )
    assert job.rc == 0, job.log[-4000:]
    assert len(actions.own_comments()) == before + 1
    # Asked for, the run's store and journal are left for actions/upload-artifact.
    assert (kept / "bot.sqlite3").is_file() and any((kept / "runs").iterdir())

    writes = len(actions.fake.writes())
    job = actions.job(
        "issue_comment", actions.comment_event("@github-actions ask where is mean?", "reader")
    )
    assert job.rc == 0, job.log[-4000:]
    assert len(actions.fake.writes()) == writes  # nothing posted for a reader
    assert "Nothing to do" in job.summary


def test_a_fork_pull_request_posts_nothing_and_says_why(actions: Actions) -> None:
    payload = actions.pull_event("opened")
    pull = dict(payload["pull_request"])
    pull["head"] = {**pull["head"], "repo": {**pull["head"]["repo"], "full_name": "mallory/hello"}}
    payload["pull_request"] = pull
    writes, calls = len(actions.fake.writes()), len(actions.fake.calls)
    job = actions.job("pull_request", payload)
    assert job.rc == 0, job.log[-4000:]
    assert len(actions.fake.calls) == calls  # not even a read
    assert len(actions.fake.writes()) == writes
    assert "fork" in job.summary and "pull_request_target" in job.summary
    assert "fork" in job.log


def test_jobs_the_app_cannot_run_say_so(actions: Actions) -> None:
    calls = len(actions.fake.calls)
    missing = actions.job("pull_request", None)
    assert missing.rc == 1 and "cannot be read" in missing.log
    garbage = actions.job("pull_request", "{not json")
    assert garbage.rc == 1 and "not JSON" in garbage.log and "not JSON" in garbage.summary
    push = actions.job("push", {"ref": "refs/heads/main", "repository": actions.repository()})
    assert push.rc == 0 and "does not act on `push`" in push.log
    other = actions.pull_event("opened")
    other["repository"] = {**other["repository"], "full_name": "someone/else"}
    elsewhere = actions.job("pull_request", other)
    assert elsewhere.rc == 1 and "runs in octo/hello" in elsewhere.log
    assert len(actions.fake.calls) == calls  # none of them asked GitHub anything


def test_a_token_without_pull_request_write_fails_naming_the_permission(
    actions: Actions,
) -> None:
    read_only = actions.fake.issue_token(
        42, ["hello"], {**JOB_PERMISSIONS, "pull_requests": "read"}
    ).value
    pull = anyio.run(
        lambda: actions.fake.add_pull("octo", "hello", head="next", user="alice", title="Clamp")
    )
    job = actions.job("pull_request", actions.pull_event("opened", pull["number"]), token=read_only)
    assert job.rc == 1, job.log[-4000:]
    assert "the token needs pull_requests=write" in job.log, job.log[-3000:]
    # No review could be posted: its findings are the job's annotations, the only workflow
    # commands in the step's output, which are off (`stop-commands`) everywhere else.
    lines = job.log.splitlines()
    assert lines[0].startswith("::stop-commands::")
    resume = lines.index(f"::{lines[0].removeprefix('::stop-commands::')}::")
    annotations = [ln for ln in lines if ln.startswith(("::error ", "::warning ", "::notice "))]
    assert annotations and all(lines.index(a) > resume for a in annotations)
    assert any("file=calc/ops.py" in a and "mean divides by zero" in a for a in annotations), (
        annotations
    )
    assert "annotations" in job.summary
    assert "pull-requests: write" in job.summary  # as a workflow's `permissions` spells it


def test_a_cancelled_job_stops_its_run_and_the_next_job_finishes_it(actions: Actions) -> None:
    commit_files(
        actions.calc.git_dir,
        "late",
        {"calc/late.py": "def late(x):\n    return 1/x\n"},
        "Late",
        base="main",
    )
    pull = anyio.run(
        lambda: actions.fake.add_pull("octo", "hello", head="late", user="alice", title="Late")
    )
    number, head = pull["number"], pull["head"]["sha"]
    actions.runs += 1
    job_dir = actions.root / f"job-{actions.runs}"
    environ = actions.environ(job_dir, "pull_request")
    Path(environ["GITHUB_EVENT_PATH"]).write_text(json.dumps(actions.pull_event("opened", number)))
    bodies = len(actions.llm.bodies)
    SLOW["delay"] = 30.0
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "action"],
            cwd=job_dir,
            env=environ,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        deadline = time.monotonic() + 60
        while len(actions.llm.bodies) == bodies:  # the review is asking the model
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)  # what GitHub sends a cancelled job's step first
        out, _ = proc.communicate(timeout=15)
    finally:
        SLOW["delay"] = 0.0
    checks = [r for r in actions.fake.check_runs.values() if r["head_sha"] == head]
    assert [c["status"] for c in checks] == ["completed"], out[-3000:]
    assert "cancelled" in Path(environ["GITHUB_STEP_SUMMARY"]).read_text()

    # The next job (a new store) reviews it; one sticky summary, one review, nothing twice.
    job = actions.job("pull_request", actions.pull_event("synchronize", number))
    assert job.rc == 0, job.log[-4000:]
    assert "review" in job.summary and "succeeded" in job.summary
    assert len(actions.fake.repos["octo/hello"].reviews.get(number, [])) <= 1
    stickies = [
        c
        for c in actions.fake.comments_on("octo", "hello", number)
        if c["user"]["login"] == "github-actions[bot]"
    ]
    assert len(stickies) == 1, [c["body"][:200] for c in stickies]
    checks = [r for r in actions.fake.check_runs.values() if r["head_sha"] == head]
    assert all(c["status"] == "completed" for c in checks)
