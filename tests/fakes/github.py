"""A stateful fake of the GitHub REST API and git smart HTTP, for tests; a real HTTP server.

    fake = make_fake_github(tmp_path)               # repo octo/hello (bare git), installation 42
    fake.add_issue("octo", "hello", title="Crash", body="...", user="alice")
    pull = await fake.add_pull("octo", "hello", head="topic")   # shas, files, diff from git
    app = GitHubApp(fake.app_id, fake.private_key_pem, api_url="http://github.test",
                    transport=httpx.ASGITransport(fake.app))     # in-process
    with serve_fake_github(fake) as base_url: ...   # on 127.0.0.1, for git and subprocesses

It checks the App JWT (RS256 against its key pair; `iss`, `iat`, `exp` within 10 min) on
`/app*` routes and its own expiring installation tokens on repository routes (a token
narrowed to other repositories gets 404; `revoke_tokens()` makes every token 401); git
at `/{owner}/{repo}.git` needs the token as HTTP Basic `x-access-token:<token>` and
serves clone, fetch and push through `git http-backend`. Pushes are held to branch
protection as GitHub words it (`GH006` for the default branch and `protect_branch(...)`
ones), force pushes are refused, and each changed ref is kept in `pushes`; a push moves the
open pull requests of its branch. `POST /pulls` refuses a head with no commits ahead or with
an open pull already; reviewers must be collaborators other than the author; adding a label
the repository lacks creates it, as GitHub does, and records it in `labels_created`
(`add_label` makes one up front). `suspend_installation`, `delete_installation` and
`remove_repositories` take access away as GitHub does (403 "suspended", 401 for a deleted
installation's tokens, 404 for a removed repository); `hooks` keeps the webhook deliveries
the fake sent to `webhook_url` and serves `/app/hook/deliveries` (see `_github_hooks`).
Check runs belong to the App's check suite of their head; `rerequest_check_run` and
`rerequest_check_suite` give the delivery a person's Re-run sends (see `_github_checks`).
Every request is appended to
`calls` (`calls_to(method, glob)`, `writes()`); `fail_next(...)` injects 5xx, rate-limit
and malformed answers. Every request is checked against GitHub's OpenAPI description (see
`_github_openapi`): one it refuses gets 422 (or 404 for no such operation) and is kept in
`openapi_violations`, which the suite's conftest requires empty after each test.

A person signs in to the App through GitHub's OAuth web flow (`/login/oauth/authorize` as
`web_user`, to one of `oauth_callback_urls`, then `/login/oauth/access_token` with
`oauth_client_id`/`oauth_client_secret`): the `ghu_` token it gives (kept in `user_tokens`,
ended by `revoke_user_tokens()`) reads `/user` and `/user/installations`; org and team
membership (`add_org_member`, `add_team_member`) answer installation tokens of that org
(see `_github_oauth`). Repositories for it are built with `init_bare_repo` and
`commit_files` (from `tests.fakes.gitrepo`, re-exported here).
"""

from __future__ import annotations

import fnmatch
import itertools
import secrets
import threading
import time
import weakref
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jwt
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp

from tests.fakes._github_checks import rerequest_check_run, rerequest_check_suite
from tests.fakes._github_ci import add_check_run, add_status
from tests.fakes._github_hooks import HookLog
from tests.fakes._github_json import issue_json
from tests.fakes._github_labels import label_of
from tests.fakes._github_oauth import (
    CLIENT_ID,
    CLIENT_SECRET,
    CODE_TTL_S,
    OAuthCode,
    Orgs,
    UserToken,
    issue_user_token,
)
from tests.fakes._github_openapi import Violation
from tests.fakes._github_pulls import build_pull, close_pull
from tests.fakes._github_reviews import delete_review_comment, push_pull, submit_review
from tests.fakes._github_routes import build_routes
from tests.fakes._github_state import (
    DOCS,
    Call,
    FakeError,
    FakeRepo,
    Fault,
    Installation,
    Push,
    Token,
    iso,
    new_private_key_pem,
    public_key_of,
    shared_private_key_pem,
    user_json,
)
from tests.fakes.gitrepo import commit_files, init_bare_repo

__all__ = [
    "Call",
    "FakeGitHub",
    "FakeRepo",
    "Push",
    "commit_files",
    "init_bare_repo",
    "make_fake_github",
    "new_private_key_pem",
    "serve_app",
    "serve_fake_github",
    "take_openapi_violations",
]

# Every fake alive, for `take_openapi_violations`.
_LIVE: weakref.WeakSet[FakeGitHub] = weakref.WeakSet()


def take_openapi_violations() -> list[Violation]:
    """The OpenAPI violations of every fake alive, taken (the suite's conftest fails a test
    that leaves any; a test that provokes one on purpose takes it)."""
    found = []
    for fake in list(_LIVE):
        found.extend(fake.openapi_violations)
        fake.openapi_violations.clear()
    return found


class FakeGitHub:
    """The state behind the fake, and the Starlette app (`.app`) serving it."""

    def __init__(
        self,
        *,
        app_id: int = 1001,
        slug: str = "repo-agent",
        private_key_pem: str | None = None,
        webhook_secret: str = "whsec-test-0123456789",
        token_ttl_s: float = 3600.0,
    ) -> None:
        self.app_id = app_id
        self.slug = slug
        self.private_key_pem = private_key_pem or shared_private_key_pem()
        self.public_key = public_key_of(self.private_key_pem)
        self.webhook_secret = webhook_secret
        self.token_ttl_s = token_ttl_s
        self.max_per_page = 100
        self.response_headers: dict[str, str] = {}  # added to every answer (e.g. x-ratelimit-*)
        self.calls: list[Call] = []
        # Requests GitHub's OpenAPI description refuses (see `_github_openapi`): each was
        # answered 422 or 404, and the suite's conftest fails a test that leaves one here.
        self.openapi_violations: list[Violation] = []
        self.repos: dict[str, FakeRepo] = {}
        self.installations: dict[int, Installation] = {}
        self.tokens: dict[str, Token] = {}
        self.comments: dict[int, dict[str, Any]] = {}
        self.comment_issue: dict[int, tuple[str, int]] = {}
        self.reactions: list[dict[str, Any]] = []
        self.check_runs: dict[int, dict[str, Any]] = {}
        self.check_run_repo: dict[int, str] = {}
        self.check_suites: dict[int, dict[str, Any]] = {}  # the App's, one per repo and head
        self.check_suite_repo: dict[int, str] = {}
        self.annotations: dict[int, list[dict[str, Any]]] = {}  # other Apps' check runs'
        self.statuses: dict[tuple[str, str], list[dict[str, Any]]] = {}  # (repo, sha), oldest first
        self.review_comment_by_id: dict[int, dict[str, Any]] = {}
        self.review_comment_pull: dict[int, tuple[str, int]] = {}
        self.threads: dict[str, dict[str, Any]] = {}  # review threads by node id
        self.manifest_codes: dict[str, dict[str, Any]] = {}
        self.pushes: list[Push] = []  # refs changed by git pushes, in order
        self.webhook_url: str | None = None  # where deliveries and redeliveries are POSTed
        self.hooks = HookLog(self)
        self._faults: list[Fault] = []
        self._ids = itertools.count(1_000_001)
        self._lock = threading.Lock()
        # The App's OAuth side (user sign-in), as the manifest conversion hands it out.
        self.oauth_client_id = CLIENT_ID
        self.oauth_client_secret = CLIENT_SECRET
        self.oauth_callback_urls: list[str] = []  # the App's registered callback URLs
        self.web_user: str | None = None  # who is signed in to github.com in the browser
        self.oauth_code_ttl_s = CODE_TTL_S
        # True: the authorize page asks the person to click "Authorize" (#authorize) instead
        # of sending them straight back, as GitHub does before the first approval.
        self.oauth_asks = False
        self.oauth_codes: dict[str, OAuthCode] = {}  # codes not yet exchanged
        self.user_tokens: dict[str, UserToken] = {}  # `ghu_` value → its user, expiry
        self.orgs = Orgs(self._id)
        self.app = self._build_app()
        _LIVE.add(self)

    # -- state set-up ------------------------------------------------------------------------

    @property
    def bot_login(self) -> str:
        return f"{self.slug}[bot]"

    def _id(self) -> int:
        with self._lock:
            return next(self._ids)

    def add_repo(
        self,
        owner: str,
        name: str,
        bare_git_path: Path,
        default_branch: str = "main",
        private: bool = False,
    ) -> FakeRepo:
        repo = FakeRepo(self._id(), owner, name, Path(bare_git_path), default_branch, private)
        self.repos[repo.full_name] = repo
        return repo

    def add_installation(self, installation_id: int, account: str, repos: list[str]) -> None:
        """`repos` are full names ("owner/name") the installation may see."""
        self.installations[installation_id] = Installation(installation_id, account, list(repos))

    def suspend_installation(self, installation_id: int, suspended: bool = True) -> None:
        """Suspend (or unsuspend) an installation: its tokens get 403 while it is suspended."""
        self.installations[installation_id].suspended = suspended

    def delete_installation(self, installation_id: int) -> None:
        """Uninstall the App: the installation is gone and its tokens get 401."""
        del self.installations[installation_id]

    def remove_repositories(self, installation_id: int, repos: list[str]) -> None:
        """Take repositories (full names) out of an installation: its tokens, narrowed to them
        or not, get 404 there from now on."""
        inst = self.installations[installation_id]
        inst.repos = [name for name in inst.repos if name not in repos]

    def set_permission(self, owner: str, repo: str, login: str, perm: str) -> None:
        self.repos[f"{owner}/{repo}"].permissions[login.lower()] = perm

    def add_org_member(self, org: str, login: str) -> None:
        self.orgs.add_member(org, login)

    def remove_org_member(self, org: str, login: str) -> None:
        """`login` leaves the org, and with it every team of the org."""
        self.orgs.remove_member(org, login)

    def add_team_member(self, org: str, team_slug: str, login: str, role: str = "member") -> None:
        """`login` joins team `team_slug` (made when new) as "member" or "maintainer", and so
        the org too."""
        self.orgs.add_team_member(org, team_slug, login, role)

    def remove_team_member(self, org: str, team_slug: str, login: str) -> None:
        self.orgs.remove_team_member(org, team_slug, login)

    def issue_user_token(self, login: str) -> str:
        """A user token for `login` as the web flow would give (for a test that skips it)."""
        return issue_user_token(self, login).value

    def revoke_user_tokens(self) -> None:
        """End every user token: each gets 401 `Bad credentials` from now on."""
        for token in self.user_tokens.values():
            token.revoked = True

    def protect_branch(self, owner: str, repo: str, branch: str) -> None:
        """Refuse pushes to `branch` as a branch protection rule would (the default branch
        always is)."""
        self.repos[f"{owner}/{repo}"].protected.add(branch)

    def add_label(
        self,
        owner: str,
        repo: str,
        name: str,
        *,
        color: str = "ededed",
        description: str | None = None,
    ) -> dict[str, Any]:
        """A label of the repository (as `GET /labels` lists it); the existing one if known."""
        return label_of(self, self.repos[f"{owner}/{repo}"], name, color, description)

    def add_issue(
        self,
        owner: str,
        repo: str,
        *,
        title: str,
        body: str | None = "",
        user: str = "octocat",
        labels: list[str] | None = None,
        number: int | None = None,
        state: str = "open",
    ) -> dict[str, Any]:
        fr = self.repos[f"{owner}/{repo}"]
        number = number or fr.next_number
        fr.next_number = max(fr.next_number, number + 1)
        issue = issue_json(
            fr,
            self._id(),
            number,
            title=title,
            body=body,
            user=user,
            labels=[label_of(self, fr, n) for n in labels or []],
            state=state,
            association=self._association(fr, user),
        )
        fr.issues[number] = issue
        return issue

    def add_comment(
        self, owner: str, repo: str, number: int, body: str, user: str = "octocat"
    ) -> dict[str, Any]:
        """A comment as if a person wrote it (the bot's own go through the API)."""
        return self._new_comment(self.repos[f"{owner}/{repo}"], number, body, user)

    def add_review_comment(
        self,
        owner: str,
        repo: str,
        number: int,
        body: str,
        *,
        user: str = "octocat",
        path: str = "README.md",
        line: int = 1,
        in_reply_to: int | None = None,
    ) -> dict[str, Any]:
        """A comment on a line of a pull request's diff (or a reply in a thread), as if a
        person wrote it."""
        fr = self.repos[f"{owner}/{repo}"]
        if number not in fr.pulls:
            raise FakeError(404, "Not Found")
        comment = self.new_review_comment(
            fr,
            number,
            {"path": path, "line": line, "body": body},
            login=user,
            commit=fr.pulls[number]["head"]["sha"],
            review_id=self._id(),
            in_reply_to=in_reply_to,
        )
        if in_reply_to is None:
            self.new_thread(fr, number, comment)
        return comment

    def new_review_comment(
        self,
        fr: FakeRepo,
        number: int,
        data: dict[str, Any],
        *,
        login: str,
        commit: str,
        review_id: int,
        in_reply_to: int | None = None,
    ) -> dict[str, Any]:
        """Record a review comment (the API's and the helpers' shared path)."""
        cid = self._id()
        now = iso()
        comment: dict[str, Any] = {
            "id": cid,
            "node_id": f"PRRC_{cid}",
            "pull_request_review_id": review_id,
            "path": data["path"],
            "line": data.get("line"),
            "original_line": data.get("line"),
            "start_line": data.get("start_line"),
            "side": data.get("side", "RIGHT"),
            "diff_hunk": "@@ -1 +1 @@",
            "body": data["body"],
            "commit_id": commit,
            "original_commit_id": commit,
            "user": user_json(login),
            "author_association": self._association(fr, login),
            "html_url": f"https://github.com/{fr.full_name}/pull/{number}#discussion_r{cid}",
            "created_at": now,
            "updated_at": now,
        }
        if in_reply_to is not None:
            comment["in_reply_to_id"] = in_reply_to
            for thread in self.threads.values():
                if in_reply_to in thread["comments"]:
                    thread["comments"].append(cid)
        fr.review_comments.setdefault(number, []).append(comment)
        self.review_comment_by_id[cid] = comment
        self.review_comment_pull[cid] = (fr.full_name, number)
        return comment

    def new_thread(self, fr: FakeRepo, number: int, first: dict[str, Any]) -> dict[str, Any]:
        tid = f"PRRT_{first['id']}"
        thread = {
            "id": tid,
            "repo": fr.full_name,
            "number": number,
            "comments": [first["id"]],
            "first": first,
            "resolved": False,
            "resolved_by": None,
            "outdated": False,
        }
        self.threads[tid] = thread
        return thread

    def thread_of(self, comment_id: int) -> dict[str, Any]:
        return next(t for t in self.threads.values() if comment_id in t["comments"])

    def resolve_thread(self, comment_id: int, user: str) -> None:
        """Resolve the thread holding `comment_id`, as person `user` would on GitHub."""
        thread = self.thread_of(comment_id)
        thread["resolved"] = True
        thread["resolved_by"] = user

    def react_to_review_comment(self, comment_id: int, user: str, content: str = "-1") -> None:
        """A person's reaction on a review comment."""
        full, _ = self.review_comment_pull[comment_id]
        rid = self._id()
        self.reactions.append(
            {
                "target": {"repo": full, "review_comment_id": comment_id},
                "content": content,
                "json": {"id": rid, "user": user_json(user), "content": content},
            }
        )

    def delete_review_comment(self, comment_id: int) -> None:
        """Delete a review comment as its author would (its replies stay)."""
        delete_review_comment(self, comment_id)

    async def push_pull(self, owner: str, repo: str, number: int, sha: str) -> dict[str, Any]:
        """Move a pull's head to `sha`; returns the `synchronize` payload GitHub would send."""
        return await push_pull(self, owner, repo, number, sha)

    def submit_review(self, owner: str, repo: str, number: int, **review: Any) -> dict[str, Any]:
        """A person's review with inline comments; the `pull_request_review.submitted`
        payload (`tests.fakes._github_reviews.submit_review`)."""
        return submit_review(self, owner, repo, number, **review)

    def close_pull(
        self, owner: str, repo: str, number: int, *, merged: bool, user: str
    ) -> dict[str, Any]:
        """`user` merged (or closed) the pull; returns the `pull_request.closed` payload."""
        return close_pull(self, owner, repo, number, merged=merged, user=user)

    def add_foreign_check_run(self, full_name: str, head_sha: str, **fields: Any) -> dict[str, Any]:
        """Another App's check run on `head_sha`, with annotations (`tests.fakes._github_ci`)."""
        return add_check_run(self, full_name, head_sha, **fields)

    def add_commit_status(self, full_name: str, sha: str, **fields: Any) -> dict[str, Any]:
        """A commit status another integration set on `sha` (`tests.fakes._github_ci`)."""
        return add_status(self, full_name, sha, **fields)

    def rerequest_check_run(self, check_run_id: int, sender: str) -> dict[str, Any]:
        """`sender` pressed Re-run on a check run; the `check_run.rerequested` payload."""
        return rerequest_check_run(self, check_run_id, sender)

    def rerequest_check_suite(self, suite_id: int, sender: str) -> dict[str, Any]:
        """`sender` pressed Re-run all checks on a suite; the `check_suite.rerequested` payload."""
        return rerequest_check_suite(self, suite_id, sender)

    def token_allows(self, token: Token, full_name: str) -> bool:
        inst = self.installations.get(token.installation_id)
        if inst is None or full_name not in inst.repos:
            return False  # removed from the installation since the token was issued
        return token.repos is None or full_name in token.repos

    async def add_pull(
        self,
        owner: str,
        repo: str,
        *,
        head: str,
        base: str | None = None,
        title: str = "A change",
        body: str | None = "",
        user: str = "octocat",
        draft: bool = False,
        head_repo: str | None = None,
        number: int | None = None,
    ) -> dict[str, Any]:
        """A pull from branch (or commit) `head` into `base`; shas, files and diff come from git.

        `refs/pull/<n>/head` is written into the bare repository, as GitHub does, so
        clients can fetch the head even when it lives in a fork (`head_repo`).
        """
        return await build_pull(
            self,
            owner,
            repo,
            head=head,
            base=base,
            title=title,
            body=body,
            user=user,
            draft=draft,
            head_repo=head_repo,
            number=number,
        )

    def register_manifest_code(self, code: str, manifest: dict[str, Any] | None = None) -> None:
        """Make `POST /app-manifests/<code>/conversions` succeed (once), as after a browser flow."""
        self.manifest_codes[code] = dict(manifest or {})

    # -- faults and tokens -----------------------------------------------------------------

    def fail_next(
        self,
        method: str,
        path_pattern: str,
        status: int,
        *,
        times: int = 1,
        headers: dict[str, str] | None = None,
        message: str | None = None,
        json_body: Any = None,
        raw_body: bytes | None = None,
        after_apply: bool = False,
    ) -> None:
        """Answer the next `times` matching requests with `status` (glob on the path; "*" method).

        The body is GitHub's error shape with `message`, or `json_body`, or the bytes
        `raw_body` as they are (for example a proxy's HTML page). With `after_apply` the
        request takes effect first and only its answer is replaced (a write that happened
        although the caller saw a 502).
        """
        body = json_body
        if body is None:
            body = {"message": message or f"injected {status}", "documentation_url": DOCS}
        self._faults.append(
            Fault(
                method.upper(),
                path_pattern,
                status,
                times,
                dict(headers or {}),
                body,
                raw_body,
                after_apply,
            )
        )

    def revoke_tokens(self) -> None:
        for token in self.tokens.values():
            token.revoked = True

    def calls_to(self, method: str, path_pattern: str) -> list[Call]:
        return [
            c
            for c in self.calls
            if (method == "*" or c.method == method.upper())
            and fnmatch.fnmatchcase(c.path, path_pattern)
        ]

    def writes(self) -> list[Call]:
        """Every mutating call made with an installation token (what the bot wrote)."""
        return [
            c
            for c in self.calls
            if c.method in ("POST", "PATCH", "PUT", "DELETE") and c.auth == "token"
        ]

    def comments_on(self, owner: str, repo: str, number: int) -> list[dict[str, Any]]:
        key = f"{owner}/{repo}"
        return [
            self.comments[cid]
            for cid, where in sorted(self.comment_issue.items())
            if where == (key, number)
        ]

    # -- helpers ---------------------------------------------------------------------------

    def _association(self, fr: FakeRepo, login: str) -> str:
        if login.lower() == fr.owner.lower():
            return "OWNER"
        perm = fr.permissions.get(login.lower())
        return "COLLABORATOR" if perm in ("admin", "maintain", "write", "triage") else "NONE"

    def _repo_stub(self, full_name: str, fr: FakeRepo) -> dict[str, Any]:
        owner, name = full_name.split("/", 1)
        return {
            "id": fr.id if full_name == fr.full_name else zlib.crc32(full_name.encode()),
            "name": name,
            "full_name": full_name,
            "private": fr.private,
            "owner": user_json(owner),
            "html_url": f"https://github.com/{full_name}",
            "default_branch": fr.default_branch,
        }

    def _new_comment(self, fr: FakeRepo, number: int, body: str, login: str) -> dict[str, Any]:
        if number not in fr.issues:
            raise FakeError(404, "Not Found")
        cid = self._id()
        now = iso()
        comment = {
            "id": cid,
            "node_id": f"IC_{cid}",
            "url": f"https://api.github.com/repos/{fr.full_name}/issues/comments/{cid}",
            "html_url": f"https://github.com/{fr.full_name}/issues/{number}#issuecomment-{cid}",
            "issue_url": f"https://api.github.com/repos/{fr.full_name}/issues/{number}",
            "body": body,
            "user": user_json(login),
            "author_association": self._association(fr, login),
            "created_at": now,
            "updated_at": now,
            "reactions": {"total_count": 0, "eyes": 0, "+1": 0},
            "performed_via_github_app": None,
        }
        self.comments[cid] = comment
        self.comment_issue[cid] = (fr.full_name, number)
        fr.issues[number]["comments"] += 1
        return comment

    def _build_app(self) -> Starlette:
        return Starlette(routes=build_routes(self))

    # -- request plumbing used by the routes -----------------------------------------------

    def take_fault(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if (fault.method in ("*", method)) and fnmatch.fnmatchcase(path, fault.pattern):
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self._faults.remove(fault)
                    return fault
        return None

    def verify_jwt(self, raw: str) -> None:
        try:
            claims = jwt.decode(
                raw,
                self.public_key,  # type: ignore[arg-type]
                algorithms=["RS256"],
                options={"require": ["iat", "exp", "iss"]},
            )
        except jwt.PyJWTError as exc:
            raise FakeError(401, f"A JSON web token could not be decoded ({exc})") from None
        now = time.time()
        if str(claims["iss"]) != str(self.app_id):
            raise FakeError(401, "'Issuer' claim ('iss') must be the App id")
        if claims["exp"] > now + 600 + 5:
            raise FakeError(401, "'Expiration time' claim ('exp') is too far in the future")
        if claims["iat"] > now + 5:
            raise FakeError(401, "'Issued at' claim ('iat') must be an Integer in the past")

    def check_token(self, raw: str) -> Token:
        token = self.tokens.get(raw)
        if token is None or token.revoked or token.expires_at <= time.time():
            raise FakeError(401, "Bad credentials")
        inst = self.installations.get(token.installation_id)
        if inst is None:
            raise FakeError(401, "Bad credentials")
        if inst.suspended:
            raise FakeError(403, "This installation has been suspended")
        return token

    def token_repo(self, token: Token, full_name: str) -> FakeRepo:
        repo = self.repos.get(full_name)
        if repo is None or not self.token_allows(token, full_name):
            raise FakeError(404, "Not Found")
        return repo

    def issue_token(
        self, installation_id: int, repo_names: list[str] | None, permissions: dict[str, str]
    ) -> Token:
        inst = self.installations.get(installation_id)
        if inst is None:
            raise FakeError(404, "Not Found")
        if inst.suspended:
            raise FakeError(403, "This installation has been suspended")
        repos: frozenset[str] | None = None
        if repo_names:
            full = {n if "/" in n else f"{inst.account}/{n}" for n in repo_names}
            if not full <= set(inst.repos):
                raise FakeError(
                    422, "There is at least one repository that does not exist or is not accessible"
                )
            repos = frozenset(full)
        token = Token(
            "ghs_" + secrets.token_urlsafe(27).replace("-", "a").replace("_", "b")[:36],
            installation_id,
            repos,
            permissions,
            time.time() + self.token_ttl_s,
        )
        self.tokens[token.value] = token
        return token

    def page(self, request: Request, items: list[Any], *, key: str | None = None) -> Response:
        """GitHub-style pagination: `per_page`, `page`, and a `Link: rel="next"` header."""
        per_page = min(int(request.query_params.get("per_page", 30)), 100, self.max_per_page)
        number = int(request.query_params.get("page", 1))
        chunk = items[(number - 1) * per_page : number * per_page]
        headers = {}
        if number * per_page < len(items):
            nxt = request.url.include_query_params(page=number + 1, per_page=per_page)
            headers["link"] = f'<{nxt}>; rel="next"'
        content: Any = {"total_count": len(items), key: chunk} if key else chunk
        return JSONResponse(content, headers=headers)


def make_fake_github(
    root: Path,
    *,
    owner: str = "octo",
    repo: str = "hello",
    installation_id: int = 42,
    files: dict[str, str | bytes] | None = None,
    private: bool = False,
) -> FakeGitHub:
    """A fake with one repository (a bare git repo under `root`), installed as `installation_id`.

    The owner has admin permission; other users must be added with `set_permission`.
    """
    fake = FakeGitHub()
    bare = init_bare_repo(
        root / "remote" / owner / f"{repo}.git", files or {"README.md": "hello\n"}
    )
    fake.add_repo(owner, repo, bare, private=private)
    fake.add_installation(installation_id, owner, [f"{owner}/{repo}"])
    fake.set_permission(owner, repo, owner, "admin")
    return fake


@contextmanager
def serve_app(app: ASGIApp, host: str = "127.0.0.1") -> Iterator[str]:
    """Serve an ASGI app on `host` on a free port in a background thread; yields its base URL."""
    config = uvicorn.Config(
        app, host=host, port=0, log_level="warning", lifespan="off", loop="asyncio"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="fake-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def serve_fake_github(fake: FakeGitHub) -> Iterator[str]:
    """Serve the fake on 127.0.0.1 on a free port in a background thread; yields its base URL."""
    with serve_app(fake.app) as base_url:
        yield base_url
