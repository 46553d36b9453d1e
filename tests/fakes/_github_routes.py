"""The fake GitHub's endpoints: auth, call recording, fault injection, then the handler."""

from __future__ import annotations

import base64
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from tests.fakes._github_git import commentable_lines, git, http_backend

if TYPE_CHECKING:
    from tests.fakes.github import FakeGitHub, FakeRepo, Token


@dataclass
class Ctx:
    request: Request
    body: bytes
    json: Any
    token: Token | None
    repo: FakeRepo | None

    def param(self, name: str) -> str:
        return str(self.request.path_params[name])

    def number(self, name: str = "number") -> int:
        return int(self.request.path_params[name])

    @property
    def fr(self) -> FakeRepo:
        assert self.repo is not None
        return self.repo


Handler = Callable[[Ctx], Awaitable[Response]]


def build_routes(fake: FakeGitHub) -> list[Route]:
    from tests.fakes.github import (
        DOCS,
        Call,
        FakeError,
        clone_url,
        is_sha,
        iso,
        parse_json,
        user_json,
    )

    def wrap(auth: str, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            body = await request.body()
            headers = {k: v for k, v in request.headers.items() if k != "authorization"}
            raw_auth = request.headers.get("authorization", "")
            scheme, _, credential = raw_auth.partition(" ")
            kind = {"bearer": "jwt", "token": "token", "basic": "basic"}.get(scheme.lower())
            if kind == "jwt" and auth == "token":
                kind = "token"  # GitHub accepts `Bearer <installation token>` too
            try:
                payload = parse_json(body) if auth != "git" else None
            except FakeError:
                payload = None
            call = Call(
                request.method,
                request.url.path,
                dict(request.query_params),
                payload,
                headers,
                kind,
                time.monotonic(),
            )
            fake.calls.append(call)
            fault = fake.take_fault(request.method, request.url.path)
            if fault is not None:
                call.status = fault.status
                if fault.raw is not None:
                    return Response(fault.raw, fault.status, headers=fault.headers)
                return JSONResponse(fault.body, fault.status, headers=fault.headers)
            try:
                if payload is None and auth != "git" and body:
                    parse_json(body)  # raises the 400
                ctx = Ctx(request, body, payload, None, None)
                authenticate(auth, ctx, scheme.lower(), credential, call)
                response = await handler(ctx)
            except FakeError as exc:
                extra = {"WWW-Authenticate": 'Basic realm="GitHub"'} if auth == "git" else {}
                response = JSONResponse(
                    {"message": exc.message, "documentation_url": DOCS},
                    exc.status,
                    headers=extra,
                )
            call.status = response.status_code
            return response

        return endpoint

    def authenticate(auth: str, ctx: Ctx, scheme: str, credential: str, call: Call) -> None:
        if auth == "none":
            return
        if auth == "jwt":
            if scheme != "bearer" or not credential:
                raise FakeError(401, "A JSON web token could not be decoded")
            fake.verify_jwt(credential)
            return
        full: str | None
        if auth == "git":
            if scheme != "basic":
                raise FakeError(401, "Authentication required")
            try:
                login, _, secret = base64.b64decode(credential).decode().partition(":")
            except ValueError:
                raise FakeError(401, "Invalid credentials") from None
            if login != "x-access-token":
                raise FakeError(401, "Invalid username")
            token = fake.check_token(secret)
            full = f"{ctx.param('owner')}/{ctx.param('repo')}"
        else:
            if scheme not in ("token", "bearer") or not credential:
                raise FakeError(401, "Requires authentication")
            token = fake.check_token(credential)
            full = (
                f"{ctx.param('owner')}/{ctx.param('repo')}"
                if "owner" in ctx.request.path_params
                else None
            )
        call.installation_id = token.installation_id
        ctx.token = token
        if full is not None:
            ctx.repo = fake.token_repo(token, full)

    def ok(content: Any, status: int = 200) -> Response:
        return JSONResponse(content, status)

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
            "default_branch": fr.default_branch,
            "visibility": "private" if fr.private else "public",
            "archived": False,
            "disabled": False,
            "has_issues": True,
            "topics": [],
            "created_at": "2024-01-01T00:00:00Z",
            "updated_at": iso(),
            "pushed_at": iso(),
        }

    def installation_json(inst_id: int) -> dict[str, Any]:
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
            "suspended_at": None,
        }

    def issue_of(ctx: Ctx) -> dict[str, Any]:
        issue = ctx.fr.issues.get(ctx.number())
        if issue is None:
            raise FakeError(404, "Not Found")
        return issue

    def comment_of(ctx: Ctx) -> dict[str, Any]:
        cid = ctx.number("comment_id")
        where = fake.comment_issue.get(cid)
        if where is None or where[0] != ctx.fr.full_name:
            raise FakeError(404, "Not Found")
        return fake.comments[cid]

    def pull_of(ctx: Ctx) -> dict[str, Any]:
        pull = ctx.fr.pulls.get(ctx.number())
        if pull is None:
            raise FakeError(404, "Not Found")
        return pull

    def body_field(ctx: Ctx, name: str) -> Any:
        if not isinstance(ctx.json, dict) or name not in ctx.json:
            raise FakeError(422, f"Invalid request: '{name}' wasn't supplied.")
        return ctx.json[name]

    # -- App ---------------------------------------------------------------------------------

    async def get_app(ctx: Ctx) -> Response:
        return ok(
            {
                "id": fake.app_id,
                "slug": fake.slug,
                "node_id": f"A_{fake.app_id}",
                "name": fake.slug.replace("-", " ").title(),
                "owner": user_json("octo-org", "Organization"),
                "html_url": f"https://github.com/apps/{fake.slug}",
                "permissions": {"contents": "write", "issues": "write", "metadata": "read"},
                "events": ["issues", "issue_comment", "pull_request"],
                "installations_count": len(fake.installations),
                "created_at": "2024-01-01T00:00:00Z",
                "updated_at": "2024-01-01T00:00:00Z",
            }
        )

    async def list_installations(ctx: Ctx) -> Response:
        return fake.page(ctx.request, [installation_json(i) for i in sorted(fake.installations)])

    async def create_token(ctx: Ctx) -> Response:
        body = ctx.json if isinstance(ctx.json, dict) else {}
        token = fake.issue_token(
            ctx.number("installation_id"),
            body.get("repositories"),
            dict(body.get("permissions") or {}),
        )
        out: dict[str, Any] = {
            "token": token.value,
            "expires_at": iso(token.expires_at),
            "permissions": token.permissions or {"contents": "write", "issues": "write"},
            "repository_selection": "selected" if token.repos is not None else "all",
        }
        if token.repos is not None:
            out["repositories"] = [repo_json(ctx.request, fake.repos[n]) for n in token.repos]
        return ok(out, 201)

    async def repo_installation(ctx: Ctx) -> Response:
        full = f"{ctx.param('owner')}/{ctx.param('repo')}"
        for inst in fake.installations.values():
            if full in inst.repos:
                return ok(installation_json(inst.id))
        raise FakeError(404, "Not Found")

    async def manifest_conversion(ctx: Ctx) -> Response:
        manifest = fake.manifest_codes.pop(ctx.param("code"), None)
        if manifest is None:
            raise FakeError(404, "Not Found")
        return ok(
            {
                "id": fake.app_id,
                "slug": fake.slug,
                "node_id": f"A_{fake.app_id}",
                "name": manifest.get("name", fake.slug),
                "owner": user_json("octo-org", "Organization"),
                "html_url": f"https://github.com/apps/{fake.slug}",
                "client_id": "Iv1.0123456789abcdef",
                "client_secret": "cs_" + "0" * 37,
                "webhook_secret": fake.webhook_secret,
                "pem": fake.private_key_pem,
                "permissions": manifest.get("default_permissions", {}),
                "events": manifest.get("default_events", []),
            },
            201,
        )

    async def installation_repositories(ctx: Ctx) -> Response:
        token = ctx.token
        assert token is not None
        names = (
            sorted(token.repos)
            if token.repos is not None
            else fake.installations[token.installation_id].repos
        )
        items = [repo_json(ctx.request, fake.repos[n]) for n in names if n in fake.repos]
        response = fake.page(ctx.request, items, key="repositories")
        return response

    # -- repository -------------------------------------------------------------------------

    async def get_repo(ctx: Ctx) -> Response:
        return ok(repo_json(ctx.request, ctx.fr))

    async def get_permission(ctx: Ctx) -> Response:
        login = ctx.param("login")
        perm = ctx.fr.permissions.get(login.lower())
        if perm is None:
            raise FakeError(404, f"{login} is not a user")
        legacy = {"maintain": "write", "triage": "read"}.get(perm, perm)
        return ok({"permission": legacy, "role_name": perm, "user": user_json(login)})

    async def get_contents(ctx: Ctx) -> Response:
        fr = ctx.fr
        ref = ctx.request.query_params.get("ref") or fr.default_branch
        path = ctx.param("path").strip("/")
        kind = (await git(fr.git_dir, "cat-file", "-t", f"{ref}:{path}", check=False)).strip()
        if kind == "tree":
            listing = await git(fr.git_dir, "ls-tree", f"{ref}:{path}")
            entries = []
            for line in listing.splitlines():
                meta, name = line.split("\t", 1)
                entries.append(
                    {
                        "name": name,
                        "path": f"{path}/{name}".strip("/"),
                        "type": "dir" if meta.split()[1] == "tree" else "file",
                        "sha": meta.split()[2],
                    }
                )
            return ok(entries)
        if kind != "blob":
            raise FakeError(404, "Not Found")
        raw = await git_bytes(fr, "cat-file", "blob", f"{ref}:{path}")
        sha = (await git(fr.git_dir, "rev-parse", f"{ref}:{path}")).strip()
        encoded = base64.encodebytes(raw).decode()
        return ok(
            {
                "type": "file",
                "encoding": "base64",
                "size": len(raw),
                "name": path.rsplit("/", 1)[-1],
                "path": path,
                "content": encoded,
                "sha": sha,
                "url": f"https://api.github.com/repos/{fr.full_name}/contents/{path}?ref={ref}",
                "html_url": f"https://github.com/{fr.full_name}/blob/{ref}/{path}",
            }
        )

    async def git_bytes(fr: FakeRepo, *args: str) -> bytes:
        import anyio

        result = await anyio.run_process(["git", f"--git-dir={fr.git_dir}", *args], check=True)
        return result.stdout

    # -- issues and comments ----------------------------------------------------------------

    async def get_issue(ctx: Ctx) -> Response:
        return ok(issue_of(ctx))

    async def list_comments(ctx: Ctx) -> Response:
        issue_of(ctx)
        return fake.page(ctx.request, fake.comments_on(ctx.fr.owner, ctx.fr.name, ctx.number()))

    async def create_comment(ctx: Ctx) -> Response:
        body = body_field(ctx, "body")
        if not isinstance(body, str) or not body:
            raise FakeError(422, "Validation Failed: body cannot be blank")
        if len(body) > 65536:
            raise FakeError(
                422, "Validation Failed: body is too long (maximum is 65536 characters)"
            )
        return ok(fake._new_comment(ctx.fr, ctx.number(), body, fake.bot_login), 201)

    async def get_comment(ctx: Ctx) -> Response:
        return ok(comment_of(ctx))

    async def update_comment(ctx: Ctx) -> Response:
        comment = comment_of(ctx)
        body = body_field(ctx, "body")
        if len(body) > 65536:
            raise FakeError(
                422, "Validation Failed: body is too long (maximum is 65536 characters)"
            )
        comment["body"] = body
        comment["updated_at"] = iso()
        return ok(comment)

    async def comment_reaction(ctx: Ctx) -> Response:
        comment = comment_of(ctx)
        return record_reaction(ctx, {"comment_id": comment["id"]})

    async def issue_reaction(ctx: Ctx) -> Response:
        issue = issue_of(ctx)
        return record_reaction(ctx, {"issue_number": issue["number"]})

    def record_reaction(ctx: Ctx, target: dict[str, Any]) -> Response:
        content = body_field(ctx, "content")
        if content not in ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"):
            raise FakeError(422, "Validation Failed: content is not included in the list")
        for existing in fake.reactions:
            if existing["target"] == {"repo": ctx.fr.full_name, **target} and (
                existing["content"] == content
            ):
                return ok(existing["json"], 200)  # GitHub answers 200 for an existing reaction
        rid = fake._id()
        reaction = {
            "id": rid,
            "node_id": f"REA_{rid}",
            "user": user_json(fake.bot_login),
            "content": content,
            "created_at": iso(),
        }
        fake.reactions.append(
            {"target": {"repo": ctx.fr.full_name, **target}, "content": content, "json": reaction}
        )
        return ok(reaction, 201)

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

    async def create_review(ctx: Ctx) -> Response:
        pull = pull_of(ctx)
        n = ctx.number()
        data = ctx.json if isinstance(ctx.json, dict) else {}
        event = data.get("event", "PENDING")
        if event not in ("APPROVE", "REQUEST_CHANGES", "COMMENT", "PENDING"):
            raise FakeError(422, "Validation Failed: event is not valid")
        patches = {f["filename"]: f.get("patch") or "" for f in ctx.fr.pull_files[n]}
        inline = data.get("comments") or []
        for c in inline:
            path, line, side = c.get("path"), c.get("line"), c.get("side", "RIGHT")
            if path not in patches or line not in commentable_lines(patches[path])[side]:
                raise FakeError(
                    422,
                    "Unprocessable Entity: Pull request review thread line must be part of the diff",
                )
        rid = fake._id()
        commit = data.get("commit_id") or pull["head"]["sha"]
        review = {
            "id": rid,
            "node_id": f"PRR_{rid}",
            "user": user_json(fake.bot_login),
            "body": data.get("body", ""),
            "state": {"COMMENT": "COMMENTED", "APPROVE": "APPROVED"}.get(event, event),
            "commit_id": commit,
            "html_url": f"{pull['html_url']}#pullrequestreview-{rid}",
            "submitted_at": iso(),
        }
        ctx.fr.reviews.setdefault(n, []).append(review)
        for c in inline:
            cid = fake._id()
            ctx.fr.review_comments.setdefault(n, []).append(
                {
                    "id": cid,
                    "pull_request_review_id": rid,
                    "path": c["path"],
                    "line": c["line"],
                    "side": c.get("side", "RIGHT"),
                    "body": c.get("body", ""),
                    "commit_id": commit,
                    "user": user_json(fake.bot_login),
                    "author_association": "NONE",
                    "html_url": f"{pull['html_url']}#discussion_r{cid}",
                    "created_at": iso(),
                }
            )
        return ok(review)

    async def open_pull(ctx: Ctx) -> Response:
        head, base = body_field(ctx, "head"), body_field(ctx, "base")
        title = body_field(ctx, "title")
        fr = ctx.fr
        for branch in (head, base):
            found = await git(
                fr.git_dir, "rev-parse", "-q", "--verify", f"refs/heads/{branch}", check=False
            )
            if not found.strip():
                raise FakeError(422, f"Validation Failed: no branch {branch}")
        for existing in fr.pulls.values():
            if existing["head"]["ref"] == head and existing["state"] == "open":
                raise FakeError(
                    422, f"Validation Failed: A pull request already exists for {head}."
                )
        pull = await fake.add_pull(
            fr.owner,
            fr.name,
            head=head,
            base=base,
            title=title,
            body=(ctx.json or {}).get("body", ""),
            user=fake.bot_login,
            draft=bool((ctx.json or {}).get("draft", False)),
        )
        return ok(pull, 201)

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
        }
        fake.check_runs[cid] = run
        fake.check_run_repo[cid] = ctx.fr.full_name
        return ok(run, 201)

    async def update_check_run(ctx: Ctx) -> Response:
        cid = ctx.number("check_run_id")
        if fake.check_run_repo.get(cid) != ctx.fr.full_name:
            raise FakeError(404, "Not Found")
        run = fake.check_runs[cid]
        data = ctx.json if isinstance(ctx.json, dict) else {}
        for key in ("name", "status", "conclusion", "external_id", "details_url"):
            if key in data:
                run[key] = data[key]
        if "output" in data:
            run["output"] = {**run["output"], **data["output"]}
        if data.get("conclusion"):
            run["status"] = "completed"
            run["completed_at"] = iso()
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

    # -- git smart HTTP ---------------------------------------------------------------------

    async def git_http(ctx: Ctx) -> Response:
        request = ctx.request
        answer = await http_backend(
            ctx.fr.git_dir,
            ctx.param("rest"),
            method=request.method,
            query=request.url.query,
            body=ctx.body,
            content_type=request.headers.get("content-type"),
            content_encoding=request.headers.get("content-encoding"),
            git_protocol=request.headers.get("git-protocol"),
        )
        return Response(answer.body, answer.status, headers=dict(answer.headers))

    r = "/repos/{owner}/{repo}"
    table: list[tuple[str, str, str, Handler]] = [
        ("GET", "/app", "jwt", get_app),
        ("GET", "/app/installations", "jwt", list_installations),
        ("POST", "/app/installations/{installation_id:int}/access_tokens", "jwt", create_token),
        ("GET", r + "/installation", "jwt", repo_installation),
        ("POST", "/app-manifests/{code}/conversions", "none", manifest_conversion),
        ("GET", "/installation/repositories", "token", installation_repositories),
        ("GET", r, "token", get_repo),
        ("GET", r + "/collaborators/{login}/permission", "token", get_permission),
        ("GET", r + "/contents/{path:path}", "token", get_contents),
        ("GET", r + "/issues/{number:int}", "token", get_issue),
        ("GET", r + "/issues/{number:int}/comments", "token", list_comments),
        ("POST", r + "/issues/{number:int}/comments", "token", create_comment),
        ("GET", r + "/issues/comments/{comment_id:int}", "token", get_comment),
        ("PATCH", r + "/issues/comments/{comment_id:int}", "token", update_comment),
        ("POST", r + "/issues/comments/{comment_id:int}/reactions", "token", comment_reaction),
        ("POST", r + "/issues/{number:int}/reactions", "token", issue_reaction),
        ("POST", r + "/pulls", "token", open_pull),
        ("GET", r + "/pulls/{number:int}", "token", get_pull),
        ("GET", r + "/pulls/{number:int}/files", "token", pull_files),
        ("GET", r + "/pulls/{number:int}/comments", "token", review_comments),
        ("POST", r + "/pulls/{number:int}/reviews", "token", create_review),
        ("GET", r + "/pulls/{number:int}/reviews", "token", list_reviews),
        ("PUT", r + "/pulls/{number:int}/reviews/{review_id:int}", "token", update_review),
        ("POST", r + "/check-runs", "token", create_check_run),
        ("PATCH", r + "/check-runs/{check_run_id:int}", "token", update_check_run),
        ("GET", r + "/commits/{ref:path}/check-runs", "token", list_check_runs),
        ("GET", "/{owner}/{repo}.git/{rest:path}", "git", git_http),
        ("POST", "/{owner}/{repo}.git/{rest:path}", "git", git_http),
    ]
    return [
        Route(path, wrap(auth, handler), methods=[method], name=f"{method} {path}")
        for method, path, auth, handler in table
    ]
