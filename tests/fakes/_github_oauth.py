"""The fake GitHub's user sign-in for a GitHub App, user tokens, and organisation membership.

The web flow, as github.com runs it for a GitHub App (not REST: `NOT_REST` names both):

    GET  /login/oauth/authorize?client_id=…&redirect_uri=…&state=…
        → 302 to the callback URL with `code=<20 hex>&state=…` (the person signed in to
          github.com is `fake.web_user`; none → 401)
    POST /login/oauth/access_token   client_id, client_secret, code[, redirect_uri]
        → `ghu_` user token (8 h) and `ghr_` refresh token; form text, or JSON when the
          request accepts `application/json`; failures are 200 with `error`, as on GitHub

`redirect_uri` must be one of `fake.oauth_callback_urls` exactly (a GitHub App's rule); a
code lives `fake.oauth_code_ttl_s` (10 min), works once, and only with the redirect URI it
was issued for. A user token (auth kind "user") reads `GET /user`, `GET /user/installations`
(the App's installations holding a repository the user has a permission on, by
`fake.set_permission`) and an installation's repositories with the user's `permissions`;
an installation token there is 403 `Resource not accessible by integration`.

Membership (`fake.add_org_member`, `fake.add_team_member`, ...) compares logins, org names
and team slugs without case, as GitHub does; a team member is an org member, and leaving the
org leaves its teams. An installation token asks `GET /orgs/{org}/members/{username}` and
`GET /orgs/{org}/teams/{team_slug}/memberships/{username}` of its own account only (404 for
any other, as GitHub answers for an org it cannot see).

Codes and user tokens expire by `clock()`, which a test may monkeypatch to move time.
"""

from __future__ import annotations

import html
import json
import secrets
import string
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)

from tests.fakes._github_ctx import Ctx, Handler, ok
from tests.fakes._github_json import installation_json, repo_json
from tests.fakes._github_state import FakeError, FakeRepo, Installation, user_json

if TYPE_CHECKING:
    from tests.fakes.github import FakeGitHub

CLIENT_ID = "Iv1.0123456789abcdef"
CLIENT_SECRET = "cs_" + "0" * 37
CODE_TTL_S = 600.0
USER_TOKEN_TTL_S = 28_800  # 8 hours
REFRESH_TOKEN_TTL_S = 15_811_200  # 6 months

_TROUBLE = "https://docs.github.com/apps/managing-oauth-apps"
_AUTHORIZE_DOCS = f"{_TROUBLE}/troubleshooting-authorization-request-errors/"
_TOKEN_DOCS = f"{_TROUBLE}/troubleshooting-oauth-app-access-token-request-errors/"
_MISMATCH = "The redirect_uri MUST match the registered callback URL for this application."
_TOKEN_ERRORS = {
    "incorrect_client_credentials": "The client_id and/or client_secret passed are incorrect.",
    "bad_verification_code": "The code passed is incorrect or expired.",
    "redirect_uri_mismatch": _MISMATCH,
}
_ALNUM = string.ascii_letters + string.digits

# Repository roles, weakest first; `pull` and `push` are the older names of read and write.
_ROLES = ("read", "triage", "write", "maintain", "admin")
_ROLE_ALIASES = {"pull": "read", "push": "write"}


def clock() -> float:
    """Now, in seconds since the epoch, for codes and user tokens (monkeypatch to move time)."""
    return time.time()


@dataclass
class OAuthCode:
    """A code of the web flow: who signed in, for which client, sent to which redirect URI."""

    login: str
    client_id: str
    redirect_uri: str
    expires_at: float


@dataclass
class UserToken:
    """A user-to-server token (`ghu_`), acting as `login` until `expires_at`."""

    value: str
    login: str
    expires_at: float
    refresh_token: str
    revoked: bool = False


@dataclass
class Team:
    id: int
    org: str
    slug: str
    members: dict[str, str] = field(default_factory=dict)  # lower-case login → role


class Orgs:
    """Organisation members and teams; org names, team slugs and logins without case."""

    def __init__(self, new_id: Callable[[], int]) -> None:
        self.members: dict[str, set[str]] = {}  # lower-case org → lower-case logins
        self.teams: dict[tuple[str, str], Team] = {}  # (lower-case org, lower-case slug)
        self._new_id = new_id

    def add_member(self, org: str, login: str) -> None:
        self.members.setdefault(org.lower(), set()).add(login.lower())

    def remove_member(self, org: str, login: str) -> None:
        """Out of the org, and so out of each of its teams."""
        self.members.get(org.lower(), set()).discard(login.lower())
        for (team_org, _), team in self.teams.items():
            if team_org == org.lower():
                team.members.pop(login.lower(), None)

    def add_team_member(self, org: str, slug: str, login: str, role: str) -> None:
        if role not in ("member", "maintainer"):
            raise ValueError(f"a team role is 'member' or 'maintainer', not {role!r}")
        key = (org.lower(), slug.lower())
        team = self.teams.get(key)
        if team is None:
            team = self.teams[key] = Team(self._new_id(), org, slug)
        self.add_member(org, login)
        team.members[login.lower()] = role

    def remove_team_member(self, org: str, slug: str, login: str) -> None:
        team = self.teams.get((org.lower(), slug.lower()))
        if team is not None:
            team.members.pop(login.lower(), None)

    def is_member(self, org: str, login: str) -> bool:
        return login.lower() in self.members.get(org.lower(), set())

    def team(self, org: str, slug: str) -> Team | None:
        return self.teams.get((org.lower(), slug.lower()))


def _random(length: int) -> str:
    return "".join(secrets.choice(_ALNUM) for _ in range(length))


def issue_user_token(fake: FakeGitHub, login: str) -> UserToken:
    token = UserToken("ghu_" + _random(36), login, clock() + USER_TOKEN_TTL_S, "ghr_" + _random(76))
    fake.user_tokens[token.value] = token
    return token


def web_params(content_type: str, body: bytes) -> dict[str, str]:
    """The parameters of a web form post: `application/x-www-form-urlencoded` or a JSON
    object (its string values); nothing for any other body."""
    if not body:
        return {}
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind == "application/json":
        try:
            data = json.loads(body)
        except ValueError:
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: v for k, v in data.items() if isinstance(v, str)}
    if kind == "application/x-www-form-urlencoded":
        return dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
    return {}


def authenticate_user(fake: FakeGitHub, ctx: Ctx, scheme: str, credential: str) -> None:
    """Auth kind "user": `Bearer`/`token` and a live user token; an installation's is 403."""
    if scheme not in ("token", "bearer") or not credential:
        raise FakeError(401, "Requires authentication")
    if credential in fake.tokens:
        fake.check_token(credential)  # a dead one is 401, a suspended installation's 403
        raise FakeError(403, "Resource not accessible by integration")
    token = fake.user_tokens.get(credential)
    if token is None or token.revoked or token.expires_at <= clock():
        raise FakeError(401, "Bad credentials")
    ctx.request.state.user_token = token


def _signed_in(ctx: Ctx) -> str:
    token: UserToken = ctx.request.state.user_token
    return token.login


def _role(fr: FakeRepo, login: str) -> str | None:
    held = fr.permissions.get(login.lower())
    role = _ROLE_ALIASES.get(held or "", held)
    return role if role in _ROLES else None


def permissions_json(role: str) -> dict[str, bool]:
    """A repository's `permissions` for a user of `role`: each role holds the weaker ones."""
    rank = _ROLES.index(role)
    return {
        "admin": rank >= _ROLES.index("admin"),
        "maintain": rank >= _ROLES.index("maintain"),
        "push": rank >= _ROLES.index("write"),
        "triage": rank >= _ROLES.index("triage"),
        "pull": True,
    }


def _reachable(fake: FakeGitHub, inst: Installation, login: str) -> list[tuple[FakeRepo, str]]:
    """The installation's repositories `login` has a role on, with the role."""
    found = []
    for name in inst.repos:
        fr = fake.repos.get(name)
        role = _role(fr, login) if fr is not None else None
        if fr is not None and role is not None:
            found.append((fr, role))
    return found


def _installation(fake: FakeGitHub, inst_id: int) -> dict[str, Any]:
    """An installation as GitHub's `installation` schema has it (every required field)."""
    inst = fake.installations[inst_id]
    account = user_json(inst.account, "Organization")
    return {
        **installation_json(fake, inst_id),
        "target_id": account["id"],
        "single_file_name": None,
        "html_url": f"https://github.com/organizations/{inst.account}/settings/installations/"
        f"{inst_id}",
        "repositories_url": "https://api.github.com/installation/repositories",
        "suspended_by": user_json(inst.account) if inst.suspended else None,
    }


def _with_query(url: str, params: dict[str, str], state: str | None) -> str:
    """`url` with `params` (and `state`, when one came) added after any query it has."""
    if state is not None:
        params = {**params, "state": state}
    parts = urlsplit(url)
    extra = urlencode(params)
    return urlunsplit(parts._replace(query=f"{parts.query}&{extra}" if parts.query else extra))


def _page_not_found() -> Response:
    return HTMLResponse(
        "<!DOCTYPE html><html><head><title>Page not found · GitHub</title></head>"
        "<body><h1>404</h1><p>This is not the web page you are looking for.</p></body></html>",
        404,
    )


def oauth_routes(fake: FakeGitHub) -> list[tuple[str, str, str, Handler]]:
    """(method, path, auth, handler) for the web flow, user-token routes and membership."""

    # -- github.com: the web flow ------------------------------------------------------------

    async def authorize(ctx: Ctx) -> Response:
        query = ctx.request.query_params
        client_id = query.get("client_id")
        if client_id is None or client_id != fake.oauth_client_id:
            return _page_not_found()
        if not fake.oauth_callback_urls:
            return _page_not_found()  # a GitHub App with no callback URL has no web flow
        state = query.get("state")
        redirect_uri = query.get("redirect_uri")
        if redirect_uri is not None and redirect_uri not in fake.oauth_callback_urls:
            error = {
                "error": "redirect_uri_mismatch",
                "error_description": _MISMATCH,
                "error_uri": f"{_AUTHORIZE_DOCS}#redirect-uri-mismatch",
            }
            return RedirectResponse(_with_query(fake.oauth_callback_urls[0], error, state), 302)
        if fake.web_user is None:
            return PlainTextResponse("sign in to GitHub first", 401)
        target = redirect_uri if redirect_uri is not None else fake.oauth_callback_urls[0]
        code = secrets.token_hex(10)
        fake.oauth_codes[code] = OAuthCode(
            fake.web_user, client_id, target, clock() + fake.oauth_code_ttl_s
        )
        back = _with_query(target, {"code": code}, state)
        if fake.oauth_asks:
            # The person approves on GitHub's page: the way back starts on github.com.
            link = html.escape(back, quote=True)
            page = (
                '<!doctype html><title>Authorize</title><link rel="icon" href="data:,">'
                f'<a id="authorize" href="{link}">Authorize</a>'
            )
            return HTMLResponse(page)
        return RedirectResponse(back, 302)

    async def access_token(ctx: Ctx) -> Response:
        params: dict[str, str] = ctx.json if isinstance(ctx.json, dict) else {}
        as_json = "application/json" in ctx.request.headers.get("accept", "").lower()

        def answer(content: dict[str, Any]) -> Response:
            if as_json:
                return JSONResponse(content)
            text = urlencode({k: str(v) for k, v in content.items()})
            return Response(text, 200, media_type="application/x-www-form-urlencoded")

        def refuse(error: str) -> Response:
            anchor = error.replace("_", "-")
            return answer(
                {
                    "error": error,
                    "error_description": _TOKEN_ERRORS[error],
                    "error_uri": f"{_TOKEN_DOCS}#{anchor}",
                }
            )

        client_id = params.get("client_id")
        if client_id != fake.oauth_client_id or (
            params.get("client_secret") != fake.oauth_client_secret
        ):
            return refuse("incorrect_client_credentials")
        raw = params.get("code", "")
        code = fake.oauth_codes.get(raw)
        if code is not None and code.expires_at <= clock():
            del fake.oauth_codes[raw]
            code = None
        if code is None or code.client_id != client_id:
            return refuse("bad_verification_code")
        if "redirect_uri" in params and params["redirect_uri"] != code.redirect_uri:
            return refuse("redirect_uri_mismatch")  # the code stays good
        del fake.oauth_codes[raw]
        token = issue_user_token(fake, code.login)
        return answer(
            {
                "access_token": token.value,
                "expires_in": USER_TOKEN_TTL_S,
                "refresh_token": token.refresh_token,
                "refresh_token_expires_in": REFRESH_TOKEN_TTL_S,
                "scope": "",
                "token_type": "bearer",
            }
        )

    # -- REST with a user token --------------------------------------------------------------

    async def get_user(ctx: Ctx) -> Response:
        login = _signed_in(ctx)
        owned = [fr for fr in fake.repos.values() if fr.owner.lower() == login.lower()]
        return ok(
            {
                **user_json(login),
                "user_view_type": "private",
                "name": None,
                "company": None,
                "blog": "",
                "location": None,
                "email": None,
                "notification_email": None,
                "hireable": None,
                "bio": None,
                "twitter_username": None,
                "public_repos": sum(1 for fr in owned if not fr.private),
                "public_gists": 0,
                "followers": 0,
                "following": 0,
                "created_at": "2020-01-01T00:00:00Z",
                "updated_at": "2024-01-01T00:00:00Z",
                "private_gists": 0,
                "total_private_repos": sum(1 for fr in owned if fr.private),
                "owned_private_repos": sum(1 for fr in owned if fr.private),
                "disk_usage": 0,
                "collaborators": 0,
                "two_factor_authentication": True,
            }
        )

    async def user_installations(ctx: Ctx) -> Response:
        login = _signed_in(ctx)
        items = [
            _installation(fake, inst_id)
            for inst_id in sorted(fake.installations)
            if _reachable(fake, fake.installations[inst_id], login)
        ]
        return fake.page(ctx.request, items, key="installations")

    async def user_installation_repositories(ctx: Ctx) -> Response:
        login = _signed_in(ctx)
        inst = fake.installations.get(ctx.number("installation_id"))
        reachable = _reachable(fake, inst, login) if inst is not None else []
        if not reachable:
            raise FakeError(404, "Not Found")
        items = [
            {**repo_json(ctx.request, fr), "permissions": permissions_json(role)}
            for fr, role in reachable
        ]
        return fake.page(ctx.request, items, key="repositories")

    # -- organisations -----------------------------------------------------------------------

    async def org_installation(ctx: Ctx) -> Response:
        org = ctx.param("org").lower()
        for inst_id in sorted(fake.installations):
            if fake.installations[inst_id].account.lower() == org:
                return ok(_installation(fake, inst_id))
        raise FakeError(404, "Not Found")

    def own_org(ctx: Ctx) -> str:
        """The `{org}` of the path, when it is the token's installation's account."""
        assert ctx.token is not None
        inst = fake.installations[ctx.token.installation_id]
        org = ctx.param("org")
        if inst.account.lower() != org.lower():
            raise FakeError(404, "Not Found")
        return org

    async def org_member(ctx: Ctx) -> Response:
        org = own_org(ctx)
        if not fake.orgs.is_member(org, ctx.param("username")):
            raise FakeError(404, "User does not exist or is not a member of the organization")
        return Response(status_code=204)

    async def team_membership(ctx: Ctx) -> Response:
        org = own_org(ctx)
        username = ctx.param("username")
        team = fake.orgs.team(org, ctx.param("team_slug"))
        role = team.members.get(username.lower()) if team is not None else None
        if team is None or role is None:
            raise FakeError(404, "Not Found")
        org_id = user_json(org, "Organization")["id"]
        url = f"https://api.github.com/organizations/{org_id}/team/{team.id}/memberships/{username}"
        return ok({"url": url, "role": role, "state": "active"})

    return [
        ("GET", "/login/oauth/authorize", "web", authorize),
        ("POST", "/login/oauth/access_token", "web", access_token),
        ("GET", "/user", "user", get_user),
        ("GET", "/user/installations", "user", user_installations),
        (
            "GET",
            "/user/installations/{installation_id:int}/repositories",
            "user",
            user_installation_repositories,
        ),
        ("GET", "/orgs/{org}/installation", "jwt", org_installation),
        ("GET", "/orgs/{org}/members/{username}", "token", org_member),
        (
            "GET",
            "/orgs/{org}/teams/{team_slug}/memberships/{username}",
            "token",
            team_membership,
        ),
    ]
