"""The operator page's view of the learnings each repository keeps (`bot.store.learnings`).

`learnings_view` groups them per repository, newest first, at most `MAX_LISTED` in all, for
`learnings.html`. Their text is maintainers' words: the template escapes it like every other
text, and a source is linked only when it is an address on GitHub.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from policies.learnings import Learning

MAX_LISTED = 500
"""Learnings listed at most; the counts count all of them."""


def learnings_view(learnings: Sequence[Learning], repo: str, github: str) -> dict[str, Any]:
    """The template's context for the learnings page (`learnings` by repository, newest
    first within each, as the store lists them)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    counts: dict[str, int] = {}
    for n, x in enumerate(learnings):
        counts[x.repo] = counts.get(x.repo, 0) + 1
        if n >= MAX_LISTED:
            continue
        groups.setdefault(x.repo, []).append(
            {
                "number": x.number,
                "text": x.text,
                "author": x.author,
                "about": f"{x.category}: {x.title}" if x.category else "",
                "paths": ", ".join(x.paths),
                "source": x.source if x.source.startswith(github + "/") else "",
                "created": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(x.created_at)),
            }
        )
    return {
        "repo": repo,
        "groups": [
            {"repo": name, "count": counts[name], "rows": rows} for name, rows in groups.items()
        ],
        "total": len(learnings),
        "more": max(0, len(learnings) - MAX_LISTED),
    }
