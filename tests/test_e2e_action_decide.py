"""End to end: a `fix` that ends BLOCKED in one `bot action` job, answered by `decide` in the next.

The jobs share no store: the second finds the BLOCKED run in its own comment (a signed line,
`policies.carried_run`), so only the app's own, unaltered comment can be answered, and only by
a writer. The repository and the fake model are `tests/test_e2e_fix.py`'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.action_world import JOB_PERMISSIONS, LOGIN, Jobs
from tests.fakes.fix_model import FixModel
from tests.fakes.github import FakeGitHub, serve_fake_github
from tests.fakes.gitrepo import commit_files, init_bare_repo
from tests.fakes.llm import FakeLLM, serve
from tests.test_e2e_fix import BASE, EDITS

pytestmark = pytest.mark.slow


@dataclass(kw_only=True)
class FixJobs(Jobs):
    model: FixModel


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FixJobs]:
    root = tmp_path_factory.mktemp("action-decide")
    bare = init_bare_repo(root / "remote" / "octo" / "hello.git", BASE)
    commit_files(bare, "main", {}, "Start")
    fake = FakeGitHub(slug="github-actions")
    fake.add_repo("octo", "hello", bare)
    fake.add_installation(42, "octo", ["octo/hello"])
    fake.set_permission("octo", "hello", "maint", "write")
    fake.set_permission("octo", "hello", "reader", "read")
    fake.add_issue("octo", "hello", title="ci python", body="Use 3.12 in CI.", user="alice")
    model = FixModel(EDITS)
    llm = FakeLLM()
    llm.respond_with(model)
    with serve_fake_github(fake) as gh_url, serve(llm) as llm_url:
        world = FixJobs(
            root=root, fake=fake, github_url=gh_url, llm_url=llm_url, llm=llm, model=model
        )
        world.token = fake.issue_token(42, ["hello"], dict(JOB_PERMISSIONS)).value
        yield world


def test_a_blocked_fix_is_answered_by_decide_in_a_later_job(jobs: FixJobs) -> None:
    fix = jobs.comment_event("@github-actions fix update .github/workflows/ci.yml", "maint")
    job = jobs.job("issue_comment", fix)
    assert job.rc == 0 and "fix blocked" in job.summary, job.log[-4000:]
    (report,) = jobs.own_comments()
    assert "@github-actions decide " in report["body"]
    assert "bot:blocked-run " in report["body"]  # the run, carried where the next job looks
    pushes = len(jobs.fake.pushes)

    # A copy of the app's comment by someone else carries nothing the app will answer.
    forged = jobs.fake.add_comment("octo", "hello", 1, report["body"], user="mallory")
    assert forged["user"]["login"] == "mallory"

    # A reader's answer does nothing.
    writes = len(jobs.fake.writes())
    job = jobs.job("issue_comment", jobs.comment_event("@github-actions decide 1", "reader"))
    assert job.rc == 0 and len(jobs.fake.writes()) == writes, job.log[-3000:]

    # A writer's answer, in a job with a new store, resumes the fix with the decision.
    implemented = jobs.model.calls["implement"]
    job = jobs.job("issue_comment", jobs.comment_event("@github-actions decide 1", "maint"))
    assert job.rc == 0, job.log[-4000:]
    assert "carried in from its comment" in job.log
    assert "decide succeeded" in job.summary, job.summary
    assert jobs.model.calls["implement"] > implemented  # run again: no journal to replay
    assert len(jobs.fake.pushes) == pushes  # option 1 pushes no workflow change
    own = jobs.own_comments()
    assert len(own) == 2 and "**Answered**" in own[0]["body"]
    assert "```diff" in own[1]["body"] and "workflows/ci.yml" in own[1]["body"]
    assert all(c["user"]["login"] == LOGIN for c in own)

    # The same question cannot be answered twice, even by a job that knows nothing of it:
    # marked answered, the comment no longer carries the run.
    assert "bot:blocked-run " not in jobs.own_comments()[0]["body"]
    implemented = jobs.model.calls["implement"]
    job = jobs.job("issue_comment", jobs.comment_event("@github-actions decide 2", "maint"))
    assert job.rc == 0, job.log[-4000:]
    assert jobs.model.calls["implement"] == implemented and len(jobs.fake.pushes) == pushes
    assert "no BLOCKED question" in jobs.own_comments()[-1]["body"]
