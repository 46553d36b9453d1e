"""githubkit's REST clients and models for the calls the client makes, imported at worker start.

githubkit imports what a REST method needs (its namespace's client, then the pydantic models of
its body, answer and errors, each built as its class is created) on the method's first call:
0.2-0.3 s of CPU for the calls of one run, which the first run of each process would pay.
`preload()` pays it once when `bot serve` or `bot worker` starts, before the first delivery
(about 0.4 s of CPU, for every call below). A call missing here still works: its first use
imports what it needs, as githubkit does by itself.
"""

from __future__ import annotations

import dis
import importlib

from githubkit import GitHub, UnauthAuthStrategy

CALLS: dict[str, tuple[str, ...]] = {
    "apps": (
        "get_authenticated",
        "list_installations",
        "list_webhook_deliveries",
        "redeliver_webhook_delivery",
        "create_installation_access_token",
        # The operator page's GitHub sign-in (`bot.github.oauth`).
        "get_org_installation",
        "get_repo_installation",
        "list_installations_for_authenticated_user",
        "list_installation_repos_for_authenticated_user",
    ),
    "checks": ("create", "update", "list_for_ref", "list_annotations"),
    "issues": (
        "get",
        "list_comments",
        "create_comment",
        "update_comment",
        "list_labels_for_repo",
        "add_labels",
    ),
    "pulls": (
        "get",
        "list",
        "create",
        "list_files",
        "list_review_comments",
        "list_reviews",
        "create_review",
        "create_reply_for_review_comment",
        "update_review_comment",
        "list_comments_for_review",
        "request_reviewers",
    ),
    "orgs": ("check_membership_for_user",),
    "reactions": (
        "create_for_issue",
        "create_for_issue_comment",
        "create_for_pull_request_review_comment",
    ),
    "repos": (
        "get",
        "get_content",
        "get_collaborator_permission_level",
        "get_combined_status_for_ref",
    ),
    "teams": ("get_membership_for_user_in_org",),
    "users": ("get_authenticated",),
}
"""The githubkit REST methods (`async_` + name) that `bot.github` calls, by namespace."""


def preload() -> None:
    """Import the REST clients of `CALLS` and the models each method imports when called."""
    github = GitHub(UnauthAuthStrategy())  # held: its namespaces refer to it weakly
    for namespace, names in CALLS.items():
        client = type(getattr(github.rest, namespace))
        models = importlib.import_module(client.__module__.rsplit(".rest.", 1)[0] + ".models")
        for name in names:
            # The method's `from ..models import A, B` runs only when it is called: read its
            # names from the method's code and import them now.
            source = None
            for step in dis.get_instructions(getattr(client, f"async_{name}")):
                if step.opname == "IMPORT_NAME":
                    source = step.argval
                elif step.opname == "IMPORT_FROM" and source == "models":
                    getattr(models, step.argval)
