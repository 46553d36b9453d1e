"""The fake GitHub's pull request reviews: strict anchors, threads, replies, GraphQL, pushes.

As strict as GitHub where the app can get it wrong:
- a review's `commit_id` must be a commit of the pull request; each inline comment is checked
  against the diff of that commit against the merge base: `line` must be shown on its `side`,
  `start_line` must come before `line` and lie in the same hunk; any bad comment refuses the
  whole review with a 422 and nothing is stored (GitHub's behaviour, which makes per-comment
  probing a mistake);
- a `COMMENT` review needs a body or at least one comment;
- a reply goes to a thread's first comment only (`in_reply_to` a reply is refused), and a
  review comment is edited (`PATCH /pulls/comments/{id}`) only by its own author;
- GraphQL answers `reviewThreads` (with `isResolved`, `isOutdated`, `resolvedBy`, comments
  and their 👎 reactions) and `resolveReviewThread`; anything else gets GraphQL's error shape.

Test helpers on the fake: `resolve_thread(...)` as a person, `react_to_review_comment(...)`,
`delete_review_comment(...)` as its author would (the thread's replies stay, pointing at it),
`push_pull(...)` (moves the head like a push and returns a `synchronize` payload),
`submit_review(...)` (a person's review with inline comments, each its own thread, and the
`pull_request_review.submitted` payload GitHub sends for it). `GET .../reviews/{id}/comments`
lists one review's inline comments, as GitHub does (404 for a review of another pull request).
"""

from __future__ import annotations

import re
import secrets
from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse, Response

from tests.fakes._github_ctx import Ctx, Handler, body_field, ok
from tests.fakes._github_git import commentable_lines, git, pull_changes
from tests.fakes._github_state import FakeError, FakeRepo, is_sha, iso, user_json

if TYPE_CHECKING:
    from tests.fakes.github import FakeGitHub


_REST_STATES = {
    "COMMENT": "COMMENTED",
    "APPROVE": "APPROVED",
    "REQUEST_CHANGES": "CHANGES_REQUESTED",
}
"""A review's `state` as the REST API reports it, by the `event` that submitted it."""


def _hunk_index(patch: str, side: str) -> dict[int, int]:
    """line -> index of the hunk showing it, on one side of a file's patch."""
    out: dict[int, int] = {}
    old = new = 0
    index = -1
    for line in patch.splitlines():
        header = re.match(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@", line)
        if header:
            old, new = int(header.group(1)), int(header.group(2))
            index += 1
            continue
        if line.startswith("+"):
            if side == "RIGHT":
                out[new] = index
            new += 1
        elif line.startswith("-"):
            if side == "LEFT":
                out[old] = index
            old += 1
        elif line.startswith(" ") or line == "":
            out[new if side == "RIGHT" else old] = index
            old += 1
            new += 1
    return out


async def _commit_patches(fr: FakeRepo, pull: dict[str, Any], commit: str) -> dict[str, str]:
    _, changes = await pull_changes(fr.git_dir, pull["base"]["sha"], commit)
    return {c.filename: c.patch for c in changes}


async def _in_pull(fr: FakeRepo, pull: dict[str, Any], commit: str) -> bool:
    """A commit of the pull request: the head or one of its ancestors not on the base."""
    if not is_sha(commit):
        return False
    head = pull["head"]["sha"]
    if commit == head:
        return True
    known = await git(fr.git_dir, "cat-file", "-t", commit, check=False)
    if known.strip() != "commit":
        return False
    inside = await git(fr.git_dir, "rev-list", f"{pull['base']['sha']}..{head}", check=False)
    return commit in inside.split()


def _validate_comment(c: Any, patches: dict[str, str]) -> None:
    if not isinstance(c, dict):
        raise FakeError(422, "Invalid request: comments must be objects")
    path, body = c.get("path"), c.get("body")
    if not isinstance(path, str) or not path:
        raise FakeError(422, "Invalid request: 'path' wasn't supplied.")
    if not isinstance(body, str) or not body.strip():
        raise FakeError(422, "Invalid request: 'body' wasn't supplied.")
    line = c.get("line")
    if "position" in c and line is None:
        raise FakeError(422, "Unprocessable Entity: this fake expects `line`, not `position`")
    if not isinstance(line, int) or isinstance(line, bool):
        raise FakeError(422, "Invalid request: 'line' wasn't supplied.")
    side = c.get("side", "RIGHT")
    if side not in ("RIGHT", "LEFT"):
        raise FakeError(422, "Invalid request: side is not included in the list")
    if path not in patches:
        raise FakeError(422, "Unprocessable Entity: pull_request_review_thread.path is invalid")
    hunks = _hunk_index(patches[path], side)
    if line not in hunks:
        raise FakeError(
            422, "Unprocessable Entity: pull_request_review_thread.line must be part of the diff"
        )
    start = c.get("start_line")
    if start is not None:
        start_side = c.get("start_side", side)
        if not isinstance(start, int) or isinstance(start, bool) or start_side != side:
            raise FakeError(422, "Unprocessable Entity: start_line is invalid")
        if start >= line:
            raise FakeError(
                422,
                "Unprocessable Entity: pull_request_review_thread.start_line must precede "
                "the end line",
            )
        if hunks.get(start) != hunks[line]:
            raise FakeError(
                422,
                "Unprocessable Entity: pull_request_review_thread.start_line must be part of "
                "the same hunk as the line",
            )


def _thread_json(fake: FakeGitHub, fr: FakeRepo, thread: dict[str, Any]) -> dict[str, Any]:
    comments = [fake.review_comment_by_id[cid] for cid in thread["comments"]]
    nodes = []
    for c in comments:
        downs = [
            r["json"]["user"]["login"]
            for r in fake.reactions
            if r["target"] == {"repo": fr.full_name, "review_comment_id": c["id"]}
            and r["content"] == "-1"
        ]
        nodes.append(
            {
                "databaseId": c["id"],
                "id": c["node_id"],
                "url": c["html_url"],
                "author": {"login": c["user"]["login"].removesuffix("[bot]")},
                "body": c["body"],
                "path": c["path"],
                "line": c.get("line"),
                "reactions": {
                    "totalCount": len(downs),
                    "nodes": [{"user": {"login": login}} for login in downs],
                },
            }
        )
    return {
        "id": thread["id"],
        "isResolved": thread["resolved"],
        "isOutdated": thread.get("outdated", False),
        "path": comments[0]["path"] if comments else None,
        "line": comments[0].get("line") if comments else None,
        "resolvedBy": {"login": thread["resolved_by"]} if thread.get("resolved_by") else None,
        "comments": {"totalCount": len(nodes), "nodes": nodes},
    }


async def refresh_outdated(
    fr: FakeRepo, pull: dict[str, Any], threads: list[dict[str, Any]]
) -> None:
    """A thread is outdated when its first comment's line no longer reads the same at the head
    (or is no longer in the diff), as GitHub marks threads after a push."""
    head = pull["head"]["sha"]
    patches = await _commit_patches(fr, pull, head)
    for thread in threads:
        first = thread["first"]
        path, line, commit = first["path"], first.get("line"), first["commit_id"]
        if commit == head:
            thread["outdated"] = False
            continue
        before = await git(fr.git_dir, "show", f"{commit}:{path}", check=False)
        after = await git(fr.git_dir, "show", f"{head}:{path}", check=False)
        old_lines, new_lines = before.split("\n"), after.split("\n")
        same = (
            isinstance(line, int)
            and line <= len(old_lines)
            and line <= len(new_lines)
            and old_lines[line - 1] == new_lines[line - 1]
        )
        shown = path in patches and line in commentable_lines(patches[path])["RIGHT"]
        thread["outdated"] = not (same and shown)


def review_routes(fake: FakeGitHub, r: str) -> list[tuple[str, str, str, Handler]]:
    """(method, path, auth, handler) for reviews, replies and GraphQL."""

    def pull_of(ctx: Ctx) -> dict[str, Any]:
        pull = ctx.fr.pulls.get(ctx.number())
        if pull is None:
            raise FakeError(404, "Not Found")
        return pull

    async def create_review(ctx: Ctx) -> Response:
        pull = pull_of(ctx)
        n = ctx.number()
        data = ctx.json if isinstance(ctx.json, dict) else {}
        event = data.get("event", "PENDING")
        if event not in ("APPROVE", "REQUEST_CHANGES", "COMMENT", "PENDING"):
            raise FakeError(422, "Validation Failed: event is not valid")
        commit = data.get("commit_id") or pull["head"]["sha"]
        if not await _in_pull(ctx.fr, pull, commit):
            raise FakeError(422, "Unprocessable Entity: commit_id is not part of the pull request")
        inline = data.get("comments") or []
        if not isinstance(inline, list):
            raise FakeError(422, "Invalid request: comments must be an array")
        body = data.get("body") or ""
        if event in ("COMMENT", "REQUEST_CHANGES") and not body.strip() and not inline:
            raise FakeError(422, f"Unprocessable Entity: Review body is required for {event} event")
        if len(body) > 65536:
            raise FakeError(422, "Unprocessable Entity: body is too long (maximum is 65536)")
        patches = await _commit_patches(ctx.fr, pull, commit)
        for c in inline:
            _validate_comment(c, patches)
        rid = fake._id()
        review = {
            "id": rid,
            "node_id": f"PRR_{rid}",
            "user": user_json(fake.bot_login),
            "body": body,
            "state": _REST_STATES.get(event, event),
            "commit_id": commit,
            "html_url": f"{pull['html_url']}#pullrequestreview-{rid}",
            "submitted_at": iso(),
        }
        ctx.fr.reviews.setdefault(n, []).append(review)
        for c in inline:
            comment = fake.new_review_comment(
                ctx.fr, n, c, login=fake.bot_login, commit=commit, review_id=rid
            )
            fake.new_thread(ctx.fr, n, comment)
        return ok(review)

    async def reply(ctx: Ctx) -> Response:
        pull_of(ctx)
        n = ctx.number()
        target = fake.review_comment_by_id.get(ctx.number("comment_id"))
        if target is None or fake.review_comment_pull.get(target["id"]) != (ctx.fr.full_name, n):
            raise FakeError(404, "Not Found")
        if target.get("in_reply_to_id"):
            raise FakeError(422, "Unprocessable Entity: replies to replies are not supported")
        text = body_field(ctx, "body")
        if not isinstance(text, str) or not text.strip():
            raise FakeError(422, "Invalid request: 'body' wasn't supplied.")
        comment = fake.new_review_comment(
            ctx.fr,
            n,
            {"path": target["path"], "line": target.get("line"), "body": text},
            login=fake.bot_login,
            commit=target["commit_id"],
            review_id=fake._id(),
            in_reply_to=target["id"],
        )
        return ok(comment, 201)

    async def update_comment(ctx: Ctx) -> Response:
        cid = ctx.number("comment_id")
        comment = fake.review_comment_by_id.get(cid)
        if comment is None or fake.review_comment_pull.get(cid, ("", 0))[0] != ctx.fr.full_name:
            raise FakeError(404, "Not Found")
        if comment["user"]["login"] != fake.bot_login:
            raise FakeError(403, "Resource not accessible by integration")
        text = body_field(ctx, "body")
        if not isinstance(text, str) or not text.strip():
            raise FakeError(422, "Invalid request: 'body' wasn't supplied.")
        if len(text) > 65536:
            raise FakeError(422, "Unprocessable Entity: body is too long (maximum is 65536)")
        comment["body"] = text
        comment["updated_at"] = iso()
        return ok(comment)

    async def graphql(ctx: Ctx) -> Response:
        data = ctx.json if isinstance(ctx.json, dict) else {}
        query = data.get("query")
        variables = data.get("variables") or {}
        if not isinstance(query, str) or not isinstance(variables, dict):
            return JSONResponse({"errors": [{"message": "A query attribute must be specified"}]})
        token = ctx.token
        assert token is not None
        if "resolveReviewThread" in query:
            thread = fake.threads.get(str(variables.get("threadId")))
            allowed = (
                thread is not None
                and fake.token_allows(token, thread["repo"])
                and token.permissions.get("pull_requests", "write") == "write"
            )
            if thread is None or not allowed:
                return JSONResponse(
                    {
                        "data": {"resolveReviewThread": None},
                        "errors": [
                            {
                                "type": "NOT_FOUND",
                                "message": "Could not resolve to a node with the global id of "
                                f"'{variables.get('threadId')}'",
                            }
                        ],
                    }
                )
            thread["resolved"] = True
            thread["resolved_by"] = fake.bot_login.removesuffix("[bot]")
            fr = fake.repos[thread["repo"]]
            return JSONResponse(
                {"data": {"resolveReviewThread": {"thread": _thread_json(fake, fr, thread)}}}
            )
        if "reviewThreads" in query:
            owner, name, number = (
                variables.get("owner"),
                variables.get("name"),
                variables.get("number"),
            )
            full = f"{owner}/{name}"
            fr = fake.repos.get(full)
            if fr is None or not fake.token_allows(token, full) or number not in fr.pulls:
                return JSONResponse(
                    {
                        "data": {"repository": None},
                        "errors": [
                            {
                                "type": "NOT_FOUND",
                                "message": f"Could not resolve to a Repository with the name '{full}'.",
                            }
                        ],
                    }
                )
            threads = [
                t for t in fake.threads.values() if t["repo"] == full and t["number"] == number
            ]
            await refresh_outdated(fr, fr.pulls[number], threads)
            first = min(int(variables.get("first") or 100), 100)
            after = variables.get("after")
            start = int(after) if isinstance(after, str) and after.isdigit() else 0
            chunk = threads[start : start + first]
            more = start + first < len(threads)
            return JSONResponse(
                {
                    "data": {
                        "repository": {
                            "pullRequest": {
                                "reviewThreads": {
                                    "totalCount": len(threads),
                                    "pageInfo": {
                                        "hasNextPage": more,
                                        "endCursor": str(start + first) if more else None,
                                    },
                                    "nodes": [_thread_json(fake, fr, t) for t in chunk],
                                }
                            }
                        }
                    }
                }
            )
        return JSONResponse(
            {
                "errors": [
                    {"message": "this fake answers reviewThreads and resolveReviewThread only"}
                ]
            }
        )

    async def review_comments(ctx: Ctx) -> Response:
        pull_of(ctx)
        n, rid = ctx.number(), ctx.number("review_id")
        if all(review["id"] != rid for review in ctx.fr.reviews.get(n, [])):
            raise FakeError(404, "Not Found")
        own = [c for c in ctx.fr.review_comments.get(n, []) if c["pull_request_review_id"] == rid]
        return fake.page(ctx.request, own)

    return [
        ("POST", r + "/pulls/{number:int}/reviews", "token", create_review),
        (
            "GET",
            r + "/pulls/{number:int}/reviews/{review_id:int}/comments",
            "token",
            review_comments,
        ),
        (
            "POST",
            r + "/pulls/{number:int}/comments/{comment_id:int}/replies",
            "token",
            reply,
        ),
        ("PATCH", r + "/pulls/comments/{comment_id:int}", "token", update_comment),
        ("POST", "/graphql", "token", graphql),
    ]


def delete_review_comment(fake: FakeGitHub, comment_id: int) -> None:
    """Delete review comment `comment_id` as its author would on GitHub: it leaves the
    pull request's list and its thread; replies to it stay, still naming it in
    `in_reply_to_id`, and take no reply themselves."""
    full, number = fake.review_comment_pull.pop(comment_id)
    fake.review_comment_by_id.pop(comment_id)
    comments = fake.repos[full].review_comments[number]
    comments[:] = [c for c in comments if c["id"] != comment_id]
    for thread in fake.threads.values():
        if comment_id in thread["comments"]:
            thread["comments"].remove(comment_id)


async def push_pull(
    fake: FakeGitHub, owner: str, repo: str, number: int, sha: str
) -> dict[str, Any]:
    """Move pull request `number`'s head to `sha` (as a push or force push would), recompute its
    files and diff, and return the `synchronize` webhook payload GitHub would send."""
    fr = fake.repos[f"{owner}/{repo}"]
    pull = fr.pulls[number]
    before = pull["head"]["sha"]
    base_ref = pull["base"]["ref"]
    base_sha = (await git(fr.git_dir, "rev-parse", f"{base_ref}^{{commit}}")).strip()
    await git(fr.git_dir, "update-ref", f"refs/pull/{number}/head", sha)
    if pull["head"]["repo"]["full_name"] == fr.full_name:
        await git(fr.git_dir, "update-ref", f"refs/heads/{pull['head']['ref']}", sha)
    diff, changes = await pull_changes(fr.git_dir, base_sha, sha)
    fr.pull_diffs[number] = diff
    fr.pull_files[number] = [
        {
            "sha": secrets.token_hex(20),
            "filename": c.filename,
            "status": c.status,
            "additions": c.additions,
            "deletions": c.deletions,
            "changes": c.additions + c.deletions,
            "patch": c.patch,
            **({"previous_filename": c.previous_filename} if c.previous_filename else {}),
        }
        for c in changes
    ]
    pull["head"]["sha"] = sha
    pull["base"]["sha"] = base_sha
    pull["updated_at"] = iso()
    return {
        "action": "synchronize",
        "number": number,
        "before": before,
        "after": sha,
        "pull_request": pull,
        "repository": fake._repo_stub(fr.full_name, fr),
        "installation": {
            "id": next(i for i, inst in fake.installations.items() if fr.full_name in inst.repos)
        },
        "sender": user_json(pull["user"]["login"]),
    }


def submit_review(
    fake: FakeGitHub,
    owner: str,
    repo: str,
    number: int,
    *,
    user: str,
    event: str = "REQUEST_CHANGES",
    body: str = "",
    comments: list[dict[str, Any]] | None = None,
    commit: str | None = None,
) -> dict[str, Any]:
    """Person `user` submits a review (`REQUEST_CHANGES`, `COMMENT` or `APPROVE`) on pull
    request `number` with inline `comments` ({path, line, body}), each starting its own
    thread, on `commit` (default: the head; there each comment must be on a line of the
    diff, or GitHub's 422 is raised as `FakeError`). Returns the `pull_request_review.submitted`
    payload, its `review.state` lower-case as webhooks write it (the REST API's is upper)."""
    fr = fake.repos[f"{owner}/{repo}"]
    pull = fr.pulls[number]
    if commit is None or commit == pull["head"]["sha"]:
        # GitHub refuses a comment off the diff; the head's diff is the one the fake holds.
        patches = {f["filename"]: f.get("patch") or "" for f in fr.pull_files[number]}
        for c in comments or []:
            _validate_comment(c, patches)
    commit = commit or pull["head"]["sha"]
    rid = fake._id()
    state = _REST_STATES.get(event, event)
    review = {
        "id": rid,
        "node_id": f"PRR_{rid}",
        "user": user_json(user),
        "body": body,
        "state": state,
        "commit_id": commit,
        "html_url": f"{pull['html_url']}#pullrequestreview-{rid}",
        "pull_request_url": pull["url"],
        "author_association": fake._association(fr, user),
        "submitted_at": iso(),
        "_links": {
            "html": {"href": f"{pull['html_url']}#pullrequestreview-{rid}"},
            "pull_request": {"href": pull["url"]},
        },
    }
    fr.reviews.setdefault(number, []).append(review)
    # Submitting a review answers the request for it: GitHub lists the reviewer no more.
    pull["requested_reviewers"] = [
        r for r in pull["requested_reviewers"] if r["login"].lower() != user.lower()
    ]
    for c in comments or []:
        comment = fake.new_review_comment(fr, number, c, login=user, commit=commit, review_id=rid)
        fake.new_thread(fr, number, comment)
    return {
        "action": "submitted",
        "review": {**review, "state": state.lower()},
        "pull_request": pull,
        "repository": fake._repo_stub(fr.full_name, fr),
        "installation": {
            "id": next(i for i, inst in fake.installations.items() if fr.full_name in inst.repos)
        },
        "sender": user_json(user),
    }
