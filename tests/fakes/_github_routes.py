"""The fake GitHub's endpoints: auth, call recording, fault injection, then the handler."""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes._github_ci import ci_routes
from tests.fakes._github_ctx import Ctx, Handler, body_field, ok
from tests.fakes._github_git import git, http_backend
from tests.fakes._github_hooks import hook_routes
from tests.fakes._github_json import installation_json, repo_json
from tests.fakes._github_labels import label_routes
from tests.fakes._github_oauth import authenticate_user, oauth_routes, web_params
from tests.fakes._github_openapi import Problem, Violation, operation_for
from tests.fakes._github_pulls import pull_routes
from tests.fakes._github_push import (
    follow_pushes,
    new_push_log,
    read_push_log,
    receive_settings,
)
from tests.fakes._github_reviews import review_routes
from tests.fakes._github_state import (
    DOCS,
    Call,
    FakeError,
    FakeRepo,
    Fault,
    iso,
    parse_json,
    user_json,
)

if TYPE_CHECKING:
    from tests.fakes.github import FakeGitHub


_RULES: list[tuple[str, str, tuple[str, ...]]] = [
    # (methods, path regex, permissions any of which suffices)
    ("GET", r"^/orgs/[^/]+/(members|teams)/", ("members",)),
    ("GET", r"/git-upload-pack$|/info/refs$", ("contents",)),
    ("POST", r"/git-upload-pack$", ("contents",)),
    ("POST", r"/git-receive-pack$", ("contents",)),
    ("*", r"/check-runs(/|$)", ("checks",)),
    ("GET", r"/commits/.+/status(es)?$", ("statuses",)),
    ("*", r"/pulls(/|$)", ("pull_requests",)),
    ("*", r"/issues/", ("issues", "pull_requests")),
    ("*", r"/labels(/|$)", ("issues", "pull_requests")),
    ("*", r"/contents/", ("contents",)),
]


def required_permissions(method: str, path: str) -> list[tuple[str, str]]:
    """The (permission, level) pairs of which a narrowed token needs one, per GitHub's docs."""
    write = method in ("POST", "PATCH", "PUT", "DELETE") and not path.endswith("git-upload-pack")
    for methods, pattern, names in _RULES:
        if methods in ("*", method) and re.search(pattern, path):
            level = "write" if write or path.endswith("git-receive-pack") else "read"
            return [(name, level) for name in names]
    return [("metadata", "read")]


def _grants(name: str, held: str | None, level: str) -> bool:
    if name == "metadata" and level == "read":
        return True  # every installation token can read metadata
    return held == "write" or (held == "read" and level == "read")


def fault_response(fault: Fault) -> Response:
    if fault.raw is not None:
        return Response(fault.raw, fault.status, headers=fault.headers)
    return JSONResponse(fault.body, fault.status, headers=fault.headers)


_ALL_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def build_routes(fake: FakeGitHub) -> list[Route]:
    def wrap(
        method: str, template: str, auth: str, handler: Handler
    ) -> Callable[[Request], Awaitable[Response]]:
        operation = operation_for(method, template)

        async def endpoint(request: Request) -> Response:
            body = await request.body()
            headers = {k: v for k, v in request.headers.items() if k != "authorization"}
            raw_auth = request.headers.get("authorization", "")
            scheme, _, credential = raw_auth.partition(" ")
            kind = {"bearer": "jwt", "token": "token", "basic": "basic"}.get(scheme.lower())
            if kind in ("jwt", "token") and credential.startswith("ghu_"):
                kind = "user"
            elif kind == "jwt" and auth in ("token", "user"):
                kind = "token"  # GitHub accepts `Bearer <installation token>` too
            # git's bodies are git's; a web form (github.com, not the API) is read as one.
            raw_body = auth in ("git", "web")
            try:
                payload = parse_json(body) if not raw_body else None
            except FakeError:
                payload = None
            if auth == "web":
                payload = web_params(request.headers.get("content-type", ""), body)
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
            refusal: dict[str, Any] | None = None
            if operation is not None:
                query = request.query_params.multi_items()
                problems = operation.check(request.path_params, query, body)
                if problems:
                    violation = Violation(
                        request.method, request.url.path, operation.key, tuple(problems)
                    )
                    fake.openapi_violations.append(violation)
                    refusal = operation.refusal(problems)
            fault = fake.take_fault(request.method, request.url.path)
            if fault is not None and not fault.after_apply:
                call.status = fault.status
                return fault_response(fault)
            try:
                if payload is None and not raw_body and body:
                    parse_json(body)  # raises the 400
                ctx = Ctx(request, body, payload, None, None)
                authenticate(auth, ctx, scheme.lower(), credential, call)
                response: Response
                if refusal is not None:
                    response = JSONResponse(refusal, 422)
                else:
                    response = await handler(ctx)
            except FakeError as exc:
                extra = {"WWW-Authenticate": 'Basic realm="GitHub"'} if auth == "git" else {}
                extra.update(exc.headers)
                content: dict[str, Any] = {"message": exc.message, "documentation_url": DOCS}
                if exc.errors is not None:
                    content["errors"] = exc.errors
                response = JSONResponse(content, exc.status, headers=extra)
            if fault is not None:  # applied, but the answer is lost in a fault
                response = fault_response(fault)
            for name, value in fake.response_headers.items():
                response.headers.setdefault(name, value)
            call.status = response.status_code
            return response

        return endpoint

    def authenticate(auth: str, ctx: Ctx, scheme: str, credential: str, call: Call) -> None:
        if auth in ("none", "web"):
            return
        if auth == "user":
            authenticate_user(fake, ctx, scheme, credential)
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
        if token.permissions:
            needed = required_permissions(ctx.request.method, ctx.request.url.path)
            if not any(_grants(n, token.permissions.get(n), level) for n, level in needed):
                # GitHub names the permission sets that would do, `;` between them.
                accepted = "; ".join(f"{n}={level}" for n, level in needed)
                raise FakeError(
                    403,
                    "Resource not accessible by integration",
                    headers={"X-Accepted-GitHub-Permissions": accepted},
                )

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
        return fake.page(
            ctx.request, [installation_json(fake, i) for i in sorted(fake.installations)]
        )

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
                return ok(installation_json(fake, inst.id))
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
                "client_id": fake.oauth_client_id,
                "client_secret": fake.oauth_client_secret,
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
        items = [
            repo_json(ctx.request, fake.repos[n])
            for n in names
            if n in fake.repos and fake.token_allows(token, n)
        ]
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
        """GitHub's contents API: a directory's entries (a link is `symlink`, a submodule
        `file`, as GitHub lists them), a file (over 1 MB with `encoding: none` and no
        content), and a symbolic link: answered with the file it leads to, under that
        file's path, when it leads to a normal file of the repository, else as `symlink`."""
        fr = ctx.fr
        ref = ctx.request.query_params.get("ref") or fr.default_branch
        path = ctx.param("path").strip("/")
        kind = (await git(fr.git_dir, "cat-file", "-t", f"{ref}:{path}", check=False)).strip()
        if kind == "tree":
            listing = await git(fr.git_dir, "ls-tree", f"{ref}:{path}")
            entries = []
            for line in listing.splitlines():
                meta, name = line.split("\t", 1)
                mode, otype, sha = meta.split()
                shown = {"tree": "dir", "commit": "file"}.get(otype, "file")
                entries.append(
                    {
                        "name": name,
                        "path": f"{path}/{name}".strip("/"),
                        "type": "symlink" if mode == "120000" else shown,
                        "sha": sha,
                    }
                )
            return ok(entries)
        if kind != "blob":
            raise FakeError(404, "Not Found")
        target = await link_target(fr, ref, path)
        if target is not None:
            resolved = resolve_link(path, target)
            if resolved is None or await link_target(fr, ref, resolved) is not None:
                return ok(symlink_json(fr, ref, path, target))  # a link to a link: as is
            led = (
                await git(fr.git_dir, "cat-file", "-t", f"{ref}:{resolved}", check=False)
            ).strip()
            if led != "blob":
                return ok(symlink_json(fr, ref, path, target))
            path = resolved
        if "vnd.github.raw" in ctx.request.headers.get("accept", ""):
            raw = await git_bytes(fr, "cat-file", "blob", f"{ref}:{path}")
            return Response(raw, 200, media_type="application/vnd.github.raw")
        return ok(await file_json(fr, ref, path))

    async def link_target(fr: FakeRepo, ref: str, path: str) -> str | None:
        """The target of the symbolic link at `path`, or None when it is not one."""
        parent, _, name = path.rpartition("/")
        listing = await git(fr.git_dir, "ls-tree", f"{ref}:{parent}" if parent else ref, name)
        for line in listing.splitlines():
            meta, entry = line.split("\t", 1)
            if entry == name and meta.split()[0] == "120000":
                return (await git_bytes(fr, "cat-file", "blob", f"{ref}:{path}")).decode()
        return None

    def resolve_link(path: str, target: str) -> str | None:
        if target.startswith("/"):
            return None
        parts = path.split("/")[:-1]
        for part in target.split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                if not parts:
                    return None
                parts.pop()
            else:
                parts.append(part)
        return "/".join(parts) or None

    def symlink_json(fr: FakeRepo, ref: str, path: str, target: str) -> dict[str, Any]:
        return {
            "type": "symlink",
            "target": target,
            "size": len(target.encode()),
            "name": path.rsplit("/", 1)[-1],
            "path": path,
            "sha": "0" * 40,
            "url": f"https://api.github.com/repos/{fr.full_name}/contents/{path}?ref={ref}",
        }

    async def file_json(fr: FakeRepo, ref: str, path: str) -> dict[str, Any]:
        raw = await git_bytes(fr, "cat-file", "blob", f"{ref}:{path}")
        sha = (await git(fr.git_dir, "rev-parse", f"{ref}:{path}")).strip()
        large = len(raw) > 1_000_000
        return {
            "type": "file",
            "encoding": "none" if large else "base64",
            "size": len(raw),
            "name": path.rsplit("/", 1)[-1],
            "path": path,
            "content": "" if large else base64.encodebytes(raw).decode(),
            "sha": sha,
            "url": f"https://api.github.com/repos/{fr.full_name}/contents/{path}?ref={ref}",
            "html_url": f"https://github.com/{fr.full_name}/blob/{ref}/{path}",
        }

    async def git_bytes(fr: FakeRepo, *args: str) -> bytes:
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
        if not isinstance(body, str) or not body:
            raise FakeError(422, "Validation Failed: body cannot be blank")
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

    async def review_comment_reaction(ctx: Ctx) -> Response:
        cid = ctx.number("comment_id")
        for comments in ctx.fr.review_comments.values():
            if any(c["id"] == cid for c in comments):
                return record_reaction(ctx, {"review_comment_id": cid})
        raise FakeError(404, "Not Found")

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

    # -- git smart HTTP ---------------------------------------------------------------------

    async def git_http(ctx: Ctx) -> Response:
        request = ctx.request
        pushing = request.method == "POST" and ctx.param("rest") == "git-receive-pack"
        log = new_push_log() if pushing else None
        env, config = receive_settings(ctx.fr, log) if log is not None else ({}, [])
        try:
            answer = await http_backend(
                ctx.fr.git_dir,
                ctx.param("rest"),
                method=request.method,
                query=request.url.query,
                body=ctx.body,
                content_type=request.headers.get("content-type"),
                content_encoding=request.headers.get("content-encoding"),
                git_protocol=request.headers.get("git-protocol"),
                extra_env=env,
                config=config,
            )
        finally:
            pushes = read_push_log(ctx.fr, log) if log is not None else []
            fake.pushes.extend(pushes)
        await follow_pushes(fake, ctx.fr, pushes)
        return Response(answer.body, answer.status, headers=dict(answer.headers))

    r = "/repos/{owner}/{repo}"
    table: list[tuple[str, str, str, Handler]] = [
        ("GET", "/app", "jwt", get_app),
        ("GET", "/app/installations", "jwt", list_installations),
        ("POST", "/app/installations/{installation_id:int}/access_tokens", "jwt", create_token),
        ("GET", r + "/installation", "jwt", repo_installation),
        ("POST", "/app-manifests/{code}/conversions", "none", manifest_conversion),
        *hook_routes(fake),
        *oauth_routes(fake),
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
        (
            "POST",
            r + "/pulls/comments/{comment_id:int}/reactions",
            "token",
            review_comment_reaction,
        ),
        *pull_routes(fake, r),
        *label_routes(fake, r),
        *review_routes(fake, r),
        *ci_routes(fake, r),
        ("GET", "/{owner}/{repo}.git/{rest:path}", "git", git_http),
        ("POST", "/{owner}/{repo}.git/{rest:path}", "git", git_http),
    ]

    async def no_operation(request: Request) -> Response:
        headers = {k: v for k, v in request.headers.items() if k != "authorization"}
        query = dict(request.query_params)
        fake.calls.append(
            Call(
                request.method, request.url.path, query, None, headers, None, time.monotonic(), 404
            )
        )
        problem = Problem("path", "", "invalid", "GitHub has no such method and path")
        fake.openapi_violations.append(
            Violation(request.method, request.url.path, None, (problem,))
        )
        return JSONResponse({"message": "Not Found", "documentation_url": DOCS}, 404)

    return [
        *(
            Route(
                path, wrap(method, path, auth, handler), methods=[method], name=f"{method} {path}"
            )
            for method, path, auth, handler in table
        ),
        # Anything else is no operation of GitHub's: 404, as GitHub answers, and a violation.
        Route("/{unknown:path}", no_operation, methods=list(_ALL_METHODS), name="no operation"),
    ]
