"""Lenient models of the GitHub REST objects the bot reads: known fields typed, the rest kept.

GitHub adds fields over time and some are absent on older objects; these models
accept any extra keys and default what the bot can live without, so drifted
responses never fail a run. `raw` gives every field as plain data (unmodelled
ones included, missing modelled ones filled with their defaults) for the rare
reader that needs a field not modelled here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasPath, BaseModel, ConfigDict, Field, field_validator

Permission = Literal["admin", "maintain", "write", "triage", "read", "none"]
PERMISSIONS: tuple[str, ...] = ("admin", "maintain", "write", "triage", "read", "none")


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    @property
    def raw(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True)


class User(_Lenient):
    login: str
    id: int = 0
    type: str = "User"
    html_url: str = ""

    @property
    def is_bot(self) -> bool:
        return self.type == "Bot" or self.login.endswith("[bot]")


class Label(_Lenient):
    name: str


class Repository(_Lenient):
    id: int
    name: str
    full_name: str
    private: bool = False
    default_branch: str = "main"
    html_url: str = ""
    owner: User | None = None
    fork: bool = False


class ContentEntry(_Lenient):
    """What the contents API says of a path: a file (its base64 `content` when under 1 MB,
    else `encoding: none`), a directory's entry, or a symbolic link (`target`)."""

    type: str
    name: str = ""
    path: str = ""
    size: int = 0
    sha: str = ""
    encoding: str | None = None
    content: str | None = None
    target: str | None = None


class _Authored(_Lenient):
    """What someone wrote on GitHub: an issue, a pull request, a review, a comment."""

    id: int
    body: str | None = None
    user: User | None = None
    html_url: str = ""
    author_association: str = "NONE"


class Issue(_Authored):
    """An issue, or the issue side of a pull request (then `pull_request` is set)."""

    number: int
    title: str = ""
    state: str = "open"
    labels: list[Label] = Field(default_factory=list)
    comments: int = 0
    pull_request: dict[str, Any] | None = None
    created_at: str | None = None
    updated_at: str | None = None

    @property
    def is_pull_request(self) -> bool:
        return self.pull_request is not None


class IssueComment(_Authored):
    created_at: str | None = None
    updated_at: str | None = None


class GitRef(_Lenient):
    """One side of a pull request (`head` or `base`)."""

    ref: str
    sha: str
    label: str = ""
    repo: Repository | None = None


class PullRequest(_Authored):
    number: int
    title: str = ""
    state: str = "open"
    draft: bool = False
    merged: bool = False
    head: GitRef
    base: GitRef
    additions: int = 0
    deletions: int = 0


class PullFile(_Lenient):
    filename: str
    status: str = "modified"
    additions: int = 0
    deletions: int = 0
    changes: int = 0
    patch: str | None = None
    previous_filename: str | None = None
    sha: str | None = None


class ReviewComment(_Authored):
    body: str = ""
    path: str = ""
    line: int | None = None
    side: str | None = None
    commit_id: str = ""
    in_reply_to_id: int | None = None


class ThreadComment(_Lenient):
    """A comment of a review thread, as GraphQL returns it (`author { login }`), with the
    logins of its 👎 reactions (`reactions { nodes { user { login } } }`)."""

    database_id: int | None = Field(default=None, alias="databaseId")
    url: str = ""
    author: str | None = Field(default=None, validation_alias=AliasPath("author", "login"))
    body: str = ""
    thumbs_down_by: tuple[str, ...] = Field(
        default=(), validation_alias=AliasPath("reactions", "nodes")
    )

    @field_validator("thumbs_down_by", mode="before")
    @classmethod
    def _logins(cls, nodes: object) -> object:
        if not isinstance(nodes, list):
            return nodes
        users = [node.get("user") for node in nodes if isinstance(node, dict)]
        return tuple(
            user["login"] for user in users if isinstance(user, dict) and user.get("login")
        )


class ReviewThread(_Lenient):
    """A pull request review thread (GraphQL `PullRequestReviewThread`)."""

    id: str
    is_resolved: bool = Field(default=False, alias="isResolved")
    is_outdated: bool = Field(default=False, alias="isOutdated")
    resolved_by: str | None = Field(default=None, validation_alias=AliasPath("resolvedBy", "login"))
    comments: tuple[ThreadComment, ...] = Field(
        default=(), validation_alias=AliasPath("comments", "nodes")
    )

    @property
    def first_comment_id(self) -> int | None:
        return self.comments[0].database_id if self.comments else None


class Review(_Authored):
    state: str = ""
    commit_id: str | None = None


class CheckRunOutput(_Lenient):
    title: str | None = None
    summary: str | None = None
    text: str | None = None
    annotations_count: int = 0


class CheckApp(_Lenient):
    """The App a check run belongs to (absent on very old runs)."""

    id: int | None = None
    slug: str | None = None


class CheckRun(_Lenient):
    id: int
    name: str
    head_sha: str
    status: str = "queued"
    conclusion: str | None = None
    external_id: str | None = None
    html_url: str | None = None
    output: CheckRunOutput | None = None
    app: CheckApp | None = None


class AppInfo(_Lenient):
    """`GET /app`: the App this private key belongs to."""

    id: int
    slug: str
    name: str = ""
    owner: User | None = None
    html_url: str = ""
    permissions: dict[str, str] = Field(default_factory=dict)
    events: list[str] = Field(default_factory=list)


class Installation(_Lenient):
    id: int
    account: User | None = None
    repository_selection: str = "all"
    app_id: int | None = None
    permissions: dict[str, str] = Field(default_factory=dict)


class ManifestConversion(AppInfo):
    """`POST /app-manifests/{code}/conversions`: the new App, with its secrets."""

    pem: str = Field(repr=False)
    webhook_secret: str | None = Field(default=None, repr=False)
    client_id: str | None = None
    client_secret: str | None = Field(default=None, repr=False)


class HookDelivery(_Lenient):
    """One attempt of GitHub to deliver a webhook to the App (`GET /app/hook/deliveries`).

    Every attempt of one event shares its `guid` (the `X-GitHub-Delivery` header); a
    redelivery is another attempt, with `redelivery` set.
    """

    id: int
    guid: str
    delivered_at: str = ""
    redelivery: bool = False
    status: str = ""
    status_code: int = 0
    event: str = ""
    action: str | None = None
    installation_id: int | None = None


class CheckAnnotation(_Lenient):
    """One annotation of a check run (`GET /repos/{o}/{r}/check-runs/{id}/annotations`)."""

    path: str = ""
    start_line: int = 0
    end_line: int = 0
    annotation_level: str | None = None
    title: str | None = None
    message: str = ""


class CommitStatus(_Lenient):
    """One commit status, as the combined status lists the newest per context."""

    context: str = "default"
    state: str = "pending"
    description: str | None = None
    creator: User | None = None
