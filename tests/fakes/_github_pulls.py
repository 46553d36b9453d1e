"""The fake GitHub's pull request, review and check run endpoints."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.responses import PlainTextResponse, Response

from tests.fakes._github_checks import follow_runs, suite_for
from tests.fakes._github_ctx import Ctx, Handler, body_field, ok
from tests.fakes._github_git import git, pull_changes
from tests.fakes._github_state import FakeError, invalid, is_sha, iso, user_json

if TYPE_CHECKING:
    from tests.fakes.github import FakeGitHub


STATUSES = ("queued", "in_progress", "completed", "waiting", "requested", "pending")
CONCLUSIONS = (
    "action_required",
    "cancelled",
    "failure",
    "neutral",
    "success",
    "skipped",
    "stale",
    "timed_out",
)


def check_run_fields(data: dict[str, Any]) -> None:
    """GitHub's checks on a check run's fields: known values, texts within 65535 characters."""
    if data.get("status", "queued") not in STATUSES:
        raise FakeError(422, "Validation Failed: status is not included in the list")
    if data.get("conclusion") not in (None, *CONCLUSIONS):
        raise FakeError(422, "Validation Failed: conclusion is not included in the list")
    if data.get("status") == "completed" and not data.get("conclusion"):
        raise FakeError(422, "Validation Failed: conclusion is required when completed")
    for key in ("title", "summary", "text"):
        value = (data.get("output") or {}).get(key)
        if isinstance(value, str) and len(value) > 65535:
            raise FakeError(422, f"Validation Failed: output.{key} is too long (maximum 65535)")


async def branch_sha(git_dir: Path, branch: str) -> str | None:
    """The commit branch `branch` points at, or None when there is no such branch."""
    found = await git(
        git_dir, "rev-parse", "-q", "--verify", f"refs/heads/{branch}^{{commit}}", check=False
    )
    return found.strip() or None


def pull_routes(fake: FakeGitHub, r: str) -> list[tuple[str, str, str, Handler]]:
    """(method, path, auth, handler) for the pull request endpoints under repository path `r`."""

    def pull_of(ctx: Ctx) -> dict[str, Any]:
        pull = ctx.fr.pulls.get(ctx.number())
        if pull is None:
            raise FakeError(404, "Not Found")
        return pull

    # -- pulls ------------------------------------------------------------------------------

    async def get_pull(ctx: Ctx) -> Response:
        pull = pull_of(ctx)
        if "diff" in ctx.request.headers.get("accept", ""):
            return PlainTextResponse(
                ctx.fr.pull_diffs[ctx.number()],
                media_type="application/vnd.github.diff",
            )
        return ok(pull)

    async def pull_files(ctx: Ctx) -> Response:
        pull_of(ctx)
        return fake.page(ctx.request, ctx.fr.pull_files[ctx.number()])

    async def review_comments(ctx: Ctx) -> Response:
        pull_of(ctx)
        return fake.page(ctx.request, ctx.fr.review_comments.get(ctx.number(), []))

    async def open_pull(ctx: Ctx) -> Response:
        head, base = body_field(ctx, "head"), body_field(ctx, "base")
        title = body_field(ctx, "title")
        fr = ctx.fr
        if not isinstance(title, str) or not title.strip():
            raise invalid(field="title")
        if not isinstance(head, str) or not isinstance(base, str):
            raise invalid(field="head" if not isinstance(head, str) else "base")
        owner, colon, branch = head.rpartition(":")
        if colon and owner.lower() != fr.owner.lower():
            raise invalid(field="head")  # a fork's branch: the fake holds no forks to open from
        head_sha = await branch_sha(fr.git_dir, branch)
        if head_sha is None:
            raise invalid(field="head")
        base_sha = await branch_sha(fr.git_dir, base)
        if base_sha is None:
            raise invalid(field="base")
        label = f"{fr.owner}:{branch}"
        for existing in fr.pulls.values():
            same = existing["head"]["label"] == label and existing["base"]["ref"] == base
            if same and existing["state"] == "open":
                raise invalid(f"A pull request already exists for {label}.")
        ahead = await git(fr.git_dir, "rev-list", "--count", f"{base_sha}..{head_sha}")
        if int(ahead.strip() or 0) == 0:
            raise invalid(f"No commits between {base} and {branch}")
        pull = await fake.add_pull(
            fr.owner,
            fr.name,
            head=branch,
            base=base,
            title=title,
            body=(ctx.json or {}).get("body", ""),
            user=fake.bot_login,
            draft=bool((ctx.json or {}).get("draft", False)),
        )
        return ok(pull, 201)

    async def request_reviewers(ctx: Ctx) -> Response:
        pull = pull_of(ctx)
        data = ctx.json if isinstance(ctx.json, dict) else {}
        logins = data.get("reviewers", [])
        teams = data.get("team_reviewers", [])
        if not isinstance(logins, list) or not isinstance(teams, list) or not (logins or teams):
            raise FakeError(422, "Invalid request: 'reviewers' wasn't supplied.")
        fr = ctx.fr
        for login in logins:
            if not isinstance(login, str):
                raise FakeError(422, "Invalid request: reviewers must be logins.")
            if login.lower() == pull["user"]["login"].lower():
                raise FakeError(422, "Review cannot be requested from pull request author.")
            if fr.permissions.get(login.lower(), "none") == "none" or teams:
                raise FakeError(
                    422,
                    "Reviews may only be requested from collaborators. One or more of the users "
                    f"or teams you specified is not a collaborator of the {fr.full_name} "
                    "repository.",
                )
        requested: list[dict[str, Any]] = pull["requested_reviewers"]
        for login in logins:
            if all(r["login"].lower() != login.lower() for r in requested):
                requested.append(user_json(login))
        return ok(pull, 201)

    async def list_pulls(ctx: Ctx) -> Response:
        state = ctx.request.query_params.get("state", "open")
        head = ctx.request.query_params.get("head")
        base = ctx.request.query_params.get("base")
        pulls = [
            pull
            for _, pull in sorted(ctx.fr.pulls.items(), reverse=True)
            if state in ("all", pull["state"])
            and (head is None or pull["head"]["label"] == head)
            and (base is None or pull["base"]["ref"] == base)
        ]
        return fake.page(ctx.request, pulls)

    async def list_reviews(ctx: Ctx) -> Response:
        pull_of(ctx)
        return fake.page(ctx.request, ctx.fr.reviews.get(ctx.number(), []))

    async def update_review(ctx: Ctx) -> Response:
        pull_of(ctx)
        rid = ctx.number("review_id")
        for review in ctx.fr.reviews.get(ctx.number(), []):
            if review["id"] == rid:
                review["body"] = body_field(ctx, "body")
                return ok(review)
        raise FakeError(404, "Not Found")

    # -- check runs -------------------------------------------------------------------------

    async def create_check_run(ctx: Ctx) -> Response:
        name = body_field(ctx, "name")
        head_sha = body_field(ctx, "head_sha")
        data = ctx.json
        check_run_fields(data)
        if not isinstance(head_sha, str) or not is_sha(head_sha):
            raise FakeError(422, f"No commit found for SHA: {head_sha}")
        suite = suite_for(fake, ctx.fr, head_sha)
        cid = fake._id()
        run = {
            "id": cid,
            "node_id": f"CR_{cid}",
            "name": name,
            "head_sha": head_sha,
            "status": data.get("status", "queued"),
            "conclusion": data.get("conclusion"),
            "external_id": data.get("external_id", ""),
            "details_url": data.get("details_url"),
            "html_url": f"https://github.com/{ctx.fr.full_name}/runs/{cid}",
            "started_at": iso(),
            "completed_at": iso() if data.get("conclusion") else None,
            "output": {"title": None, "summary": None, "text": None, **(data.get("output") or {})},
            "app": {"id": fake.app_id, "slug": fake.slug},
            "check_suite": {"id": suite["id"]},
        }
        fake.check_runs[cid] = run
        fake.check_run_repo[cid] = ctx.fr.full_name
        follow_runs(fake, suite)
        return ok(run, 201)

    async def update_check_run(ctx: Ctx) -> Response:
        cid = ctx.number("check_run_id")
        if fake.check_run_repo.get(cid) != ctx.fr.full_name:
            raise FakeError(404, "Not Found")
        run = fake.check_runs[cid]
        data = ctx.json if isinstance(ctx.json, dict) else {}
        check_run_fields(data)
        for key in ("name", "status", "conclusion", "external_id", "details_url"):
            if key in data:
                run[key] = data[key]
        if "output" in data:
            run["output"] = {**run["output"], **data["output"]}
        if data.get("conclusion"):
            run["status"] = "completed"
            run["completed_at"] = iso()
        follow_runs(fake, fake.check_suites[run["check_suite"]["id"]])
        return ok(run)

    async def list_check_runs(ctx: Ctx) -> Response:
        ref = ctx.param("ref")
        sha = (
            ref
            if is_sha(ref)
            else (await git(ctx.fr.git_dir, "rev-parse", ref, check=False)).strip()
        )
        name = ctx.request.query_params.get("check_name")
        runs = [
            run
            for cid, run in sorted(fake.check_runs.items())
            if fake.check_run_repo[cid] == ctx.fr.full_name
            and run["head_sha"] == sha
            and (name is None or run["name"] == name)
        ]
        return fake.page(ctx.request, runs, key="check_runs")

    return [
        ("POST", r + "/pulls", "token", open_pull),
        ("GET", r + "/pulls", "token", list_pulls),
        ("GET", r + "/pulls/{number:int}", "token", get_pull),
        ("POST", r + "/pulls/{number:int}/requested_reviewers", "token", request_reviewers),
        ("GET", r + "/pulls/{number:int}/files", "token", pull_files),
        ("GET", r + "/pulls/{number:int}/comments", "token", review_comments),
        ("GET", r + "/pulls/{number:int}/reviews", "token", list_reviews),
        ("PUT", r + "/pulls/{number:int}/reviews/{review_id:int}", "token", update_review),
        ("POST", r + "/check-runs", "token", create_check_run),
        ("PATCH", r + "/check-runs/{check_run_id:int}", "token", update_check_run),
        ("GET", r + "/commits/{ref:path}/check-runs", "token", list_check_runs),
    ]


async def build_pull(
    fake: FakeGitHub,
    owner: str,
    repo: str,
    *,
    head: str,
    base: str | None,
    title: str,
    body: str | None,
    user: str,
    draft: bool,
    head_repo: str | None,
    number: int | None,
) -> dict[str, Any]:
    """Record a pull request from `head` into `base`, computed from the bare repository."""
    fr = fake.repos[f"{owner}/{repo}"]
    base = base or fr.default_branch
    head_sha = (await git(fr.git_dir, "rev-parse", f"{head}^{{commit}}")).strip()
    base_sha = (await git(fr.git_dir, "rev-parse", f"{base}^{{commit}}")).strip()
    issue = fake.add_issue(owner, repo, title=title, body=body, user=user, number=number)
    n = issue["number"]
    await git(fr.git_dir, "update-ref", f"refs/pull/{n}/head", head_sha)
    diff, changes = await pull_changes(fr.git_dir, base_sha, head_sha)
    fr.pull_diffs[n] = diff
    fr.pull_files[n] = [
        {
            "sha": secrets.token_hex(20),
            "filename": c.filename,
            "status": c.status,
            "additions": c.additions,
            "deletions": c.deletions,
            "changes": c.additions + c.deletions,
            "blob_url": f"https://github.com/{fr.full_name}/blob/{head_sha}/{c.filename}",
            "patch": c.patch,
            **({"previous_filename": c.previous_filename} if c.previous_filename else {}),
        }
        for c in changes
    ]
    url = f"https://api.github.com/repos/{fr.full_name}/issues/{n}"
    issue["pull_request"] = {"url": url.replace("/issues/", "/pulls/"), "merged_at": None}
    head_full = head_repo or fr.full_name
    api = f"https://api.github.com/repos/{fr.full_name}"
    pull = {
        **{k: issue[k] for k in ("id", "number", "state", "title", "body", "user")},
        **{k: issue[k] for k in ("created_at", "updated_at", "author_association")},
        "url": url.replace("/issues/", "/pulls/"),
        "html_url": f"https://github.com/{fr.full_name}/pull/{n}",
        "draft": draft,
        "merged": False,
        "mergeable": True,
        "head": {
            "label": f"{head_full.split('/')[0]}:{head}",
            "ref": head,
            "sha": head_sha,
            "user": user_json(head_full.split("/")[0]),
            "repo": fake._repo_stub(head_full, fr),
        },
        "base": {
            "label": f"{owner}:{base}",
            "ref": base,
            "sha": base_sha,
            "user": user_json(owner),
            "repo": fake._repo_stub(fr.full_name, fr),
        },
        "additions": sum(c.additions for c in changes),
        "deletions": sum(c.deletions for c in changes),
        "changed_files": len(changes),
        "commits": 1,
        "comments": 0,
        "review_comments": 0,
        "node_id": f"PR_{issue['id']}",
        "labels": issue["labels"],
        "locked": False,
        "active_lock_reason": None,
        "assignee": None,
        "assignees": [],
        "requested_reviewers": [],
        "requested_teams": [],
        "milestone": None,
        "closed_at": None,
        "merged_at": None,
        "merged_by": None,
        "merge_commit_sha": None,
        "mergeable_state": "clean",
        "rebaseable": True,
        "maintainer_can_modify": False,
        "auto_merge": None,
        "diff_url": f"https://github.com/{fr.full_name}/pull/{n}.diff",
        "patch_url": f"https://github.com/{fr.full_name}/pull/{n}.patch",
        "issue_url": url,
        "commits_url": f"{api}/pulls/{n}/commits",
        "review_comments_url": f"{api}/pulls/{n}/comments",
        "review_comment_url": f"{api}/pulls/comments{{/number}}",
        "comments_url": f"{api}/issues/{n}/comments",
        "statuses_url": f"{api}/statuses/{head_sha}",
        "_links": {
            "self": {"href": f"{api}/pulls/{n}"},
            "html": {"href": f"https://github.com/{fr.full_name}/pull/{n}"},
            "issue": {"href": url},
            "comments": {"href": f"{api}/issues/{n}/comments"},
            "review_comments": {"href": f"{api}/pulls/{n}/comments"},
            "commits": {"href": f"{api}/pulls/{n}/commits"},
            "statuses": {"href": f"{api}/statuses/{head_sha}"},
        },
    }
    fr.pulls[n] = pull
    return pull


def close_pull(
    fake: FakeGitHub, owner: str, repo: str, number: int, *, merged: bool, user: str
) -> dict[str, Any]:
    """Close pull request `number` (merged by `user`, or closed unmerged), as GitHub does on
    its page; returns the `pull_request.closed` webhook payload GitHub would send. A merge
    moves no branch here: nothing the app reads after a close needs it."""
    fr = fake.repos[f"{owner}/{repo}"]
    pull, issue = fr.pulls[number], fr.issues[number]
    at = iso()
    for item in (pull, issue):
        item.update(state="closed", closed_at=at, updated_at=at)
    if merged:
        pull.update(
            merged=True,
            merged_at=at,
            merged_by=user_json(user),
            merge_commit_sha=pull["head"]["sha"],
            mergeable=None,
            mergeable_state="unknown",
        )
        issue["pull_request"]["merged_at"] = at
    return {
        "action": "closed",
        "number": number,
        "pull_request": pull,
        "repository": fake._repo_stub(fr.full_name, fr),
        "installation": {
            "id": next(i for i, inst in fake.installations.items() if fr.full_name in inst.repos)
        },
        "sender": user_json(user),
    }
