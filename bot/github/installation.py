"""One installation's calls on one repository: issues, comments, labels, pulls, reviews, checks.

Built by `GitHubApp.installation(installation_id, owner, repo)`; see `bot.github.client`
for authentication, retries and errors. Each call is githubkit's REST method for it; path
parameters it puts into the URL as given are quoted here (a file path, a ref, a login).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast
from urllib.parse import quote

import httpx
from githubkit import Response
from githubkit.exception import GraphQLFailed, RequestError
from githubkit.utils import UNSET
from pydantic import BaseModel, ValidationError

from bot.github._pages import (
    MAX_PAGES,
    answer,
    items_of,
    json_of,
    listed,
    model_of,
    models_of,
    translated,
)
from bot.github._retry import call_options
from bot.github.errors import GitHubError, NotFound, RateLimited, RetryableError
from bot.github.models import (
    PERMISSIONS,
    CheckAnnotation,
    CheckRun,
    CommitStatus,
    ContentEntry,
    Issue,
    IssueComment,
    Label,
    Permission,
    PullFile,
    PullRequest,
    Repository,
    Review,
    ReviewComment,
    ReviewThread,
)
from bot.log import get_logger
from bot.store.queue.fence import check_fence

if TYPE_CHECKING:
    from bot.github.client import GitHubApp

log = get_logger(__name__)
M = TypeVar("M", bound=BaseModel)
P = TypeVar("P", IssueComment, Review, ReviewComment)

_NAME = re.compile(r"^[A-Za-z0-9._-]{1,100}$")
PERMISSION_TTL_S = 60.0
"""How long a collaborator's permission is remembered."""
LABELS_TTL_S = 300.0
"""How long a repository's labels are remembered: a reporter's reply re-triages within
minutes, and labels change seldom."""


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
        for part in (owner, repo):
            if not _NAME.match(part) or part in (".", ".."):
                raise ValueError(f"not a GitHub owner or repository name: {part!r}")
        self.app = app
        self.installation_id = installation_id
        self.owner = owner
        self.repo = repo
        self._permissions = dict(permissions) if permissions else None
        # Every write is sent only while the running job's lease holds, checked before each
        # try (`bot.store.queue.fence`).
        self.github = app.installation_github(
            installation_id, repo, self._permissions, self.token, check_fence
        )
        self._rest = self.github.rest

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.repo}"

    def __repr__(self) -> str:
        return f"InstallationClient({self.installation_id}, {self.full_name!r})"

    async def token(self) -> str:
        """The installation token for this repository (for git). A secret: never log it.
        AccessRevoked once the app lost the installation or this repository."""
        self.app.check_access(self.installation_id, self.full_name)
        token = await self.app.installation_token(
            self.installation_id, self.repo, self._permissions
        )
        self.app.check_access(self.installation_id, self.full_name)
        return token

    async def _create(
        self,
        model: type[M],
        send: Callable[[], Awaitable[Response[Any, Any]]],
        find: Callable[[], Awaitable[M | None]],
    ) -> M:
        """POST a create, never twice: after a 5xx or a lost answer, `find` what it made (see
        `bot.github._retry`)."""
        attempts = self.app.sender.policy.attempts
        for failures in range(1, attempts + 1):
            try:
                with call_options(attempts=1):
                    return model_of(model, await answer(send()))
            except RateLimited:
                raise
            except RetryableError as exc:
                existing = await find()
                if existing is not None:
                    log.info(
                        "create was applied despite the error", extra={"model": model.__name__}
                    )
                    return existing
                if failures == attempts:
                    raise
                await self.app.sender.backoff("POST", model.__name__, exc.status, failures)
        raise AssertionError("unreachable")

    async def _list(
        self,
        request: Callable[..., Awaitable[Response[Any, Any]]],
        model: type[M],
        *args: Any,
        **kwargs: Any,
    ) -> list[M]:
        """`listed` for `request(owner, repo, *args, **kwargs)`."""
        return await listed(self._rest, request, model, self.owner, self.repo, *args, **kwargs)

    # -- repository ------------------------------------------------------------------------

    async def get_repo(self) -> Repository:
        return model_of(Repository, await answer(self._rest.repos.async_get(self.owner, self.repo)))

    async def _content(self, path: str, ref: str | None, **kwargs: Any) -> httpx.Response | None:
        """`GET .../contents/{path}` at `ref` (default branch when None); None on a 404."""
        get = self._rest.repos.async_get_content
        where = quote(path.strip("/"), safe="/")
        try:
            answered = await answer(get(self.owner, self.repo, where, ref=ref or UNSET, **kwargs))
        except NotFound:
            return None
        return answered.raw_response

    async def get_file_text(self, path: str, ref: str | None = None) -> str | None:
        """A file's text at `ref` (default branch when None); None when it does not exist."""
        entry = await self.get_contents(path, ref)
        if not isinstance(entry, ContentEntry) or entry.type != "file":
            return None
        if entry.encoding == "base64":
            return base64.b64decode(entry.content or "").decode("utf-8", errors="replace")
        # Files over 1 MB come without content: ask for the raw bytes instead.
        raw = await self._content(path, ref, headers={"Accept": "application/vnd.github.raw"})
        return None if raw is None else raw.content.decode("utf-8", errors="replace")

    async def get_contents(
        self, path: str, ref: str | None = None
    ) -> ContentEntry | list[ContentEntry] | None:
        """What `path` is at `ref` (default branch when None): one entry for a file or a
        symbolic link, the entries of a directory; None when there is nothing there.

        Read as raw JSON: githubkit's models of contents (`ContentFile` and the rest of its
        union) parse GitHub's recorded answer but not the fake's, which lacks `git_url`,
        `download_url` and `_links`; `type`, `encoding` and `content` are what is read."""
        answered = await self._content(path, ref)
        if answered is None:
            return None
        data = json_of(answered)
        if isinstance(data, list):
            return models_of(ContentEntry, data)
        return model_of(ContentEntry, data)

    async def get_collaborator_permission(self, login: str) -> Permission | None:
        """The user's role on this repository, cached ~60 s.

        404 (not a collaborator or no such user) -> "none". A transient failure (5xx, no
        answer, a rate limit) that outlived the client's retries raises `RetryableError`, so the
        job is retried later instead of dropping a maintainer's command; any other failure ->
        None. Both fail closed: nobody is granted anything while the permission is unknown.
        """
        key = (self.installation_id, self.full_name, login.lower())
        cached = self.app.permissions.get(key)
        if cached is not None:
            return cached
        level = self._rest.repos.async_get_collaborator_permission_level
        try:
            answered = await answer(level(self.owner, self.repo, quote(login, safe="")))
            # Read as raw JSON: `role_name` is what counts, and an answer without the legacy
            # `permission` (which githubkit's model requires) must still be read.
            value = _parse_permission(json_of(answered.raw_response))
        except NotFound:
            value = "none"
        except GitHubError as exc:
            log.warning(
                "collaborator permission unavailable",
                extra={"repo": self.full_name, "login": login, "status": exc.status},
            )
            if isinstance(exc, RetryableError):
                raise RetryableError(
                    exc.status, f"collaborator permission of {login} unavailable: {exc}"
                ) from exc
            return None
        if value is not None:
            self.app.permissions.put(key, value)
        return value

    # -- issues and comments ---------------------------------------------------------------

    async def get_issue(self, number: int) -> Issue:
        return model_of(
            Issue, await answer(self._rest.issues.async_get(self.owner, self.repo, number))
        )

    async def list_issue_comments(self, number: int) -> list[IssueComment]:
        return await self._list(self._rest.issues.async_list_comments, IssueComment, number)

    async def create_issue_comment(self, number: int, body: str) -> IssueComment:
        """Post a comment; a retried post finds the first one instead of posting twice."""
        return await self._create(
            IssueComment,
            lambda: self._rest.issues.async_create_comment(
                self.owner, self.repo, number, body=body
            ),
            lambda: _posted(self.list_issue_comments(number), body),
        )

    async def update_issue_comment(self, comment_id: int, body: str) -> IssueComment:
        call = self._rest.issues.async_update_comment(self.owner, self.repo, comment_id, body=body)
        return model_of(IssueComment, await answer(call))

    async def add_reaction(self, comment_id: int, content: str = "eyes") -> None:
        """React to an issue comment (👀 by default)."""
        react = self._rest.reactions.async_create_for_issue_comment
        await answer(react(self.owner, self.repo, comment_id, content=cast(Any, content)))

    async def add_review_comment_reaction(self, comment_id: int, content: str = "eyes") -> None:
        """React to a pull request review comment (a comment on a line of the diff)."""
        react = self._rest.reactions.async_create_for_pull_request_review_comment
        await answer(react(self.owner, self.repo, comment_id, content=cast(Any, content)))

    async def add_issue_reaction(self, number: int, content: str = "eyes") -> None:
        """React to the body of an issue or pull request."""
        react = self._rest.reactions.async_create_for_issue
        await answer(react(self.owner, self.repo, number, content=cast(Any, content)))

    # -- pull requests ---------------------------------------------------------------------

    async def get_pull(self, number: int) -> PullRequest:
        call = self._rest.pulls.async_get(self.owner, self.repo, number)
        return model_of(PullRequest, await answer(call))

    async def list_pull_files(self, number: int) -> list[PullFile]:
        return await self._list(self._rest.pulls.async_list_files, PullFile, number)

    async def get_pull_diff(self, number: int) -> str:
        """The unified diff of the pull request (GitHub's `application/vnd.github.diff`)."""
        call = self._rest.pulls.async_get(
            self.owner, self.repo, number, headers={"Accept": "application/vnd.github.diff"}
        )
        return (await answer(call)).raw_response.text

    async def list_review_comments(self, number: int) -> list[ReviewComment]:
        return await self._list(self._rest.pulls.async_list_review_comments, ReviewComment, number)

    async def list_review_comments_of(self, number: int, review_id: int) -> list[ReviewComment]:
        """The inline comments of one review (`GET .../reviews/{review_id}/comments`), all
        pages; replies in its threads written later are not among them."""
        request = self._rest.pulls.async_list_comments_for_review
        return await self._list(request, ReviewComment, number, review_id)

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
        create = self._rest.pulls.async_create_review
        return await self._create(
            Review,
            lambda: create(self.owner, self.repo, number, data=cast(Any, payload)),
            lambda: _posted(self.list_reviews(number), body),
        )

    async def reply_to_review_comment(
        self, number: int, comment_id: int, body: str
    ) -> ReviewComment:
        """A reply in the thread that review comment `comment_id` starts (never twice)."""
        reply = self._rest.pulls.async_create_reply_for_review_comment
        return await self._create(
            ReviewComment,
            lambda: reply(self.owner, self.repo, number, comment_id, body=body),
            lambda: _posted(
                self.list_review_comments(number), body, lambda c: c.in_reply_to_id == comment_id
            ),
        )

    async def update_review_comment(self, comment_id: int, body: str) -> ReviewComment:
        """Edit one of the app's own review comments (a reply in a thread included)."""
        call = self._rest.pulls.async_update_review_comment(
            self.owner, self.repo, comment_id, body=body
        )
        return model_of(ReviewComment, await answer(call))

    async def graphql(
        self, query: str, variables: Mapping[str, Any], *, mutation: bool = False
    ) -> dict[str, Any]:
        """A GraphQL call through githubkit's; its `data`, or NotFound / GitHubError from
        GraphQL's `errors`. A query is a read: neither spaced nor fenced like writes."""
        try:
            with call_options(spaced=None if mutation else False):
                return await self.github.graphql.arequest(query, dict(variables))
        except ValidationError:
            raise GitHubError(200, "GraphQL answered something that is not an answer") from None
        except RequestError as exc:
            raise translated(exc) from None
        except GraphQLFailed as exc:
            errors = exc.response.errors or []
            first = errors[0] if errors else None
            message = first.message if first is not None else "GraphQL error"
            if first is not None and first.type == "NOT_FOUND":
                raise NotFound(404, message) from None
            raise GitHubError(200, f"GraphQL: {message}") from None

    async def review_threads(self, number: int) -> list[ReviewThread]:
        """Every review thread of the pull request, with its comments and their 👎 reactions."""
        threads: list[ReviewThread] = []
        after: str | None = None
        for _ in range(MAX_PAGES):
            data = await self.graphql(
                _THREADS_QUERY,
                {"owner": self.owner, "name": self.repo, "number": number, "after": after},
            )
            repo = data.get("repository") or {}
            page = ((repo.get("pullRequest") or {}).get("reviewThreads")) or {}
            threads += models_of(ReviewThread, page.get("nodes") or [])
            info = page.get("pageInfo") or {}
            if not info.get("hasNextPage"):
                break
            after = info.get("endCursor")
        return threads

    async def resolve_review_thread(self, thread_id: str) -> None:
        await self.graphql(_RESOLVE_MUTATION, {"threadId": thread_id}, mutation=True)

    async def create_pull(
        self, *, head: str, base: str, title: str, body: str, draft: bool = False
    ) -> PullRequest:
        """Open a pull request from branch `head` (in this repository) into `base`, a draft
        with `draft`. A retried create finds the first one instead of opening two; GitHub's
        422 (`A pull request already exists for ...`, `No commits between ...`) is raised as
        `GitHubError` with that reason in its message."""
        return await self._create(
            PullRequest,
            lambda: self._rest.pulls.async_create(
                self.owner, self.repo, head=head, base=base, title=title, body=body, draft=draft
            ),
            lambda: self.find_open_pull_by_head(head, base=base),
        )

    async def find_open_pull_by_head(
        self, branch: str, *, base: str | None = None
    ) -> PullRequest | None:
        """The open pull request from `branch` of this repository (into `base` when given)."""
        head = f"{self.owner}:{branch}"
        request = self._rest.pulls.async_list
        found = await self._list(request, PullRequest, head=head, state="open", base=base or UNSET)
        return found[0] if found else None

    async def open_pulls_at(self, sha: str) -> list[PullRequest]:
        """The open pull requests of this repository whose head is commit `sha`, a fork's
        included: GitHub's `commits/{sha}/pulls` does not know a commit that only a fork has,
        so the open pull requests are listed and their heads compared."""
        pulls = await self._list(self._rest.pulls.async_list, PullRequest, state="open")
        return [pull for pull in pulls if pull.head.sha == sha]

    async def request_reviewers(self, number: int, logins: Sequence[str]) -> PullRequest:
        """Ask `logins` to review the pull request (asking again is harmless).

        GitHub answers 422 (`GitHubError`) when one is the pull request's author or not a
        collaborator of the repository; nobody is asked then.
        """
        ask = self._rest.pulls.async_request_reviewers
        return model_of(
            PullRequest, await answer(ask(self.owner, self.repo, number, reviewers=list(logins)))
        )

    # -- labels ----------------------------------------------------------------------------

    async def list_labels(self) -> list[Label]:
        """Every label of the repository, all pages; remembered for `LABELS_TTL_S` per
        installation and repository (shared by every client of the app)."""
        key = (self.installation_id, self.full_name.lower())
        cached = self.app.labels.get(key)
        if cached is not None:
            return list(cached)
        labels = await self._list(self._rest.issues.async_list_labels_for_repo, Label)
        self.app.labels.put(key, tuple(labels))
        return labels

    async def add_labels(self, number: int, names: Sequence[str]) -> list[Label]:
        """Add `names` to an issue or pull request; the labels it has afterwards.

        Adding a label it already has changes nothing, so a retry is safe; GitHub creates a
        label the repository lacks, so callers pick from `list_labels()` first. No names: no
        call, and an empty list.
        """
        if not names:
            return []
        add = self._rest.issues.async_add_labels
        answered = await answer(add(self.owner, self.repo, number, labels=list(names)))
        return items_of(Label)(answered)

    async def list_reviews(self, number: int) -> list[Review]:
        return await self._list(self._rest.pulls.async_list_reviews, Review, number)

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
        fields = {
            "name": name,
            "head_sha": head_sha,
            "status": status,
            "external_id": external_id,
            "details_url": details_url,
            "conclusion": conclusion,
            "output": None if output is None else dict(output),
        }
        payload = {field: value for field, value in fields.items() if value is not None}

        async def find() -> CheckRun | None:
            return None if external_id is None else await self.find_check_run(head_sha, external_id)

        create = self._rest.checks.async_create
        return await self._create(
            CheckRun, lambda: create(self.owner, self.repo, data=cast(Any, payload)), find
        )

    async def update_check_run(self, check_run_id: int, **fields: Any) -> CheckRun:
        """PATCH a check run: `status`, `conclusion`, `output={title, summary, text}`, ..."""
        update = self._rest.checks.async_update
        call = update(self.owner, self.repo, check_run_id, data=cast(Any, fields))
        return model_of(CheckRun, await answer(call))

    async def list_check_runs_for_ref(
        self, ref: str, *, check_name: str | None = None
    ) -> list[CheckRun]:
        request = self._rest.checks.async_list_for_ref
        name = check_name or UNSET
        return await self._list(
            request, CheckRun, quote(ref, safe=""), key="check_runs", check_name=name
        )

    async def find_check_run(self, ref: str, external_id: str) -> CheckRun | None:
        """The check run on `ref` created for `external_id` (the run id), if any."""
        runs = await self.list_check_runs_for_ref(ref)
        return next((run for run in runs if run.external_id == external_id), None)

    # -- other apps' CI results --------------------------------------------------------------

    async def list_check_run_annotations(
        self, check_run_id: int, *, limit: int
    ) -> list[CheckAnnotation]:
        """A check run's annotations, the first `limit` (GitHub serves 50 a page)."""
        request = self._rest.checks.async_list_annotations
        return await self._list(request, CheckAnnotation, check_run_id, limit=limit)

    async def commit_statuses(self, ref: str) -> list[CommitStatus]:
        """The newest commit status per context on `ref` (the combined status's list)."""
        request = self._rest.repos.async_get_combined_status_for_ref
        return await self._list(request, CommitStatus, quote(ref, safe=""), key="statuses")


_THREADS_QUERY = """
query($owner: String!, $name: String!, $number: Int!, $after: String) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewThreads(first: 100, after: $after) {
        pageInfo { hasNextPage endCursor }
        nodes {
          id isResolved isOutdated
          resolvedBy { login }
          comments(first: 50) {
            nodes {
              databaseId url author { login } body
              reactions(content: THUMBS_DOWN, first: 20) { nodes { user { login } } }
            }
          }
        }
      }
    }
  }
}
"""
_RESOLVE_MUTATION = """
mutation($threadId: ID!) {
  resolveReviewThread(input: {threadId: $threadId}) { thread { id isResolved } }
}
"""


def _parse_permission(data: object) -> Permission | None:
    """`role_name` (fine-grained: maintain, triage) wins over the legacy `permission` field."""
    if not isinstance(data, dict):
        return None
    for field in ("role_name", "permission"):
        value = data.get(field)
        if isinstance(value, str) and value in PERMISSIONS:
            return cast(Permission, value)
    return None


async def _posted(
    items: Awaitable[list[P]], body: str, also: Callable[[P], bool] = lambda _: True
) -> P | None:
    """The newest of `items` that a bot posted with `body` (and that passes `also`): what a
    create whose answer was lost made. GitHub stores line ends as given but may trim trailing
    whitespace."""
    sent = body.replace("\r\n", "\n").rstrip()
    for item in reversed(await items):
        text = (item.body or "").replace("\r\n", "\n").rstrip()
        if item.user is not None and item.user.is_bot and text == sent and also(item):
            return item
    return None
