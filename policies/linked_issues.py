"""The issues a pull request's description says it closes, and which of them may be read.

GitHub links an issue when the description says `Fixes #12`, `closes: owner/repo#3` or
`Resolves https://github.com/owner/repo/issues/4` (any of close, closes, closed, fix, fixes,
fixed, resolve, resolves, resolved, in any case), in the description's prose: not in code, a
quote or an HTML comment. The app reads such an issue only when it is in the same
installation, which for an installation on one account means the same owner: an issue of
another owner is never asked for (a public one could be read with any token, and a private one
is another installation's business). The installation's own token decides the rest: an issue
it cannot read (a repository the installation was not given) is simply not read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from policies._markdown import normalize, prose

__all__ = ["MAX_LINKED", "IssueRef", "Links", "linked_issues"]

MAX_LINKED = 5
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})"
_REPO = r"[A-Za-z0-9._-]{1,100}"
_LINK = re.compile(
    r"(?<![A-Za-z0-9_])(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)[ \t]*:?[ \t]+"
    r"(?:"
    rf"(?:(?P<owner>{_NAME})/(?P<repo>{_REPO}))?#(?P<number>[0-9]{{1,9}})"
    rf"|https://github\.com/(?P<url_owner>{_NAME})/(?P<url_repo>{_REPO})/issues/"
    r"(?P<url_number>[0-9]{1,9})"
    r")(?![A-Za-z0-9_])",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True, order=True)
class IssueRef:
    """One linked issue: `owner/repo#number`."""

    owner: str
    repo: str
    number: int

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.repo}"

    def label(self, owner: str, repo: str) -> str:
        """`#n` in the pull request's own repository, `owner/repo#n` elsewhere."""
        if self.full_name.lower() == f"{owner}/{repo}".lower():
            return f"#{self.number}"
        return f"{self.full_name}#{self.number}"


@dataclass(frozen=True, slots=True)
class Links:
    """The issues to read, and those that are never read (another owner's)."""

    readable: tuple[IssueRef, ...]
    foreign: tuple[IssueRef, ...]
    more: int = 0
    """How many further links were left out past `MAX_LINKED`."""


def linked_issues(body: str | None, owner: str, repo: str, *, limit: int = MAX_LINKED) -> Links:
    """The issues `body` links with a closing keyword, first mention first, each once."""
    if not body:
        return Links((), ())
    text = prose(normalize(body[:65_536])).text
    found: list[IssueRef] = []
    for match in _LINK.finditer(text):
        ref_owner = match.group("owner") or match.group("url_owner") or owner
        ref_repo = match.group("repo") or match.group("url_repo") or repo
        number = int(match.group("number") or match.group("url_number"))
        if number < 1:
            continue
        ref = IssueRef(ref_owner, ref_repo, number)
        if all(
            (r.full_name.lower(), r.number) != (ref.full_name.lower(), ref.number) for r in found
        ):
            found.append(ref)
    kept, more = found[:limit], max(0, len(found) - limit)
    readable = tuple(r for r in kept if r.owner.lower() == owner.lower())
    foreign = tuple(r for r in kept if r.owner.lower() != owner.lower())
    return Links(readable, foreign, more)
