"""Triage's labels: the repository's names for the model, and applying the ones it chose.

`label_names` lists the repository's labels (the client remembers them for a few minutes, so a
re-triage does not list them again); a failure is logged and triage goes on without them.
`apply_labels` runs after the outcome is known and before it is posted, only where
`.github/bot.yml` says `triage.apply_labels: true`: it sends only names the repository has and
`triage.labels` lists (`policies.labels`), never creating one; the comment says which chosen
labels were held back for want of a listing. GitHub's refusal (403, 404, 422, or any other
error) becomes a note in the comment instead of failing the run. Adding a label an issue
already has changes nothing, so a retried run may apply them again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from bot.github.errors import GitHubError, RateLimited
from bot.log import get_logger
from policies.config import ConfigError, RepoConfig
from policies.labels import labels_to_apply
from policies.outcome import Outcome
from policies.untrusted_text import code_span

if TYPE_CHECKING:
    from bot.github.client import InstallationClient

log = get_logger(__name__)


async def label_names(client: InstallationClient) -> list[str] | None:
    """The repository's label names, or None when GitHub would not list them.

    GitHub's rate limit beyond the client's cap propagates (the job is re-queued before any
    model call); any other error is logged and the labels are simply not offered.
    """
    try:
        return [label.name for label in await client.list_labels()]
    except RateLimited:
        raise
    except GitHubError as exc:
        log.warning(
            "the repository's labels could not be listed; triage goes on without them",
            extra={"status": exc.status, "error": exc.message},
        )
        return None


def _names(labels: Sequence[str]) -> str:
    return ", ".join(code_span(label) for label in labels)


async def apply_labels(
    client: InstallationClient,
    number: int,
    outcome: Outcome,
    existing: Sequence[str] | None,
    read_config: Callable[[InstallationClient], Awaitable[RepoConfig]],
) -> Outcome:
    """Apply the labels `outcome` chose when the repository's config asks for it; the outcome
    with a note saying what was applied or why not (unchanged when nothing was to be done)."""
    if not outcome.labels or outcome.status == "failed":
        return outcome
    try:
        config = await read_config(client)
    except (ConfigError, GitHubError) as exc:
        log.warning("no config to tell whether to apply labels", extra={"error": str(exc)})
        return outcome
    if not config.triage.apply_labels:
        return outcome
    if existing is None:
        note = "Labels were not applied: the repository's labels could not be listed."
        return dataclasses.replace(outcome, notes=(*outcome.notes, note))
    plan = labels_to_apply(outcome.labels, existing, config.triage.labels)
    notes: list[str] = []
    if plan.apply:
        notes.append(await _add(client, number, plan.apply))
    if plan.held_back:
        log.info("labels held back", extra={"labels": list(plan.held_back)})
        notes.append(f"Not applied, as they are not in `triage.labels`: {_names(plan.held_back)}.")
    if not notes:
        return outcome
    return dataclasses.replace(outcome, notes=(*outcome.notes, *notes))


async def _add(client: InstallationClient, number: int, names: Sequence[str]) -> str:
    """Add `names` to the issue; the note saying how it went."""
    try:
        await client.add_labels(number, names)
    except GitHubError as exc:
        log.warning("applying labels failed", extra={"status": exc.status, "error": exc.message})
        if exc.status == 0:
            return f"The labels {_names(names)} could not be applied: GitHub did not answer."
        return f"The labels {_names(names)} could not be applied: GitHub answered {exc.status}."
    log.info("labels applied", extra={"labels": list(names)})
    return f"Labels applied: {_names(names)}."
