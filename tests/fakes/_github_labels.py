"""The fake GitHub's labels: a repository's list, and labels added to an issue or pull request.

As on GitHub, label names match without regard to case, and adding a label the repository
does not have creates it (colour `ededed`, no description) rather than failing. A label made
that way is also kept in the repository's `labels_created`, so a test can tell that the app
never sent a name the repository lacked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from starlette.responses import Response

from tests.fakes._github_ctx import Ctx, Handler, ok
from tests.fakes._github_state import FakeError, FakeRepo

if TYPE_CHECKING:
    from tests.fakes.github import FakeGitHub


def label_of(
    fake: FakeGitHub,
    fr: FakeRepo,
    name: str,
    color: str = "ededed",
    description: str | None = None,
) -> dict[str, Any]:
    """The repository's label called `name` (any case), created when it has none."""
    known = fr.labels.get(name.lower())
    if known is not None:
        return known
    lid = fake._id()
    label = {
        "id": lid,
        "node_id": f"LA_{lid}",
        "url": f"https://api.github.com/repos/{fr.full_name}/labels/{quote(name, safe='')}",
        "name": name,
        "description": description,
        "color": color,
        "default": False,
    }
    fr.labels[name.lower()] = label
    return label


def _names(payload: Any) -> list[str]:
    """The label names of an add-labels body: `{"labels": [...]}` or a bare list, of names
    or of `{"name": ...}` objects, as GitHub accepts."""
    items = payload.get("labels") if isinstance(payload, dict) else payload
    if not isinstance(items, list):
        raise FakeError(422, "Invalid request: 'labels' wasn't supplied.")
    names = []
    for item in items:
        name = item.get("name") if isinstance(item, dict) else item
        if not isinstance(name, str) or not name.strip():
            raise FakeError(422, "Validation Failed: label name cannot be blank")
        if len(name) > 50:
            raise FakeError(422, "Validation Failed: name is too long (maximum is 50 characters)")
        names.append(name)
    return names


def label_routes(fake: FakeGitHub, r: str) -> list[tuple[str, str, str, Handler]]:
    """(method, path, auth, handler) for the label endpoints under repository path `r`."""

    async def list_labels(ctx: Ctx) -> Response:
        return fake.page(ctx.request, list(ctx.fr.labels.values()))

    async def add_labels(ctx: Ctx) -> Response:
        issue = ctx.fr.issues.get(ctx.number())
        if issue is None:
            raise FakeError(404, "Not Found")
        labels: list[dict[str, Any]] = issue["labels"]  # shared with the pull, if one
        for name in _names(ctx.json):
            if name.lower() not in ctx.fr.labels:
                ctx.fr.labels_created.append(name)
            label = label_of(fake, ctx.fr, name)
            if all(have["id"] != label["id"] for have in labels):
                labels.append(label)
        return ok(labels)

    return [
        ("GET", r + "/labels", "token", list_labels),
        ("POST", r + "/issues/{number:int}/labels", "token", add_labels),
    ]
