"""App authentication: the RS256 App JWT and the cache of narrowed installation tokens."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import jwt

JWT_BACKDATE_S = 60
"""`iat` is set this far in the past to absorb clock drift between us and GitHub."""
JWT_LIFETIME_S = 9 * 60
"""GitHub accepts at most 10 minutes after `iat`'s real time; 9 keeps a margin."""
TOKEN_REFRESH_MARGIN_S = 5 * 60
"""A cached installation token is replaced this long before it expires."""


def make_app_jwt(app_id: int | str, private_key_pem: str, now: float) -> str:
    """The App JWT GitHub expects: RS256, `iss` = app id, `iat` backdated, `exp` within 10 min."""
    issued = int(now) - JWT_BACKDATE_S
    claims = {"iat": issued, "exp": int(now) + JWT_LIFETIME_S, "iss": str(app_id)}
    return jwt.encode(claims, private_key_pem, algorithm="RS256")


def parse_github_time(value: str) -> float:
    """`2026-01-01T00:00:00Z` -> epoch seconds."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


@dataclass(frozen=True, slots=True)
class CachedToken:
    """An installation token and when it stops being usable for us."""

    token: str
    expires_at: float

    def fresh(self, now: float) -> bool:
        return now < self.expires_at - TOKEN_REFRESH_MARGIN_S

    def __repr__(self) -> str:
        return f"CachedToken(token=***, expires_at={self.expires_at})"


TokenKey = tuple[int, str]
"""(installation id, repository name or "" for an unnarrowed token)."""
