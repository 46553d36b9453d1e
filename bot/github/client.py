"""The GitHub App client: App-level calls with the JWT, and one installation's calls on one repository.

    app = GitHubApp.from_settings(settings)            # or GitHubApp(app_id, pem, api_url=...)
    slug = await app.slug()                            # BOT_APP_SLUG, else learned from GET /app
    gh = app.installation(installation_id, "octo", "hello")
    issue = await gh.get_issue(7)
    comment = await gh.create_issue_comment(7, "hello")
    await app.aclose()

Authentication is githubkit's auth strategies (`bot.github._auth`): the App JWT for the App's
routes, and installation tokens narrowed to the client's single repository (and optionally to
fewer `permissions`), cached until 5 minutes before they expire; `token()` gives the same token
to git (see `bot.git.checkout`). Once GitHub says the app lost an installation or repositories
(`revoke_access`), nothing is requested for them (`AccessRevoked`) until `restore_access`.

Every call is one of githubkit's typed REST methods (its body checked against GitHub's schema
before it is sent), read into our lenient models (`bot.github._pages`); retries, rate limits,
write spacing and the delivery header are our transport under it (`bot.github._retry`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import anyio
import httpx
from githubkit import GitHub
from githubkit.config import get_config
from githubkit.utils import UNSET
from pydantic import ValidationError

from bot.github._auth import AppJwt, AppJwtStrategy, InstallationTokenStrategy, parse_github_time
from bot.github._pages import answer, listed, model_of
from bot.github._retry import USER_AGENT, Guard, RetryPolicy, Sender
from bot.github.errors import (
    AccessRevoked,
    AuthError,
    GitHubError,
    NotFound,
    RateLimited,
    RetryableError,
)
from bot.github.installation import LABELS_TTL_S, PERMISSION_TTL_S, InstallationClient
from bot.github.models import AppInfo, HookDelivery, Installation, Label, Permission
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
K = TypeVar("K", tuple[int, str], tuple[int, str, str])
V = TypeVar("V")

PERMISSION_CACHE_SIZE = 4096
"""Past this many remembered permissions, expired ones are dropped."""
LABELS_CACHE_SIZE = 1024
"""Past this many remembered label lists, expired ones are dropped."""
TOKEN_CACHE_SIZE = 1024
"""Past this many cached installation tokens, expired ones are dropped."""
TOKEN_REFRESH_MARGIN_S = 5 * 60
"""A cached installation token is replaced this long before it expires."""

TokenKey = tuple[int, str, str]
"""(installation id, repository name or "", permissions as `name=level,...` or "")."""


def token_key(
    installation_id: int, repo: str | None, permissions: Mapping[str, str] | None
) -> TokenKey:
    perms = ",".join(f"{k}={v}" for k, v in sorted((permissions or {}).items()))
    return (installation_id, repo or "", perms)


class Remembered(Generic[K, V]):
    """Values kept for `ttl` seconds (or `until` a time given to `put`) under keys that start
    (installation id, name); past `size` entries, the expired ones are dropped."""

    def __init__(self, ttl: float, size: int, clock: Callable[[], float]) -> None:
        self.ttl = ttl
        self.size = size
        self._clock = clock
        self._items: dict[K, tuple[float, V]] = {}  # key -> (expires at, value)

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: K) -> V | None:
        hit = self._items.get(key)
        return hit[1] if hit is not None and self._clock() < hit[0] else None

    def put(self, key: K, value: V, *, until: float | None = None) -> None:
        now = self._clock()
        if len(self._items) >= self.size:
            self._items = {k: hit for k, hit in self._items.items() if now < hit[0]}
        self._items[key] = (now + self.ttl if until is None else until, value)

    def drop(self, key: K, value: V | None = None) -> None:
        """Forget `key` (only while it holds `value`, when that is given)."""
        if value is None or self.get(key) == value:
            self._items.pop(key, None)

    def forget(self, installation_id: int, full_names: frozenset[str] | None) -> None:
        """Drop the installation's entries: all, or those of `full_names` (lower case)."""
        self._items = {
            key: hit
            for key, hit in self._items.items()
            if key[0] != installation_id
            or (full_names is not None and key[1].lower() not in full_names)
        }


class GitHubApp:
    """App-level access (JWT) and the factory of installation clients; share one per process."""

    def __init__(
        self,
        app_id: int,
        private_key_pem: str | None,
        *,
        api_url: str = "https://api.github.com",
        app_slug: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        policy: RetryPolicy | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        """`app_slug` (BOT_APP_SLUG) overrides the slug from `GET /app`. Without a private key
        there is no App JWT (see `TokenApp`).

        `transport` replaces the network (an `httpx.ASGITransport` in tests); `policy`
        sets retry counts, the rate-limit sleep cap and the spacing between writes.
        """
        self.app_id = app_id
        self._jwt = None if private_key_pem is None else AppJwt(app_id, private_key_pem)
        self._slug = app_slug
        self._clock = clock
        self.sender = Sender(policy or RetryPolicy(), transport=transport, clock=clock, sleep=sleep)
        # githubkit's own retries and HTTP cache are off: the transport keeps our rules.
        self._config = get_config(
            base_url=api_url,
            user_agent=USER_AGENT,
            timeout=self.sender.policy.timeout_s,
            # Proxy settings from the environment apply to the network, not to a given transport.
            trust_env=transport is None,
            async_transport=self.sender.transport(),
            http_cache=False,
            auto_retry=False,
        )
        self.github: GitHub[AppJwtStrategy] = GitHub(
            AppJwtStrategy(app_id, "", sign=self.jwt), config=self._config
        )
        # Keyed (installation id, repository name, ...); its entries expire near the token's.
        self._tokens: Remembered[TokenKey, str] = Remembered(0.0, TOKEN_CACHE_SIZE, clock)
        self._token_locks: dict[TokenKey, anyio.Lock] = {}
        # Shared by the installation clients, keyed (installation id, full name, ...).
        self.permissions: Remembered[tuple[int, str, str], Permission] = Remembered(
            PERMISSION_TTL_S, PERMISSION_CACHE_SIZE, clock
        )
        self.labels: Remembered[tuple[int, str], tuple[Label, ...]] = Remembered(
            LABELS_TTL_S, LABELS_CACHE_SIZE, clock
        )
        # installation id -> None (all of it) or the lower-case full names it lost
        self._revoked: dict[int, frozenset[str] | None] = {}

    @classmethod
    def from_settings(cls, settings: Settings, **kwargs: Any) -> GitHubApp:
        """Build from BOT_* settings; `SettingsError`/`ValueError` name what is missing."""
        pem = settings.private_key_pem()
        if settings.app_id is None or pem is None:
            raise ValueError(
                "GitHub App credentials are missing (BOT_APP_ID and BOT_PRIVATE_KEY_PATH); "
                "run `bot setup` to create the App"
            )
        kwargs.setdefault("app_slug", settings.app_slug)
        kwargs.setdefault("policy", RetryPolicy(mutation_interval_s=settings.github_write_interval))
        return cls(settings.app_id, pem, api_url=settings.github_api_url, **kwargs)

    async def __aenter__(self) -> GitHubApp:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.sender.aclose()

    # -- App level (JWT) -------------------------------------------------------------------

    def jwt(self) -> str:
        """An App JWT (re-signed every 5 minutes). A secret: only for an Authorization header."""
        if self._jwt is None:
            raise AuthError(401, "no App private key: this client cannot call the App's routes")
        return self._jwt.token(self._clock())

    def installation_github(
        self,
        installation_id: int,
        repo: str,
        permissions: Mapping[str, str] | None,
        token: Callable[[], Awaitable[str]],
        guard: Guard,
    ) -> GitHub[InstallationTokenStrategy]:
        """githubkit for one repository of one installation, its token from `token()`."""

        def refused(stale: str) -> None:
            log.warning(
                "installation token refused, requesting a new one",
                extra={"installation_id": installation_id, "repo": repo},
            )
            self.forget_token(installation_id, repo, permissions, refused=stale)

        strategy = InstallationTokenStrategy(token, refused)
        config = dataclasses.replace(
            self._config, async_transport=self.sender.transport(installation_id, guard)
        )
        return GitHub(strategy, config=config)

    async def get_app(self) -> AppInfo:
        """`GET /app`: proves the credentials work and names the App."""
        info = model_of(AppInfo, await answer(self.github.rest.apps.async_get_authenticated()))
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
        rest = self.github.rest
        return await listed(rest, rest.apps.async_list_installations, Installation)

    async def hook_deliveries(self, *, since: float) -> list[HookDelivery]:
        """`GET /app/hook/deliveries`: the App's delivery attempts since `since` (epoch
        seconds), newest first; pages are read until one reaches back past `since`."""
        rest = self.github.rest
        request = rest.apps.async_list_webhook_deliveries
        return await listed(rest, request, HookDelivery, keep=lambda d: _delivered_at(d) >= since)

    async def redeliver(self, delivery_id: int) -> None:
        """`POST /app/hook/deliveries/{id}/attempts`: GitHub sends that delivery again, with
        its GUID (a 202; GitHub's 404 or 422 for an id it does not know or will not resend)."""
        await answer(self.github.rest.apps.async_redeliver_webhook_delivery(int(delivery_id)))

    # -- losing and regaining an installation ---------------------------------------------------

    def revoke_access(self, installation_id: int, repos: Collection[str] | None = None) -> None:
        """GitHub said the app lost the installation (`repos` None) or those repositories of it
        (full names): drop what is cached for them and request no token for them any more."""
        names = None if repos is None else frozenset(r.lower() for r in repos)
        current = self._revoked.get(installation_id, frozenset())
        self._revoked[installation_id] = (
            None if names is None or current is None else current | names
        )
        bare = None if names is None else frozenset(n.rsplit("/", 1)[-1] for n in names)
        self._tokens.forget(installation_id, bare)
        self.permissions.forget(installation_id, names)
        self.labels.forget(installation_id, names)
        log.info(
            "installation access revoked; cached tokens dropped",
            extra={"installation_id": installation_id, "repos": sorted(names or ["*"])},
        )

    def restore_access(self, installation_id: int, repos: Collection[str] | None = None) -> None:
        """GitHub said access came back: to the whole installation (`repos` None: unsuspended)
        or to those repositories (added to it; a suspended installation stays revoked)."""
        lost = self._revoked.pop(installation_id, frozenset())
        if repos is not None:
            left = None if lost is None else lost - {r.lower() for r in repos}
            if left is None or left:  # still lost: all of it (suspended) or other repositories
                self._revoked[installation_id] = left

    def check_access(self, installation_id: int, full_name: str | None = None) -> None:
        """Raise AccessRevoked when the installation, or its repository `full_name`, is lost."""
        lost = self._revoked.get(installation_id, frozenset())
        if lost is None:
            raise AccessRevoked(
                403, f"the app no longer has access to installation {installation_id}"
            )
        if full_name is not None and full_name.lower() in lost:
            raise AccessRevoked(403, f"the app no longer has access to {full_name}")

    async def installation_token(
        self,
        installation_id: int,
        repo: str | None = None,
        permissions: Mapping[str, str] | None = None,
    ) -> str:
        """A token for one installation, narrowed to `repo` when given; cached until near expiry."""
        self.check_access(installation_id)
        key = token_key(installation_id, repo, permissions)
        cached = self._tokens.get(key)
        if cached is not None:
            return cached
        lock = self._token_locks.setdefault(key, anyio.Lock())
        async with lock:
            cached = self._tokens.get(key)
            if cached is not None:
                return cached
            minted = await answer(
                self.github.rest.apps.async_create_installation_access_token(
                    installation_id,
                    repositories=[repo] if repo else UNSET,
                    permissions=cast(Any, dict(permissions)) if permissions else UNSET,
                )
            )
            try:  # githubkit's model parses the recorded answer: read through it
                issued = minted.parsed_data
            except ValidationError as exc:
                raise GitHubError(
                    200, f"unexpected installation token from GitHub: {exc}"
                ) from None
            self.check_access(installation_id)  # revoked while the token was on its way
            expires_at = parse_github_time(str(issued.expires_at))
            self._tokens.put(key, issued.token, until=expires_at - TOKEN_REFRESH_MARGIN_S)
            log.info(
                "installation token issued",
                extra={"installation_id": installation_id, "repo": repo or "*"},
            )
            return issued.token

    def forget_token(
        self,
        installation_id: int,
        repo: str | None = None,
        permissions: Mapping[str, str] | None = None,
        *,
        refused: str | None = None,
    ) -> None:
        """Drop a cached token after GitHub refused it (only that token, when `refused` is given:
        a concurrent request may already have cached its replacement)."""
        self._tokens.drop(token_key(installation_id, repo, permissions), refused)

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


class TokenApp(GitHubApp):
    """The client on one token it is given rather than minted: a GitHub Actions job's
    `GITHUB_TOKEN`, or an installation token the workflow made (`bot action`). There is no App
    JWT, so the App's own routes are refused; every installation id gets that token (the job's
    repository is the only one it opens), and a 401 is final (nothing can mint another)."""

    def __init__(self, token: str, *, app_slug: str, **kwargs: Any) -> None:
        super().__init__(0, None, app_slug=app_slug, **kwargs)
        self._given = token

    async def get_app(self) -> AppInfo:
        raise AuthError(401, "a job's token cannot read GET /app")

    async def installation_token(
        self,
        installation_id: int,
        repo: str | None = None,
        permissions: Mapping[str, str] | None = None,
    ) -> str:
        self.check_access(installation_id)
        return self._given

    def __repr__(self) -> str:
        return f"TokenApp(slug={self._slug!r}, token=***)"


def _delivered_at(item: HookDelivery) -> float:
    """When GitHub made the attempt; an attempt without a readable time counts as new."""
    try:
        return parse_github_time(item.delivered_at)
    except ValueError:
        return float("inf")
