"""The names GitHub gives its webhook events: the only `X-GitHub-Event` values the app takes.

A delivery's signature covers its body, not its headers, so the event header of a captured
delivery can be set to anything; the intake refuses a name outside this list (400, nothing
stored) and the metrics label deliveries only with names from it.

Taken from GitHub's own description of its webhooks as the npm packages publish it:
`@octokit/webhooks` 14.2.0 (`emitterEventNames`, the events of api.github.com) and the other
targets of `@octokit/openapi-webhooks` 12.1.0 (GitHub Enterprise Cloud and Server, their
`operationId` prefixes with `-` as `_`). Every folder of the payload corpus
(`../shared/github-payloads`) is one of them; a test checks that where the corpus is present.
To refresh: read the same two packages at a newer version and add the names they add.
"""

from __future__ import annotations

__all__ = ["GITHUB_EVENTS"]

_API_GITHUB_COM = (
    "branch_protection_configuration",
    "branch_protection_rule",
    "check_run",
    "check_suite",
    "code_scanning_alert",
    "commit_comment",
    "create",
    "custom_property",
    "custom_property_values",
    "delete",
    "dependabot_alert",
    "deploy_key",
    "deployment",
    "deployment_protection_rule",
    "deployment_review",
    "deployment_status",
    "discussion",
    "discussion_comment",
    "fork",
    "github_app_authorization",
    "gollum",
    "installation",
    "installation_repositories",
    "installation_target",
    "issue_comment",
    "issue_dependencies",
    "issues",
    "label",
    "marketplace_purchase",
    "member",
    "membership",
    "merge_group",
    "meta",
    "milestone",
    "org_block",
    "organization",
    "package",
    "page_build",
    "personal_access_token_request",
    "ping",
    "project",
    "project_card",
    "project_column",
    "projects_v2",
    "projects_v2_item",
    "projects_v2_status_update",
    "public",
    "pull_request",
    "pull_request_review",
    "pull_request_review_comment",
    "pull_request_review_thread",
    "push",
    "registry_package",
    "release",
    "repository",
    "repository_advisory",
    "repository_dispatch",
    "repository_import",
    "repository_ruleset",
    "repository_vulnerability_alert",
    "secret_scanning_alert",
    "secret_scanning_alert_location",
    "secret_scanning_scan",
    "security_advisory",
    "security_and_analysis",
    "sponsorship",
    "star",
    "status",
    "sub_issues",
    "team",
    "team_add",
    "watch",
    "workflow_dispatch",
    "workflow_job",
    "workflow_run",
)
_ENTERPRISE_ONLY = (
    "cache_sync",
    "dismissal_request_code_scanning",
    "dismissal_request_secret_scanning",
    "enterprise",
    "exemption_request_push_ruleset",
    "exemption_request_secret_scanning",
    "organization_custom_property",
    "organization_custom_property_values",
    "user",
)

GITHUB_EVENTS: frozenset[str] = frozenset(_API_GITHUB_COM + _ENTERPRISE_ONLY)
"""Every event name GitHub sends in `X-GitHub-Event`."""
