"""Errors raised by the GitHub client, split by what the caller should do next."""

from __future__ import annotations

from datetime import UTC, datetime


class GitHubError(Exception):
    """GitHub answered with an error (or could not be reached: `status` 0).

    `message` is GitHub's own `message` field when it sent one; `docs_url` its
    `documentation_url`. Never carries a token.
    """

    def __init__(self, status: int, message: str = "", docs_url: str | None = None) -> None:
        self.status = status
        self.message = message or ("unreachable" if status == 0 else f"HTTP {status}")
        self.docs_url = docs_url
        super().__init__(str(self))

    def __str__(self) -> str:
        text = f"GitHub API error {self.status}: {self.message}"
        return f"{text} (see {self.docs_url})" if self.docs_url else text

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status}, message={self.message!r})"


class NotFound(GitHubError):
    """404: the resource does not exist or the installation may not see it."""


class AuthError(GitHubError):
    """401 that a fresh token did not cure: check BOT_APP_ID and the private key."""


class AccessRevoked(AuthError):
    """The app lost access to the installation or repository (uninstalled, suspended, or the
    repository taken out of it): nothing is requested with its tokens until access is back."""


class RetryableError(GitHubError):
    """A transient failure that outlived the client's own retries: re-queue the job."""


class RateLimited(RetryableError):
    """GitHub asked us to wait longer than the client may sleep inside one run.

    `retry_at` is when the request may be tried again; the job queue should
    schedule the job for then instead of holding a worker.
    """

    def __init__(self, retry_at: float, message: str = "rate limited") -> None:
        self.retry_at = retry_at
        when = datetime.fromtimestamp(retry_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        super().__init__(429, f"{message}; retry after {when}")
