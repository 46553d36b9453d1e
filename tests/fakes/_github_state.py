"""The fake GitHub's records: calls, faults, tokens, installations, repositories; JSON helpers."""

from __future__ import annotations

import base64
import functools
import json
import re
import time
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.requests import Request

DOCS = "https://docs.github.com/rest"


def iso(ts: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if ts is None else ts, UTC).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )


def user_json(login: str, kind: str | None = None) -> dict[str, Any]:
    kind = kind or ("Bot" if login.endswith("[bot]") else "User")
    uid = zlib.crc32(login.encode()) % 10_000_000
    return {
        "login": login,
        "id": uid,
        "node_id": base64.b64encode(f"U_{uid}".encode()).decode(),
        "avatar_url": f"https://avatars.githubusercontent.com/u/{uid}?v=4",
        "gravatar_id": "",
        "url": f"https://api.github.com/users/{login}",
        "html_url": f"https://github.com/{login}",
        **{
            f"{name}_url": f"https://api.github.com/users/{login}/{path}"
            for name, path in _USER_LINKS.items()
        },
        "type": kind,
        "site_admin": False,
    }


_USER_LINKS = {
    "followers": "followers",
    "following": "following{/other_user}",
    "gists": "gists{/gist_id}",
    "starred": "starred{/owner}{/repo}",
    "subscriptions": "subscriptions",
    "organizations": "orgs",
    "repos": "repos",
    "events": "events{/privacy}",
    "received_events": "received_events",
}
_REPO_LINKS = {
    "forks": "forks",
    "keys": "keys{/key_id}",
    "collaborators": "collaborators{/collaborator}",
    "teams": "teams",
    "hooks": "hooks",
    "issue_events": "issues/events{/number}",
    "events": "events",
    "assignees": "assignees{/user}",
    "branches": "branches{/branch}",
    "tags": "tags",
    "blobs": "git/blobs{/sha}",
    "git_tags": "git/tags{/sha}",
    "git_refs": "git/refs{/sha}",
    "trees": "git/trees{/sha}",
    "statuses": "statuses/{sha}",
    "languages": "languages",
    "stargazers": "stargazers",
    "contributors": "contributors",
    "subscribers": "subscribers",
    "subscription": "subscription",
    "commits": "commits{/sha}",
    "git_commits": "git/commits{/sha}",
    "comments": "comments{/number}",
    "issue_comment": "issues/comments{/number}",
    "contents": "contents/{+path}",
    "compare": "compare/{base}...{head}",
    "merges": "merges",
    "archive": "{archive_format}{/ref}",
    "downloads": "downloads",
    "issues": "issues{/number}",
    "pulls": "pulls{/number}",
    "milestones": "milestones{/number}",
    "notifications": "notifications{?since,all,participating}",
    "labels": "labels{/name}",
    "releases": "releases{/id}",
    "deployments": "deployments",
}


def repo_links(full_name: str) -> dict[str, str]:
    """The `*_url` templates GitHub puts on a repository object."""
    api = f"https://api.github.com/repos/{full_name}"
    return {f"{name}_url": f"{api}/{path}" for name, path in _REPO_LINKS.items()}


def new_private_key_pem() -> str:
    """A fresh RSA key pair's private half, PEM (for a test that needs a second, wrong key)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


@functools.cache
def shared_private_key_pem() -> str:
    """The App key every fake uses unless given one (generating keys is slow)."""
    return new_private_key_pem()


@functools.cache
def public_key_of(private_key_pem: str) -> Any:
    return serialization.load_pem_private_key(private_key_pem.encode(), password=None).public_key()


class FakeError(Exception):
    """An error answer: GitHub's `message`, and for a 422 its `errors` list when it sends one."""

    def __init__(
        self,
        status: int,
        message: str,
        errors: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.status = status
        self.message = message
        self.errors = errors
        self.headers = headers or {}


def invalid(message: str | None = None, *, field: str | None = None) -> FakeError:
    """GitHub's 422 `Validation Failed`: a custom message, or a field that is invalid."""
    error: dict[str, Any] = {"resource": "PullRequest", "code": "custom", "message": message}
    if field is not None:
        error = {"resource": "PullRequest", "field": field, "code": "invalid"}
    return FakeError(422, "Validation Failed", [error])


@dataclass
class Call:
    """One request the fake received. `headers` exclude Authorization; `auth` says what came."""

    method: str
    path: str
    query: dict[str, str]
    json: Any
    headers: dict[str, str]
    auth: str | None
    at: float
    status: int = 0
    installation_id: int | None = None


@dataclass
class Fault:
    method: str
    pattern: str
    status: int
    remaining: int
    headers: dict[str, str]
    body: Any
    raw: bytes | None = None
    after_apply: bool = False


@dataclass(frozen=True)
class Push:
    """One ref a push changed on a repository of the fake (`old`/`new` all zeros: none)."""

    repo: str
    ref: str
    old: str
    new: str


@dataclass
class Token:
    value: str
    installation_id: int
    repos: frozenset[str] | None
    permissions: dict[str, str]
    expires_at: float
    revoked: bool = False


@dataclass
class Installation:
    id: int
    account: str
    repos: list[str]
    suspended: bool = False


@dataclass
class FakeRepo:
    id: int
    owner: str
    name: str
    git_dir: Path
    default_branch: str
    private: bool
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    pull_diffs: dict[int, str] = field(default_factory=dict)
    pull_files: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    review_comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    reviews: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    permissions: dict[str, str] = field(default_factory=dict)
    protected: set[str] = field(default_factory=set)  # branches besides the default one
    labels: dict[str, dict[str, Any]] = field(default_factory=dict)  # by lower-case name
    labels_created: list[str] = field(default_factory=list)  # by adding them to an issue
    next_number: int = 1

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


def clone_url(request: Request, full_name: str) -> str:
    return f"{str(request.base_url).rstrip('/')}/{full_name}.git"


def parse_json(body: bytes) -> Any:
    if not body:
        return None
    try:
        return json.loads(body)
    except ValueError:
        raise FakeError(400, "Problems parsing JSON") from None


_SHA = re.compile(r"^[0-9a-f]{40}$")


def is_sha(ref: str) -> bool:
    return bool(_SHA.match(ref))
