"""Where a fix starts and where its commit goes."""

from __future__ import annotations

from policies.fix_target import PullFacts, for_issue, for_pull

SHA = "a" * 40


def pull(head_ref: str, head_repo: str | None = "octo/hello") -> PullFacts:
    return PullFacts(7, head_ref, SHA, head_repo, "main")


def test_an_issue_without_a_fix_branch_gets_a_new_one_into_the_default_branch() -> None:
    target = for_issue(3, "main", {})
    assert (target.where, target.start_sha, target.branch, target.pull_base) == (
        "new_branch",
        None,
        None,
        "main",
    )
    assert target.closes


def test_an_issue_with_an_open_fix_branch_adds_to_it() -> None:
    target = for_issue(3, "main", {"bot/fix-3-greet": SHA, "bot/fix-31-other": "b" * 40})
    assert (target.where, target.branch, target.start_sha) == (
        "existing_branch",
        "bot/fix-3-greet",
        SHA,
    )


def test_another_issues_branch_is_not_taken_for_this_one() -> None:
    assert for_issue(3, "main", {"bot/fix-31-other": SHA}).where == "new_branch"


def test_the_apps_own_pull_request_gets_commits_on_its_branch() -> None:
    target = for_pull(pull("bot/fix-3-greet"), "octo/hello", "main")
    assert (target.where, target.branch, target.closes) == (
        "existing_branch",
        "bot/fix-3-greet",
        False,
    )


def test_someone_elses_pull_request_gets_a_new_branch_into_its_head() -> None:
    target = for_pull(pull("feature"), "Octo/Hello", "main")
    assert (target.where, target.branch, target.pull_base, target.start_sha) == (
        "new_branch",
        None,
        "feature",
        SHA,
    )


def test_a_fork_or_a_deleted_fork_gets_a_patch_only() -> None:
    for head_repo in ("mallory/hello", None):
        target = for_pull(pull("bot/fix-3-x", head_repo), "octo/hello", "main")
        assert target.where == "patch_only" and "fork" in target.reason


def test_a_pull_request_from_the_default_branch_is_never_pushed_to() -> None:
    target = for_pull(pull("main"), "octo/hello", "main")
    assert target.where == "patch_only" and "default branch" in target.reason
