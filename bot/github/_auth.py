"""App authentication as githubkit auth strategies: the App JWT and narrowed installation tokens.

githubkit's `AppAuthStrategy` picks the App JWT for the App's own routes (`/app/...`); it is
subclassed to sign with a key parsed once and the client's clock (githubkit 0.16.1 re-parses
the PEM and reads the wall clock). Installation requests use a strategy of ours, not
`AppInstallationAuthStrategy` (which mints and caches tokens itself): the token comes from
`GitHubApp`'s cache (one request per key at a time, dropped when access is revoked) and is
dropped and requested again once when GitHub answers 401 with it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Generator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import httpx
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from githubkit import AppAuthStrategy
from githubkit.auth.app import AppAuth
from githubkit.auth.base import BaseAuthStrategy

if TYPE_CHECKING:
    from githubkit import GitHubCore

JWT_BACKDATE_S = 60
"""`iat` is set this far in the past to absorb clock drift between us and GitHub."""
JWT_LIFETIME_S = 9 * 60
"""GitHub accepts at most 10 minutes after `iat`'s real time; 9 keeps a margin."""
JWT_REUSE_S = 5 * 60
"""A signed JWT is reused for this long (it stays valid for 9 minutes)."""


class AppJwt:
    """Signs App JWTs with a key parsed once (parsing validates it, which is slow: ~50 ms),
    reusing each for `JWT_REUSE_S`."""

    def __init__(self, app_id: int | str, private_key_pem: str) -> None:
        self.app_id = app_id
        try:
            key = serialization.load_pem_private_key(private_key_pem.encode(), password=None)
        except (ValueError, TypeError) as exc:
            raise ValueError(
                "the App private key cannot be read as an unencrypted PEM key; set "
                "BOT_PRIVATE_KEY_PATH to the .pem file GitHub gave you, or run `bot setup`"
            ) from exc
        if not isinstance(key, RSAPrivateKey):
            raise ValueError("the App private key is not an RSA key; GitHub Apps use RSA keys")
        self._key = key
        self._cached: tuple[float, str] | None = None

    def token(self, now: float) -> str:
        """The App JWT GitHub expects (RS256), signed anew once `JWT_REUSE_S` have passed."""
        if self._cached is not None and 0 <= now - self._cached[0] < JWT_REUSE_S:
            return self._cached[1]
        issued = int(now) - JWT_BACKDATE_S
        claims = {"iat": issued, "exp": int(now) + JWT_LIFETIME_S, "iss": str(self.app_id)}
        signed = jwt.encode(claims, self._key, algorithm="RS256")
        self._cached = (now, signed)
        return signed

    def __repr__(self) -> str:
        return f"AppJwt(app_id={self.app_id})"


def parse_github_time(value: str) -> float:
    """`2026-01-01T00:00:00Z` -> epoch seconds."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


@dataclass
class _JwtFlow(AppAuth):
    sign: Callable[[], str] = field(kw_only=True, repr=False)

    async def aget_jwt(self) -> str:
        return self.sign()


@dataclass
class AppJwtStrategy(AppAuthStrategy):
    """githubkit's App strategy with our signer; `private_key` stays empty (never kept twice)."""

    sign: Callable[[], str] = field(kw_only=True, repr=False)

    def get_auth_flow(self, github: GitHubCore[Any]) -> httpx.Auth:
        return _JwtFlow(github, self.app_id, "", sign=self.sign)


@dataclass
class InstallationTokenStrategy(BaseAuthStrategy, httpx.Auth):
    """Every request with the token from `token()`; on a 401, `refused(token)` is told and the
    request is sent once more with a new one. Its own auth flow (async only)."""

    token: Callable[[], Awaitable[str]] = field(repr=False)
    refused: Callable[[str], None] = field(repr=False)

    def get_auth_flow(self, github: GitHubCore[Any]) -> httpx.Auth:
        return self

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response]:
        raise RuntimeError("the installation client is async only")

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        token = await self.token()
        request.headers["Authorization"] = f"token {token}"
        response = yield request
        if response.status_code == 401:
            self.refused(token)
            request.headers["Authorization"] = f"token {await self.token()}"
            yield request
