"""Signing in to the operator's page with GitHub: the App's OAuth web flow, and whether a
person is let in by a rule of BOT_UI_ALLOW (`policies.ui_allow`).

    sign_in = GitHubSignIn(app, client_id, client_secret)
    who = await sign_in.person(code, redirect_uri)     # the code GitHub's callback brought
    grant = await sign_in.first_grant(rules, who)      # None: not let in
    still = await sign_in.holds(grant, who.login)      # asked again while the session lasts

The code is traded for a user-to-server token with githubkit's web-flow strategy; that token
is used only while the sign-in is answered (who the person is, and for `repo-admins` which of
the App's repositories they administer) and is never stored. Organization and team membership,
and a repository's admins, are asked with the App's own installation tokens (the App needs the
organization permission "Members: read" for `org:` and `team:` rules), so a session's grant
can be asked again later without the person's token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from githubkit import GitHub, TokenAuthStrategy, UnauthAuthStrategy
from githubkit.exception import AuthExpiredError, RequestError

from bot.github._pages import Pages, answer, json_of, translated
from bot.github.client import GitHubApp
from bot.github.errors import GitHubError, NotFound
from bot.github.models import Installation
from policies.ui_allow import Rule, grant_of, parse_grant

__all__ = ["GitHubSignIn", "Person", "SignInRefused"]

MAX_REPOSITORIES = 3_000
"""Repositories read per installation when looking for one the person administers."""


class SignInRefused(Exception):
    """GitHub did not confirm the sign-in (a code expired or used, a wrong client secret); the
    message is safe to show."""


@dataclass(frozen=True, slots=True)
class Person:
    login: str
    id: int
    token: str
    """The user-to-server token: for this sign-in's checks only, never stored."""

    def __repr__(self) -> str:
        return f"Person(login={self.login!r}, id={self.id})"


class GitHubSignIn:
    """The App's OAuth client and the checks of who may sign in."""

    def __init__(self, app: GitHubApp, client_id: str, client_secret: str) -> None:
        self.app = app
        self.client_id = client_id
        self._client_secret = client_secret

    def _as(self, token: str) -> GitHub[TokenAuthStrategy]:
        return GitHub(TokenAuthStrategy(token), config=self.app._config)

    async def person(self, code: str, redirect_uri: str) -> Person:
        """Trade the callback's code for the person it signs in (SignInRefused when GitHub
        says the code is no good)."""
        from githubkit import OAuthWebAuthStrategy

        strategy = OAuthWebAuthStrategy(self.client_id, self._client_secret, code, redirect_uri)
        # Sent without credentials: a client authenticated by the web-flow strategy itself
        # would trade the code once for its own request, and the exchange's then fails.
        github = GitHub(UnauthAuthStrategy(), config=self.app._config)
        try:
            token = (await strategy.async_exchange_token(github)).token
        except AuthExpiredError as exc:
            said = exc.args[1] if len(exc.args) > 1 and isinstance(exc.args[1], dict) else {}
            reason = str(said.get("error", "no token"))[:60]
            raise SignInRefused(
                f"GitHub did not accept the sign-in ({reason}); try again"
            ) from None
        except RequestError as exc:
            raise translated(exc) from None
        if not token:
            raise SignInRefused("GitHub did not accept the sign-in; try again")
        as_person = self._as(token)  # held: githubkit's namespaces keep only a weak reference
        user = json_of((await answer(as_person.rest.users.async_get_authenticated())).raw_response)
        if not isinstance(user, dict) or not isinstance(user.get("login"), str):
            raise GitHubError(200, "GET /user: no login in the answer")
        return Person(login=str(user["login"]), id=int(user.get("id") or 0), token=token)

    async def first_grant(self, rules: tuple[Rule, ...], person: Person) -> str | None:
        """The grant of the first rule that lets `person` in, or None."""
        for rule in rules:
            if rule.kind == "repo-admins":
                repo = await self._administered(person)
                if repo is not None:
                    return grant_of(rule, repo)
            elif await self._member(rule, person.login):
                return grant_of(rule)
        return None

    async def holds(self, grant: str, login: str) -> bool:
        """Whether the rule that let `login` in still does."""
        parsed = parse_grant(grant)
        if parsed is None:
            return False
        rule, repo = parsed
        if rule.kind == "repo-admins":
            assert repo is not None
            return await self._admin_of(repo, login)
        return await self._member(rule, login)

    # -- the checks ------------------------------------------------------------------------

    async def _org_github(self, org: str) -> GitHub[TokenAuthStrategy] | None:
        """githubkit with a token of the App's installation on `org`; None when the App is
        not installed there."""
        try:
            found = await answer(self.app.github.rest.apps.async_get_org_installation(org))
        except NotFound:
            return None
        installation_id = int(json_of(found.raw_response)["id"])
        return self._as(await self.app.installation_token(installation_id))

    async def _member(self, rule: Rule, login: str) -> bool:
        github = await self._org_github(rule.org)
        if github is None:
            return False
        try:
            if rule.kind == "org":
                await answer(github.rest.orgs.async_check_membership_for_user(rule.org, login))
                return True
            said = await answer(
                github.rest.teams.async_get_membership_for_user_in_org(rule.org, rule.team, login)
            )
        except NotFound:
            return False
        return bool(json_of(said.raw_response).get("state") == "active")

    async def _administered(self, person: Person) -> str | None:
        """A repository of the App's that `person` administers (their own token says which
        installations and repositories they reach, with their permissions)."""
        as_person = self._as(person.token)  # held while its namespaces are used
        rest = as_person.rest
        installations: Pages[Any] = Pages(
            rest,
            rest.apps.async_list_installations_for_authenticated_user,
            _items("installations"),
            per_page=100,
        )
        for installation in await installations.collect():
            found = Installation.model_validate(installation)
            repositories: Pages[Any] = Pages(
                rest,
                rest.apps.async_list_installation_repos_for_authenticated_user,
                _items("repositories"),
                found.id,
                per_page=100,
            )
            for repo in await repositories.collect(limit=MAX_REPOSITORIES):
                if isinstance(repo, dict) and (repo.get("permissions") or {}).get("admin") is True:
                    return str(repo["full_name"])
        return None

    async def _admin_of(self, full_name: str, login: str) -> bool:
        owner, _, name = full_name.partition("/")
        try:
            found = await answer(self.app.github.rest.apps.async_get_repo_installation(owner, name))
        except NotFound:
            return False
        installation_id = int(json_of(found.raw_response)["id"])
        # Asked afresh: a role taken away must not outlive the check in the client's cache.
        self.app.permissions.forget(installation_id, frozenset([full_name.lower()]))
        client = self.app.installation(installation_id, owner, name)
        return await client.get_collaborator_permission(login) == "admin"


def _items(key: str) -> Any:
    """githubkit's `map_func` for a page whose list is under `key`, as raw JSON objects."""

    def items(response: Any) -> list[Any]:
        data = json_of(response.raw_response)
        page = data.get(key) if isinstance(data, dict) else None
        if not isinstance(page, list):
            raise GitHubError(200, f"GET {response.raw_request.url.path}: expected a list")
        return page

    return items
