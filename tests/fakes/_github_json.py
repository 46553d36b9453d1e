"""JSON objects of the fake GitHub built from its records: repositories and installations."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from tests.fakes._github_state import FakeRepo, clone_url, iso, repo_links, user_json

if TYPE_CHECKING:
    from tests.fakes.github import FakeGitHub


def repo_json(request: Request, fr: FakeRepo) -> dict[str, Any]:
    api = f"https://api.github.com/repos/{fr.full_name}"
    return {
        "id": fr.id,
        "node_id": f"R_{fr.id}",
        "name": fr.name,
        "full_name": fr.full_name,
        "private": fr.private,
        "owner": user_json(fr.owner),
        "html_url": f"https://github.com/{fr.full_name}",
        "description": None,
        "fork": False,
        "url": api,
        "clone_url": clone_url(request, fr.full_name),
        "git_url": f"git://github.com/{fr.full_name}.git",
        "ssh_url": f"git@github.com:{fr.full_name}.git",
        "svn_url": f"https://github.com/{fr.full_name}",
        "mirror_url": None,
        "homepage": None,
        **repo_links(fr.full_name),
        "default_branch": fr.default_branch,
        "visibility": "private" if fr.private else "public",
        "archived": False,
        "disabled": False,
        "has_issues": True,
        "has_projects": False,
        "has_downloads": True,
        "has_wiki": False,
        "has_pages": False,
        "is_template": False,
        "allow_forking": True,
        "web_commit_signoff_required": False,
        "size": 0,
        "language": None,
        "license": None,
        "forks": 0,
        "forks_count": 0,
        "stargazers_count": 0,
        "watchers": 0,
        "watchers_count": 0,
        "open_issues": sum(1 for i in fr.issues.values() if i["state"] == "open"),
        "open_issues_count": sum(1 for i in fr.issues.values() if i["state"] == "open"),
        "topics": [],
        "created_at": "2024-01-01T00:00:00Z",
        "updated_at": iso(),
        "pushed_at": iso(),
    }


def installation_json(fake: FakeGitHub, inst_id: int) -> dict[str, Any]:
    inst = fake.installations[inst_id]
    return {
        "id": inst.id,
        "account": user_json(inst.account, "Organization"),
        "repository_selection": "selected",
        "access_tokens_url": f"https://api.github.com/app/installations/{inst.id}/access_tokens",
        "app_id": fake.app_id,
        "app_slug": fake.slug,
        "target_type": "Organization",
        "permissions": {"contents": "write", "issues": "write", "metadata": "read"},
        "events": ["issues", "issue_comment", "pull_request"],
        "created_at": "2024-01-01T00:00:00Z",
        "updated_at": "2024-01-01T00:00:00Z",
        "suspended_at": "2024-01-02T00:00:00Z" if inst.suspended else None,
    }


def issue_json(
    fr: FakeRepo,
    issue_id: int,
    number: int,
    *,
    title: str,
    body: str | None,
    user: str,
    labels: list[dict[str, Any]],
    state: str,
    association: str,
) -> dict[str, Any]:
    """An issue as `GET /repos/{owner}/{repo}/issues/{number}` answers it."""
    now = iso()
    api = f"https://api.github.com/repos/{fr.full_name}"
    return {
        "id": issue_id,
        "node_id": f"I_{number}",
        "url": f"{api}/issues/{number}",
        "html_url": f"https://github.com/{fr.full_name}/issues/{number}",
        "number": number,
        "state": state,
        "title": title,
        "body": body,
        "user": user_json(user),
        "labels": labels,
        "assignee": None,
        "assignees": [],
        "milestone": None,
        "comments": 0,
        "locked": False,
        "active_lock_reason": None,
        "author_association": association,
        "repository_url": api,
        "labels_url": f"{api}/issues/{number}/labels{{/name}}",
        "comments_url": f"{api}/issues/{number}/comments",
        "events_url": f"{api}/issues/{number}/events",
        "timeline_url": f"{api}/issues/{number}/timeline",
        "reactions": {"total_count": 0, "+1": 0, "-1": 0, "eyes": 0},
        "performed_via_github_app": None,
        "state_reason": None,
        "created_at": now,
        "updated_at": now,
        "closed_at": None,
    }
