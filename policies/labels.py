"""Which of the labels triage chose the app may apply: the repository's own, and of those only
the ones `.github/bot.yml` lists in `triage.labels`.

GitHub creates a label that an issue is given but the repository lacks, so a name the model
made up would become a new label: the app never creates labels, and sends only names the
repository has, spelled as the repository spells them. Nor does every label the repository has
belong to triage: some mean a decision (`deploy-approved`, `security-reviewed`), and the
model's choice follows the issue's text, which anyone may write. So `triage.labels` is an
allow-list: a label it does not list is held back (the comment still suggests it), and with
an empty list nothing is applied.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LabelPlan:
    apply: tuple[str, ...]
    """The chosen labels to send: the repository has them and `triage.labels` lists them."""
    held_back: tuple[str, ...]
    """The chosen labels the repository has but `triage.labels` does not list."""


def labels_to_apply(
    chosen: Sequence[str], existing: Sequence[str], allowed: Sequence[str]
) -> LabelPlan:
    """The `chosen` names the repository has (any case), in its spelling, each once, in order:
    those `allowed` lists (any case) to apply, the others held back. Names the repository
    lacks are dropped.

    >>> labels_to_apply(["BUG", "made-up", "bug", "Docs"], ["bug", "docs"], ["Bug"])
    LabelPlan(apply=('bug',), held_back=('docs',))
    """
    known = {name.lower(): name for name in existing}
    permitted = {name.strip().lower() for name in allowed}
    apply: list[str] = []
    held_back: list[str] = []
    for name in chosen:
        label = known.get(name.strip().lower())
        if label is None or label in apply or label in held_back:
            continue
        (apply if label.lower() in permitted else held_back).append(label)
    return LabelPlan(apply=tuple(apply), held_back=tuple(held_back))
