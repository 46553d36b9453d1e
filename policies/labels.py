"""Which of the labels a workflow chose the app may apply: only the repository's own.

GitHub creates a label that an issue is given but the repository lacks, so a name the model
made up would become a new label. The app never creates labels: it sends only names the
repository has, spelled as the repository spells them.
"""

from __future__ import annotations

from collections.abc import Sequence


def labels_to_apply(chosen: Sequence[str], existing: Sequence[str]) -> tuple[str, ...]:
    """The `chosen` names the repository has (any case), in its spelling, each once, in order.

    >>> labels_to_apply(["BUG", "made-up", "bug", "Docs"], ["bug", "docs"])
    ('bug', 'docs')
    """
    known = {name.lower(): name for name in existing}
    picked: list[str] = []
    for name in chosen:
        label = known.get(name.strip().lower())
        if label is not None and label not in picked:
            picked.append(label)
    return tuple(picked)
