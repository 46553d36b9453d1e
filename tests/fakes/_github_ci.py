"""The fake GitHub's CI results of other Apps and integrations on a commit.

As GitHub serves them:

- a check run of another App sits in the same list as the app's own
  (`GET /repos/{o}/{r}/commits/{ref}/check-runs`), each naming its App (`app.id`, `app.slug`)
  and, in its `output`, how many annotations it has (`annotations_count`);
- `GET /repos/{o}/{r}/check-runs/{id}/annotations` lists them, at most 50 a page whatever
  `per_page` asks (GitHub takes 50 per request when they are written, and the fake serves
  them as strictly), with `Link: rel="next"` for the rest; a check run of another repository
  is a 404;
- commit statuses (`POST /repos/{o}/{r}/statuses/{sha}` by other integrations, `add_status`
  here) are served newest first by `GET .../commits/{ref}/statuses`, and as the newest per
  context by the combined `GET .../commits/{ref}/status`, whose `state` is `failure` when
  any is `error` or `failure`, `pending` when any is pending or there is none, else
  `success`; both need the `statuses` permission on a narrowed token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse, Response

from tests.fakes._github_ctx import Ctx, Handler
from tests.fakes._github_git import git
from tests.fakes._github_state import FakeError, iso, user_json

if TYPE_CHECKING:
    from tests.fakes.github import FakeGitHub

ANNOTATIONS_PER_PAGE = 50
LEVELS = ("notice", "warning", "failure")
STATES = ("error", "failure", "pending", "success")


def add_check_run(
    fake: FakeGitHub,
    full_name: str,
    head_sha: str,
    *,
    name: str,
    app_slug: str,
    app_id: int,
    conclusion: str | None,
    annotations: list[dict[str, Any]] | None = None,
    title: str | None = None,
) -> dict[str, Any]:
    """Another App's check run on `head_sha`, with its annotations (path, start_line,
    end_line, annotation_level, message, and optionally title, columns, raw_details)."""
    if app_id == fake.app_id or app_slug == fake.slug:
        raise ValueError("use the app's own API calls for its own check runs")
    cid = fake._id()
    notes = []
    for a in annotations or []:
        if a["annotation_level"] not in LEVELS:
            raise ValueError(f"not an annotation level: {a['annotation_level']}")
        notes.append(
            {
                "path": a["path"],
                "blob_href": f"https://github.com/{full_name}/blob/{head_sha}/{a['path']}",
                "start_line": a["start_line"],
                "end_line": a.get("end_line", a["start_line"]),
                "start_column": a.get("start_column"),
                "end_column": a.get("end_column"),
                "annotation_level": a["annotation_level"],
                "title": a.get("title"),
                "message": a["message"],
                "raw_details": a.get("raw_details"),
            }
        )
    run = {
        "id": cid,
        "node_id": f"CR_{cid}",
        "name": name,
        "head_sha": head_sha,
        "status": "completed" if conclusion else "in_progress",
        "conclusion": conclusion,
        "external_id": "",
        "details_url": f"https://ci.example/{app_slug}/{cid}",
        "html_url": f"https://github.com/{full_name}/runs/{cid}",
        "started_at": iso(),
        "completed_at": iso() if conclusion else None,
        "output": {
            "title": title,
            "summary": None,
            "text": None,
            "annotations_count": len(notes),
            "annotations_url": f"https://api.github.com/repos/{full_name}/check-runs/{cid}/annotations",
        },
        "app": {
            "id": app_id,
            "slug": app_slug,
            "node_id": f"A_{app_id}",
            "name": app_slug,
            "owner": user_json(app_slug.split("-")[0] or "someone", "Organization"),
            "html_url": f"https://github.com/apps/{app_slug}",
        },
        "check_suite": {"id": fake._id()},
    }
    fake.check_runs[cid] = run
    fake.check_run_repo[cid] = full_name
    fake.annotations[cid] = notes
    return run


def add_status(
    fake: FakeGitHub,
    full_name: str,
    sha: str,
    *,
    context: str,
    state: str,
    description: str | None = None,
    creator: str = "ci-bot[bot]",
) -> dict[str, Any]:
    """A commit status another integration set on `sha` (newest last in the fake's list)."""
    if state not in STATES:
        raise ValueError(f"not a commit status state: {state}")
    sid = fake._id()
    status = {
        "id": sid,
        "node_id": f"SC_{sid}",
        "url": f"https://api.github.com/repos/{full_name}/statuses/{sha}",
        "state": state,
        "description": description,
        "target_url": f"https://ci.example/{context}",
        "context": context,
        "avatar_url": None,
        "created_at": iso(),
        "updated_at": iso(),
        "creator": user_json(creator),
    }
    fake.statuses.setdefault((full_name, sha), []).append(status)
    return status


def _page(ctx: Ctx, items: list[Any], cap: int) -> tuple[list[Any], dict[str, str]]:
    per_page = min(int(ctx.request.query_params.get("per_page", 30)), cap)
    number = int(ctx.request.query_params.get("page", 1))
    chunk = items[(number - 1) * per_page : number * per_page]
    headers = {}
    if number * per_page < len(items):
        nxt = ctx.request.url.include_query_params(page=number + 1, per_page=per_page)
        headers["link"] = f'<{nxt}>; rel="next"'
    return chunk, headers


def ci_routes(fake: FakeGitHub, r: str) -> list[tuple[str, str, str, Handler]]:
    async def sha_of(ctx: Ctx) -> str:
        ref = ctx.param("ref")
        sha = (
            await git(
                ctx.fr.git_dir, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}", check=False
            )
        ).strip()
        if not sha:
            raise FakeError(422, f"No commit found for SHA: {ref}")
        return sha

    async def annotations(ctx: Ctx) -> Response:
        cid = ctx.number("check_run_id")
        if fake.check_run_repo.get(cid) != ctx.fr.full_name:
            raise FakeError(404, "Not Found")
        chunk, headers = _page(ctx, fake.annotations.get(cid, []), ANNOTATIONS_PER_PAGE)
        return JSONResponse(chunk, headers=headers)

    def newest_first(ctx: Ctx, sha: str) -> list[dict[str, Any]]:
        return list(reversed(fake.statuses.get((ctx.fr.full_name, sha), [])))

    async def statuses(ctx: Ctx) -> Response:
        chunk, headers = _page(ctx, newest_first(ctx, await sha_of(ctx)), 100)
        return JSONResponse(chunk, headers=headers)

    async def combined(ctx: Ctx) -> Response:
        sha = await sha_of(ctx)
        latest: dict[str, dict[str, Any]] = {}
        for status in newest_first(ctx, sha):
            latest.setdefault(status["context"], status)
        items = list(latest.values())
        states = {s["state"] for s in items}
        state = (
            "failure"
            if states & {"error", "failure"}
            else "pending"
            if "pending" in states or not items
            else "success"
        )
        chunk, headers = _page(ctx, items, 100)
        full = ctx.fr.full_name
        body = {
            "state": state,
            "statuses": chunk,
            "sha": sha,
            "total_count": len(items),
            "repository": fake._repo_stub(full, ctx.fr),
            "commit_url": f"https://api.github.com/repos/{full}/commits/{sha}",
            "url": f"https://api.github.com/repos/{full}/commits/{sha}/status",
        }
        return JSONResponse(body, headers=headers)

    return [
        ("GET", r + "/check-runs/{check_run_id:int}/annotations", "token", annotations),
        ("GET", r + "/commits/{ref:path}/statuses", "token", statuses),
        ("GET", r + "/commits/{ref:path}/status", "token", combined),
    ]
