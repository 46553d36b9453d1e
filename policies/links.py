"""Where a symbolic link in a repository's tree leads: inside the tree, or out of it.

A checkout follows links the way the operating system does: component by component, a link
met on the way is replaced by its own target, and `..` climbs from wherever that led. So
`resolves_outside` walks a link's target the same way over the links of the tree it is in
(path -> target, as git stores them). A target leaves the tree when it is absolute (`/...`,
a drive letter or a leading backslash, as Windows reads them), when a `..` climbs above the
root, or when the walk does not end (a loop); a link to a missing path stays inside.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

MAX_HOPS = 40  # as Linux's limit on links followed in one lookup
_DRIVE = re.compile(r"^[A-Za-z]:")


@dataclass(frozen=True, slots=True)
class Resolution:
    """Whether a link leads out of the tree, and every link the walk went through."""

    outside: bool
    through: frozenset[str]


def _parts(target: str) -> list[str]:
    return target.replace("\\", "/").split("/")


def _absolute(target: str) -> bool:
    flat = target.replace("\\", "/")
    return not target or "\0" in target or flat.startswith("/") or bool(_DRIVE.match(flat))


def resolves_outside(path: str, target: str, links: Mapping[str, str]) -> Resolution:
    """Where the link at `path` to `target` leads, following the other `links` of its tree."""
    through: set[str] = {path}
    if _absolute(target):
        return Resolution(True, frozenset(through))
    resolved = path.split("/")[:-1]
    pending = list(reversed(_parts(target)))
    hops = 0
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if not resolved:
                return Resolution(True, frozenset(through))
            resolved.pop()
            continue
        resolved.append(part)
        here = "/".join(resolved)
        link = links.get(here)
        if link is None:
            continue
        hops += 1
        through.add(here)
        if hops > MAX_HOPS or _absolute(link):
            return Resolution(True, frozenset(through))
        resolved.pop()
        pending.extend(reversed(_parts(link)))
    return Resolution(False, frozenset(through))
