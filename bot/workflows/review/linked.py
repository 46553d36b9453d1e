"""The issues a pull request says it closes: read, fenced by author, and judged in the summary.

`policies.linked_issues` finds the links and keeps only the same owner's (one installation is on
one account). Each is read with a token of this installation narrowed to its repository and to
`issues: read`: for the pull request's own repository that is the run's client; for another
repository of the account, GitHub issues such a token only when the installation holds that
repository. Whatever GitHub refuses (the token, 403, 404, 422) means the issue is not read, and
the summary says so; nothing is tried another way. A transient failure propagates (the job is
retried).

The issue's title and body are fenced as data, untrusted unless its author is (see
`bot.runs.context.is_trusted`); the summary advisor says of each whether the change addresses
it, and the summary shows one line per issue.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bot.github.errors import GitHubError, RateLimited, RetryableError
from bot.log import get_logger
from bot.runs.context import FIELD_LIMIT, Part, assemble, is_trusted, plain, sanitize, truncate
from policies.linked_issues import IssueRef, Links, linked_issues
from policies.untrusted_text import code_span, untrusted

if TYPE_CHECKING:
    from bot.github.installation import InstallationClient
    from bot.github.models import Issue, PullRequest

log = get_logger(__name__)

VERDICTS = {
    "yes": "addressed",
    "partly": "partly addressed",
    "no": "not addressed",
    "unclear": "unclear",
}

NOTE = """\
## Linked issues

The pull request's description says it closes the issues in the blocks whose source starts
with `linked issue`. Read them to judge whether the change does what they ask."""


@dataclass(frozen=True, slots=True)
class LinkedIssue:
    """One linked issue as the run saw it: its label (`#3`, `octo/other#4`), and its title
    when it was read, or why it was not."""

    label: str
    title: str | None = None
    reason: str = ""
    block: Part | None = None


def _reason(exc: GitHubError) -> str:
    if exc.status in (404, 422):
        return "not read: this installation cannot see it"
    return f"not read: GitHub answered {exc.status}"


async def _issue(client: InstallationClient, ref: IssueRef) -> Issue:
    if ref.full_name.lower() == client.full_name.lower():
        return await client.get_issue(ref.number)
    other = client.app.installation(
        client.installation_id, client.owner, ref.repo, permissions={"issues": "read"}
    )
    return await other.get_issue(ref.number)


async def read_linked(
    client: InstallationClient, pull: PullRequest, *, actor: str, actor_can_write: bool
) -> list[LinkedIssue]:
    """The issues `pull`'s description links, read where this installation may."""
    links: Links = linked_issues(pull.body, client.owner, client.repo)
    out: list[LinkedIssue] = []
    for ref in links.readable:
        label = ref.label(client.owner, client.repo)
        try:
            issue = await _issue(client, ref)
        except (RateLimited, RetryableError):
            raise
        except GitHubError as exc:
            log.info("a linked issue was not read", extra={"status": exc.status})
            out.append(LinkedIssue(label, reason=_reason(exc)))
            continue
        except ValueError:
            out.append(LinkedIssue(label, reason="not read: not a repository name"))
            continue
        if issue.is_pull_request:
            out.append(LinkedIssue(label, reason="not read: it is a pull request"))
            continue
        login = getattr(issue.user, "login", None)
        trusted = is_trusted(
            login,
            issue.author_association,
            is_bot=bool(getattr(issue.user, "is_bot", False)),
            actor=actor,
            actor_can_write=actor_can_write,
        )
        title = plain(sanitize(issue.title))
        text = truncate(
            f"Title: {title}\n\n{sanitize(issue.body) or '(no description)'}", FIELD_LIMIT
        )
        part = Part(f"linked issue {label}", text, trusted, plain(login) or None)
        out.append(LinkedIssue(label, title=title, block=part))
    for ref in links.foreign:
        label = ref.label(client.owner, client.repo)
        out.append(LinkedIssue(label, reason="not read: another account's repository"))
    if links.more:
        out.append(LinkedIssue(f"{links.more} more", reason="not read: too many links"))
    return out


def linked_context(linked: Sequence[LinkedIssue], fence: str) -> str:
    """The read issues as fenced blocks under the app's note; "" when none was read."""
    parts = [item.block for item in linked if item.block is not None]
    if not parts:
        return ""
    blocks, _, _ = assemble(parts, fence=fence, budget_tokens=1_000_000)
    return NOTE + "\n\n" + blocks


def for_the_workflow(linked: Sequence[LinkedIssue]) -> list[dict[str, str]]:
    """What the summary advisor is asked about: the read issues, by label."""
    return [{"issue": i.label, "title": i.title or ""} for i in linked if i.block is not None]


def summary_lines(linked: Sequence[LinkedIssue], verdicts: object) -> list[str]:
    """One Markdown line per linked issue: the advisor's verdict, or why it was not read."""
    by_label: dict[str, Mapping[str, Any]] = {}
    if isinstance(verdicts, list):
        for v in verdicts:
            if isinstance(v, Mapping) and isinstance(v.get("issue"), str):
                by_label.setdefault(str(v["issue"]).strip(), v)
    lines = []
    for item in linked:
        name = code_span(item.label)
        if item.block is None:
            lines.append(f"- {name}: {item.reason}")
            continue
        title = untrusted(item.title or "")
        verdict = by_label.get(item.label)
        if verdict is None:
            lines.append(f"- {name} {title}: not assessed")
            continue
        said = VERDICTS.get(str(verdict.get("addressed")), "unclear")
        why = " ".join(str(verdict.get("reason") or "").split())[:300]
        lines.append(f"- {name} {title}: {said}" + (f" ({untrusted(why)})" if why else ""))
    return lines
