"""What the operator page's one search box was given: a delivery's GUID, a run id, an issue or
pull request (`owner/repo#n`, or its URL on GitHub), or nothing it can look up.

The text is only ever matched here and then passed to the store as query parameters, never
spliced into SQL or HTML: a search for `' OR 1=1 --` or `<script>` is `Unrecognised`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_QUERY = 300
"""The longest search the page reads; the rest is not looked at."""

_RUN_ID = re.compile(r"wf_[0-9a-f]{12}")
_OWNER = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})"
_NAME = r"[A-Za-z0-9._-]{1,100}"
_TARGET = re.compile(rf"({_OWNER})/({_NAME})#([0-9]{{1,9}})")
_URL = re.compile(
    rf"https?://[A-Za-z0-9.-]+(?::[0-9]{{1,5}})?/({_OWNER})/({_NAME})/(issues|pull)/([0-9]{{1,9}})"
    r"(?:[/?#].*)?"
)
_GUID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,99}")
"""A delivery GUID as the store keeps it: GitHub's are UUIDs; redelivered and replayed ones
(and tests') are other plain words."""


@dataclass(frozen=True, slots=True)
class RunId:
    run_id: str


@dataclass(frozen=True, slots=True)
class Target:
    repo: str
    number: int


@dataclass(frozen=True, slots=True)
class Guid:
    guid: str


@dataclass(frozen=True, slots=True)
class Unrecognised:
    why: str


Search = RunId | Target | Guid | Unrecognised


def parse_search(text: str) -> Search:
    """What `text` names, tried in this order: a run id, `owner/repo#n`, an issue or pull
    request URL, a GUID (a GUID cannot hold `/` or `#`, so the earlier ones never shadow it).

    >>> parse_search(" octo/app#12 ")
    Target(repo='octo/app', number=12)
    """
    q = text[:MAX_QUERY].strip()
    if not q:
        return Unrecognised("Type a delivery GUID, a run id, owner/repo#n or an issue URL.")
    if _RUN_ID.fullmatch(q):
        return RunId(q)
    target = _TARGET.fullmatch(q)
    if target is not None:
        return Target(f"{target.group(1)}/{target.group(2)}", int(target.group(3)))
    url = _URL.fullmatch(q)
    if url is not None:
        return Target(f"{url.group(1)}/{url.group(2)}", int(url.group(4)))
    if _GUID.fullmatch(q):
        return Guid(q)
    return Unrecognised(
        "That is not a delivery GUID, a run id (wf_ and 12 hex digits), owner/repo#n or the URL"
        " of an issue or pull request."
    )
