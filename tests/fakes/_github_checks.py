"""The fake GitHub's check suites, and the deliveries a person's Re-run on a check sends.

As GitHub keeps them: one suite per (repository, App, head commit), made when the App's first
check run on that commit is; its status follows its runs, and every change moves its
`updated_at`. A request to run a check again resets the suite (`queued`, no conclusion) and
leaves the check run itself as it was; the delivery lists the open pull requests whose head
branch is the suite's, and none when the head is a fork's (its `head_branch` is null).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.fakes._github_state import FakeError, iso, user_json

if TYPE_CHECKING:
    from tests.fakes._github_state import FakeRepo
    from tests.fakes.github import FakeGitHub


def _app(fake: FakeGitHub) -> dict[str, Any]:
    return {
        "id": fake.app_id,
        "slug": fake.slug,
        "node_id": f"A_{fake.app_id}",
        "name": fake.slug,
        "owner": user_json("octo"),
        "html_url": f"https://github.com/apps/{fake.slug}",
    }


def _head_branch(fr: FakeRepo, head_sha: str) -> str | None:
    """The branch of this repository an open pull request has at `head_sha` (None: a fork's)."""
    for _, pull in sorted(fr.pulls.items()):
        head = pull["head"]
        if head["sha"] == head_sha and head["repo"]["full_name"] == fr.full_name:
            return str(head["ref"])
    return None


def suite_for(fake: FakeGitHub, fr: FakeRepo, head_sha: str) -> dict[str, Any]:
    """The App's check suite on `head_sha` in `fr`, made on its first check run there."""
    for sid, suite in fake.check_suites.items():
        if fake.check_suite_repo[sid] == fr.full_name and suite["head_sha"] == head_sha:
            return suite
    sid = fake._id()
    now = iso()
    suite = {
        "id": sid,
        "node_id": f"CS_{sid}",
        "head_branch": _head_branch(fr, head_sha),
        "head_sha": head_sha,
        "status": "queued",
        "conclusion": None,
        "url": f"https://api.github.com/repos/{fr.full_name}/check-suites/{sid}",
        "before": None,
        "after": head_sha,
        "app": _app(fake),
        "created_at": now,
        "updated_at": now,
    }
    fake.check_suites[sid] = suite
    fake.check_suite_repo[sid] = fr.full_name
    return suite


def follow_runs(fake: FakeGitHub, suite: dict[str, Any]) -> None:
    """The suite's status and conclusion from its check runs, as GitHub sums them up."""
    runs = [r for r in fake.check_runs.values() if r["check_suite"]["id"] == suite["id"]]
    if any(r["status"] != "completed" for r in runs):
        suite["status"], suite["conclusion"] = "in_progress", None
    else:
        order = ("action_required", "cancelled", "timed_out", "failure", "neutral", "success")
        found = [r["conclusion"] for r in runs]
        suite["status"] = "completed"
        suite["conclusion"] = next((c for c in order if c in found), "success")
    suite["updated_at"] = iso()


def _pulls_of(fake: FakeGitHub, fr: FakeRepo, suite: dict[str, Any]) -> list[dict[str, Any]]:
    """The `pull_requests` of a check's payload: open pulls whose head branch is the suite's."""
    branch = suite["head_branch"]
    if branch is None:
        return []
    return [
        {
            "url": pull["url"],
            "id": pull["id"],
            "number": pull["number"],
            "head": {
                "ref": pull["head"]["ref"],
                "sha": pull["head"]["sha"],
                "repo": {k: pull["head"]["repo"][k] for k in ("id", "name")},
            },
            "base": {
                "ref": pull["base"]["ref"],
                "sha": pull["base"]["sha"],
                "repo": {k: pull["base"]["repo"][k] for k in ("id", "name")},
            },
        }
        for _, pull in sorted(fr.pulls.items())
        if pull["state"] == "open"
        and pull["head"]["ref"] == branch
        and pull["head"]["repo"]["full_name"] == fr.full_name
    ]


def _installation_of(fake: FakeGitHub, fr: FakeRepo) -> int:
    return next(i.id for i in fake.installations.values() if fr.full_name in i.repos)


def _rerequested(fake: FakeGitHub, fr: FakeRepo, sender: str, **check: Any) -> dict[str, Any]:
    return {
        "action": "rerequested",
        **check,
        "repository": fake._repo_stub(fr.full_name, fr),
        "installation": {"id": _installation_of(fake, fr)},
        "sender": user_json(sender),
    }


def rerequest_check_run(fake: FakeGitHub, check_run_id: int, sender: str) -> dict[str, Any]:
    """`sender` pressed Re-run on check run `check_run_id`: the `check_run.rerequested`
    delivery GitHub sends its App, after resetting the run's suite."""
    if check_run_id not in fake.check_runs:
        raise FakeError(404, "Not Found")
    fr = fake.repos[fake.check_run_repo[check_run_id]]
    run = fake.check_runs[check_run_id]
    suite = fake.check_suites[run["check_suite"]["id"]]
    suite.update(status="queued", conclusion=None, updated_at=iso())
    pulls = _pulls_of(fake, fr, suite)
    body = {**run, "check_suite": {**suite, "pull_requests": pulls}, "pull_requests": pulls}
    return _rerequested(fake, fr, sender, check_run=body)


def rerequest_check_suite(fake: FakeGitHub, suite_id: int, sender: str) -> dict[str, Any]:
    """`sender` pressed Re-run all checks on suite `suite_id`: `check_suite.rerequested`."""
    if suite_id not in fake.check_suites:
        raise FakeError(404, "Not Found")
    fr = fake.repos[fake.check_suite_repo[suite_id]]
    suite = fake.check_suites[suite_id]
    suite.update(status="queued", conclusion=None, updated_at=iso())
    body = {**suite, "pull_requests": _pulls_of(fake, fr, suite)}
    return _rerequested(fake, fr, sender, check_suite=body)
