"""The repository's instructions in a review: read at the pull request's base, placed by scope.

`bot.workflows.instructions` reads them (at `pull.base.sha`, so a pull request that edits
AGENTS.md or an instructions file is reviewed under the base's version). Those for every file
join the run's context, which every agent of the review reads; a path-scoped one (a
`.github/instructions/*.instructions.md` file's `applyTo`, or `review.path_instructions`) joins
only the prompt of the units holding a file it matches, ahead of the unit's changes. A unit's
key (what a later run reuses its findings by) covers its instructions too, so changed
instructions mean a fresh review of the unit.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from bot.workflows.instructions import instructions_context
from policies.repo_instructions import InstructionSet
from policies.untrusted_text import code_span, untrusted

WHERE = "read at the pull request's base commit"


def scope_units(units: Sequence[dict[str, Any]], found: InstructionSet, fence: str) -> None:
    """Put each unit's path-scoped instructions ahead of its changes (in place)."""
    for unit in units:
        scoped = found.scoped_for([str(p) for p in unit["paths"]])
        if not scoped:
            continue
        block = instructions_context(scoped, fence, where=WHERE)
        unit["block"] = f"{block}\n\n{unit['block']}"
        key = "\0".join([str(unit["key"]), *(f"{i.source}\0{i.text}" for i in scoped)])
        unit["key"] = hashlib.sha256(key.encode("utf-8")).hexdigest()[:24]


def summary_lines(found: InstructionSet, reviewed: Sequence[str]) -> list[str]:
    """One Markdown line per instructions source: used (cut, scoped), or why not."""
    lines = []
    for source, detail in found.notes(reviewed):
        lines.append(f"- {code_span(source)}: {untrusted(detail)}")
    return lines
