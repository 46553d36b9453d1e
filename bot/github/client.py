"""The GitHub App client: App-level calls with the JWT, and one installation's calls on one repository.

    app = GitHubApp.from_settings(settings)            # or GitHubApp(app_id, pem, api_url=...)
    slug = await app.slug()                            # BOT_APP_SLUG, else learned from GET /app
    gh = app.installation(installation_id, "octo", "hello")
    issue = await gh.get_issue(7)
    comment = await gh.create_issue_comment(7, "hello")
    await app.aclose()

Authentication. The App JWT is RS256, `iss` = app id, `iat` 60 s in the past and
`exp` 9 minutes ahead (GitHub allows at most 10). Installation tokens are requested
with `POST /app/installations/{id}/access_tokens`, narrowed to the single
repository of the client (`repositories: [name]`) and optionally to fewer
`permissions`, cached per (installation, repository) until 5 minutes before
`expires_at`, and on a 401 dropped and re-requested once before the call fails
with `AuthError`. `token()` gives the same token to git (as an HTTP header, see
`bot.github.checkout`).

Retries, rate limits and write spacing are described in `bot.github._retry`.
Errors: `GitHubError` (status, message, docs_url) and its subclasses `NotFound`,
`AuthError`, `RetryableError` (re-queue the job) and `RateLimited` (re-queue no
sooner than `retry_at`).

Responses are read into the lenient models of `bot.github.models` rather than
githubkit's strict ones, which reject drifted data; githubkit carries the requests.
For tests pass `transport=httpx.ASGITransport(fake.app)` and any `api_url`.
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from urllib.parse import quote

import anyio
import httpx
from pydantic import BaseModel

from bot.github._auth import AppJwt, CachedToken, TokenKey, parse_github_time
from bot.github._retry import RetryPolicy, Sender
from bot.github.errors import (
    AuthError,
    GitHubError,
    NotFound,
    RateLimited,
    RetryableError,
)
from bot.github.models import (
    PERMISSIONS,
    AppInfo,
    CheckRun,
    Installation,
    InstallationToken,
    Issue,
    IssueComment,
    Permission,
    PullFile,
    PullRequest,
    Repository,
    Review,
    ReviewComment,
)
from bot.log import get_logger

if TYPE_CHECKING:
    from bot.settings import Settings

__all__ = [
    "AuthError",
    "GitHubApp",
    "GitHubError",
    "InstallationClient",
    "NotFound",
    "RateLimited",
    "RetryPolicy",
    "RetryableError",
]

log = get_logger(__name__)
M = TypeVar("M", bound=BaseModel)

PERMISSION_TTL_S = 60.0
MAX_PAGES = 30
_NEXT_LINK = re.compile(r'<([^>]+)>;\s*rel="next"')


def _models(model: type[M], items: object) -> list[M]:
    if not isinstance(items, list):
        raise GitHubError(200, f"expected a list of {model.__name__}, got {type(items).__name__}")
    return [model.model_validate(item) for item in items]


class GitHubApp:
    """App-level access (JWT) and the factory of installation clients; share one per process."""

    def __init__(
        self,
        app_id: int,
        private_key_pem: str,
        *,
        api_url: str = "https://api.github.com",
        app_slug: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        policy: RetryPolicy | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        """`app_slug` (BOT_APP_SLUG) overrides the slug from `GET /app`.

        `transport` replaces the network (an `httpx.ASGITransport` in tests); `policy`
        sets retry counts, the rate-limit sleep cap and the spacing between writes.
        """
        if not private_key_pem.strip().startswith("-----BEGIN"):
            raise ValueError(
                "the App private key is not a PEM block; set BOT_PRIVATE_KEY_PATH to the .pem "
                "file GitHub gave you, or run `bot setup`"
            )
        self.app_id = app_id
        self._jwt = AppJwt(app_id, private_key_pem)
        self._slug = app_slug
        self._clock = clock
        self.sender = Sender(
            api_url, policy=policy or RetryPolicy(), transport=transport, clock=clock, sleep=sleep
        )
        self._tokens: dict[TokenKey, CachedToken] = {}
        self._token_locks: dict[TokenKey, anyio.Lock] = {}
        self._permissions: dict[tuple[int, str, str], tuple[float, Permission]] = {}

    @classmethod
    def from_settings(cls, settings: Settings, **kwargs: Any) -> GitHubApp:
        """Build from BOT_* settings; `SettingsError`/`ValueError` name what is missing."""
        pem = settings.private_key_pem()
        if settings.app_id is None or pem is None:
            raise ValueError(
                "GitHub App credentials are missing (BOT_APP_ID and BOT_PRIVATE_KEY_PATH); "
                "run `bot setup` to create the App"
            )
        return cls(
            settings.app_id,
            pem,
            api_url=settings.github_api_url,
            app_slug=settings.app_slug,
            **kwargs,
        )

    async def __aenter__(self) -> GitHubApp:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.sender.aclose()

    # -- App level (JWT) -------------------------------------------------------------------

    def jwt(self) -> str:
        """An App JWT (re-signed every 5 minutes). A secret: only for an Authorization header."""
        return self._jwt.token(self._clock())

    async def _app_request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, str | int] | None = None,
    ) -> httpx.Response:
        return await self.sender.send(
            method, path, authorization=f"Bearer {self.jwt()}", json=json, params=params
        )

    async def get_app(self) -> AppInfo:
        """`GET /app`: proves the credentials work and names the App."""
        info = AppInfo.model_validate((await self._app_request("GET", "/app")).json())
        if self._slug is None:
            self._slug = info.slug
        return info

    async def slug(self) -> str:
        """The name people mention (`@slug`): BOT_APP_SLUG, else learned once from `GET /app`."""
        if self._slug is None:
            await self.get_app()
        assert self._slug is not None
        return self._slug

    async def list_installations(self) -> list[Installation]:
        items: list[Installation] = []
        url = "/app/installations"
        params: Mapping[str, str | int] | None = {"per_page": 100}
        for _ in range(MAX_PAGES):
            response = await self._app_request("GET", url, params=params)
            items.extend(_models(Installation, response.json()))
            nxt = _next_link(response)
            if nxt is None:
                break
            url, params = nxt, None
        return items

    async def get_repo_installation(self, owner: str, repo: str) -> Installation:
        """`GET /repos/{owner}/{repo}/installation`; NotFound when the App is not installed there."""
        response = await self._app_request("GET", f"/repos/{owner}/{repo}/installation")
        return Installation.model_validate(response.json())

    async def installation_token(
        self,
        installation_id: int,
        repo: str | None = None,
        permissions: Mapping[str, str] | None = None,
    ) -> str:
        """A token for one installation, narrowed to `repo` when given; cached until near expiry."""
        key: TokenKey = (installation_id, repo or "")
        cached = self._tokens.get(key)
        if cached is not None and cached.fresh(self._clock()):
            return cached.token
        lock = self._token_locks.setdefault(key, anyio.Lock())
        async with lock:
            cached = self._tokens.get(key)
            if cached is not None and cached.fresh(self._clock()):
                return cached.token
            body: dict[str, Any] = {}
            if repo:
                body["repositories"] = [repo]
            if permissions:
                body["permissions"] = dict(permissions)
            response = await self._app_request(
                "POST", f"/app/installations/{installation_id}/access_tokens", json=body or None
            )
            issued = InstallationToken.model_validate(response.json())
            self._tokens[key] = CachedToken(issued.token, parse_github_time(issued.expires_at))
            log.info(
                "installation token issued",
                extra={"installation_id": installation_id, "repo": repo or "*"},
            )
            return issued.token

    def forget_token(self, installation_id: int, repo: str | None = None) -> None:
        """Drop a cached token (after GitHub refused it)."""
        self._tokens.pop((installation_id, repo or ""), None)

    def installation(
        self,
        installation_id: int,
        owner: str,
        repo: str,
        *,
        permissions: Mapping[str, str] | None = None,
    ) -> InstallationClient:
        """A client for one repository of one installation (cheap: build one per delivery)."""
        return InstallationClient(self, installation_id, owner, repo, permissions=permissions)

    # -- caches shared by installation clients ---------------------------------------------

    def _cached_permission(self, key: tuple[int, str, str]) -> Permission | None:
        hit = self._permissions.get(key)
        if hit is not None and self._clock() - hit[0] < PERMISSION_TTL_S:
            return hit[1]
        return None

    def _store_permission(self, key: tuple[int, str, str], value: Permission) -> None:
        self._permissions[key] = (self._clock(), value)


def _next_link(response: httpx.Response) -> str | None:
    """The `rel="next"` page, only on the origin that answered (the token goes with it)."""
    match = _NEXT_LINK.search(response.headers.get("link", ""))
    if match is None:
        return None
    nxt, here = httpx.URL(match.group(1)), response.request.url
    if (nxt.scheme, nxt.host, nxt.port) != (here.scheme, here.host, here.port):
        log.warning("pagination link to another origin ignored", extra={"host": nxt.host})
        return None
    return match.group(1)


class InstallationClient:
    """The calls the bot makes on one repository with one installation's narrowed token."""

    def __init__(
        self,
        app: GitHubApp,
        installation_id: int,
        owner: str,
        repo: str,
        *,
        permissions: Mapping[str, str] | None = None,
    ) -> None:
        self.app = app
        self.installation_id = installation_id
        self.owner = owner
        self.repo = repo
        self._permissions = dict(permissions) if permissions else None

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.repo}"

    def __repr__(self) -> str:
        return f"InstallationClient({self.installation_id}, {self.full_name!r})"

    async def token(self) -> str:
        """The installation token for this repository (for git). A secret: never log it."""
        return await self.app.installation_token(self.installation_id, self.repo, self._permissions)

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, str | int] | None = None,
        accept: str = "application/vnd.github+json",
    ) -> httpx.Response:
        """Any REST call with this installation's token; a 401 refreshes the token once."""
        for attempt in (1, 2):
            token = await self.token()
            try:
                return await self.app.sender.send(
                    method,
                    path,
                    authorization=f"token {token}",
                    json=json,
                    params=params,
                    accept=accept,
                    installation_id=self.installation_id,
                )
            except AuthError:
                if attempt == 2:
                    raise
                log.warning(
                    "installation token refused, requesting a new one",
                    extra={"installation_id": self.installation_id, "repo": self.full_name},
                )
                self.app.forget_token(self.installation_id, self.repo)
        raise AssertionError("unreachable")

    def _repo_path(self, suffix: str = "") -> str:
        return f"/repos/{self.owner}/{self.repo}{suffix}"

    async def _get_json(self, suffix: str, params: Mapping[str, str | int] | None = None) -> Any:
        return (await self.request("GET", self._repo_path(suffix), params=params)).json()

    async def _paginate(
        self, suffix: str, params: Mapping[str, str | int] | None = None, *, key: str | None = None
    ) -> list[Any]:
        items: list[Any] = []
        url = self._repo_path(suffix)
        query: Mapping[str, str | int] | None = {"per_page": 100, **(params or {})}
        for _ in range(MAX_PAGES):
            response = await self.request("GET", url, params=query)
            data = response.json()
            page = data.get(key, []) if key is not None and isinstance(data, dict) else data
            if not isinstance(page, list):
                raise GitHubError(200, f"GET {url}: expected a list")
            items.extend(page)
            nxt = _next_link(response)
            if nxt is None:
                break
            url, query = nxt, None
        else:
            log.warning(
                "list truncated", extra={"path": self._repo_path(suffix), "pages": MAX_PAGES}
            )
        return items

    # -- repository ------------------------------------------------------------------------

    async def get_repo(self) -> Repository:
        return Repository.model_validate(await self._get_json(""))

    async def get_file_text(self, path: str, ref: str | None = None) -> str | None:
        """A file's text at `ref` (default branch when None); None when it does not exist."""
        params = {"ref": ref} if ref else None
        suffix = f"/contents/{quote(path.lstrip('/'), safe='/')}"
        try:
            data = await self._get_json(suffix, params)
            if not isinstance(data, dict) or data.get("type") != "file":
                return None
            if data.get("encoding") == "base64":
                raw = base64.b64decode(str(data.get("content") or ""))
                return raw.decode("utf-8", errors="replace")
            # Files over 1 MB come without content: ask for the raw bytes instead.
            response = await self.request(
                "GET", self._repo_path(suffix), params=params, accept="application/vnd.github.raw"
            )
            return response.content.decode("utf-8", errors="replace")
        except NotFound:
            return None

    async def get_collaborator_permission(self, login: str) -> Permission | None:
        """The user's role on this repository, cached ~60 s.

        404 (not a collaborator or no such user) -> "none". Any other failure -> None,
        so that a caller's policy fails closed.
        """
        key = (self.installation_id, self.full_name, login.lower())
        cached = self.app._cached_permission(key)
        if cached is not None:
            return cached
        try:
            data = await self._get_json(f"/collaborators/{quote(login, safe='')}/permission")
        except NotFound:
            value: Permission = "none"
        except GitHubError as exc:
            log.warning(
                "collaborator permission unavailable",
                extra={"repo": self.full_name, "login": login, "status": exc.status},
            )
            return None
        else:
            parsed = _parse_permission(data)
            if parsed is None:
                return None
            value = parsed
        self.app._store_permission(key, value)
        return value

    # -- issues and comments ---------------------------------------------------------------

    async def get_issue(self, number: int) -> Issue:
        return Issue.model_validate(await self._get_json(f"/issues/{number}"))

    async def list_issue_comments(self, number: int) -> list[IssueComment]:
        return _models(IssueComment, await self._paginate(f"/issues/{number}/comments"))

    async def find_issue_comment(self, number: int, marker: str) -> IssueComment | None:
        """The first comment on the issue or PR whose body contains `marker` (a hidden tag)."""
        for comment in await self.list_issue_comments(number):
            if comment.body and marker in comment.body:
                return comment
        return None

    async def get_issue_comment(self, comment_id: int) -> IssueComment:
        return IssueComment.model_validate(await self._get_json(f"/issues/comments/{comment_id}"))

    async def create_issue_comment(self, number: int, body: str) -> IssueComment:
        response = await self.request(
            "POST", self._repo_path(f"/issues/{number}/comments"), json={"body": body}
        )
        return IssueComment.model_validate(response.json())

    async def update_issue_comment(self, comment_id: int, body: str) -> IssueComment:
        response = await self.request(
            "PATCH", self._repo_path(f"/issues/comments/{comment_id}"), json={"body": body}
        )
        return IssueComment.model_validate(response.json())

    async def add_reaction(self, comment_id: int, content: str = "eyes") -> None:
        """React to an issue comment (👀 by default)."""
        await self.request(
            "POST",
            self._repo_path(f"/issues/comments/{comment_id}/reactions"),
            json={"content": content},
        )

    async def add_issue_reaction(self, number: int, content: str = "eyes") -> None:
        """React to the body of an issue or pull request."""
        await self.request(
            "POST", self._repo_path(f"/issues/{number}/reactions"), json={"content": content}
        )

    # -- pull requests ---------------------------------------------------------------------

    async def get_pull(self, number: int) -> PullRequest:
        return PullRequest.model_validate(await self._get_json(f"/pulls/{number}"))

    async def list_pull_files(self, number: int) -> list[PullFile]:
        return _models(PullFile, await self._paginate(f"/pulls/{number}/files"))

    async def get_pull_diff(self, number: int) -> str:
        """The unified diff of the pull request (GitHub's `application/vnd.github.diff`)."""
        response = await self.request(
            "GET", self._repo_path(f"/pulls/{number}"), accept="application/vnd.github.diff"
        )
        return response.text

    async def list_review_comments(self, number: int) -> list[ReviewComment]:
        return _models(ReviewComment, await self._paginate(f"/pulls/{number}/comments"))

    async def create_review(
        self,
        number: int,
        *,
        body: str,
        event: str = "COMMENT",
        commit_id: str | None = None,
        comments: list[Mapping[str, Any]] | None = None,
    ) -> Review:
        """One review with inline `comments` ({path, line, side?, body}) on lines of the diff."""
        payload: dict[str, Any] = {"body": body, "event": event}
        if commit_id:
            payload["commit_id"] = commit_id
        if comments:
            payload["comments"] = [dict(c) for c in comments]
        response = await self.request(
            "POST", self._repo_path(f"/pulls/{number}/reviews"), json=payload
        )
        return Review.model_validate(response.json())

    # -- check runs ------------------------------------------------------------------------

    async def create_check_run(
        self,
        *,
        name: str,
        head_sha: str,
        status: str = "in_progress",
        external_id: str | None = None,
        details_url: str | None = None,
        output: Mapping[str, str] | None = None,
        conclusion: str | None = None,
    ) -> CheckRun:
        payload: dict[str, Any] = {"name": name, "head_sha": head_sha, "status": status}
        for field, value in (
            ("external_id", external_id),
            ("details_url", details_url),
            ("conclusion", conclusion),
        ):
            if value is not None:
                payload[field] = value
        if output is not None:
            payload["output"] = dict(output)
        response = await self.request("POST", self._repo_path("/check-runs"), json=payload)
        return CheckRun.model_validate(response.json())

    async def update_check_run(self, check_run_id: int, **fields: Any) -> CheckRun:
        """PATCH a check run: `status`, `conclusion`, `output={title, summary, text}`, ..."""
        response = await self.request(
            "PATCH", self._repo_path(f"/check-runs/{check_run_id}"), json=fields
        )
        return CheckRun.model_validate(response.json())

    async def list_check_runs_for_ref(
        self, ref: str, *, check_name: str | None = None
    ) -> list[CheckRun]:
        params = {"check_name": check_name} if check_name else None
        suffix = f"/commits/{quote(ref, safe='')}/check-runs"
        items = await self._paginate(suffix, params, key="check_runs")
        return _models(CheckRun, items)

    async def find_check_run(self, ref: str, external_id: str) -> CheckRun | None:
        """The check run on `ref` created for `external_id` (the run id), if any."""
        for run in await self.list_check_runs_for_ref(ref):
            if run.external_id == external_id:
                return run
        return None


def _parse_permission(data: object) -> Permission | None:
    """`role_name` (fine-grained: maintain, triage) wins over the legacy `permission` field."""
    if not isinstance(data, dict):
        return None
    for field in ("role_name", "permission"):
        value = data.get(field)
        if isinstance(value, str) and value in PERMISSIONS:
            return cast(Permission, value)
    return None
