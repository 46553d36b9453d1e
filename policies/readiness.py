"""Whether the deployment can carry out a trigger: the operator's settings a run needs.

A run needs the GitHub App's credentials (to read the repository and post anything) and,
unless it is a model-free reply (`help`, `status`, ...), a model. When one is missing the
delivery is skipped `not_configured` before any run is recorded, saying what is missing:
nothing is posted on GitHub (a public "failed: no model configured" would tell the world
about the operator's settings and help nobody), no run is left `queued`, and the operator
runs it later with `bot replay --delivery GUID`. The facts come from the wiring (`Setup`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from policies.event import Skip, SkipReason, Trigger

__all__ = ["MISSING_CREDENTIALS", "MISSING_MODEL", "Setup", "not_configured"]

MISSING_CREDENTIALS = (
    "GitHub App credentials (set BOT_APP_ID and BOT_PRIVATE_KEY or BOT_PRIVATE_KEY_PATH, "
    "or run `bot setup`)"
)
MISSING_MODEL = "a model (set BOT_MODEL and BOT_LLM_BASE_URL)"


@dataclass(frozen=True, slots=True)
class Setup:
    """What the operator configured, as the wiring found it.

    `model_free` names the workflows that need no model (the model-free replies)."""

    credentials: bool
    model: bool
    model_free: frozenset[str] = field(default_factory=frozenset)


def not_configured(trigger: Trigger, setup: Setup) -> Skip | None:
    """The `not_configured` skip for a trigger the deployment cannot carry out, else None."""
    missing: list[str] = []
    if not setup.credentials:
        missing.append(MISSING_CREDENTIALS)
    if not setup.model and trigger.workflow not in setup.model_free:
        missing.append(MISSING_MODEL)
    if not missing:
        return None
    detail = (
        f"missing {' and '.join(missing)}; nothing was posted. Once it is set, "
        f"`bot replay --delivery {trigger.delivery_id}` runs this {trigger.workflow}"
    )
    return Skip(SkipReason.NOT_CONFIGURED, detail, {"workflow": trigger.workflow})
