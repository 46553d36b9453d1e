"""Tests for policies/readiness.py: a trigger the deployment cannot carry out is not started."""

from __future__ import annotations

import pytest

from policies.event import SkipReason, Trigger
from policies.readiness import Setup, not_configured

ISSUE = Trigger("triage", "octo/hello", 42, "issue", 1, "someone", "g-1")
HELP = Trigger("help", "octo/hello", 42, "issue", 1, "maint", "g-2", command="help")
MODEL_FREE = frozenset({"help", "status"})


@pytest.mark.parametrize(
    ("trigger", "setup", "missing"),
    [
        pytest.param(ISSUE, Setup(credentials=True, model=True), None, id="ready"),
        pytest.param(ISSUE, Setup(credentials=True, model=False, model_free=MODEL_FREE), ["a model (set BOT_MODEL and BOT_LLM_BASE_URL)"], id="no-model"),
        pytest.param(HELP, Setup(credentials=True, model=False, model_free=MODEL_FREE), None, id="help-needs-no-model"),
        pytest.param(HELP, Setup(credentials=False, model=False, model_free=MODEL_FREE), ["GitHub App credentials"], id="help-needs-credentials"),
        pytest.param(ISSUE, Setup(credentials=False, model=True), ["GitHub App credentials"], id="no-credentials"),
        pytest.param(ISSUE, Setup(credentials=False, model=False), ["GitHub App credentials", "a model"], id="neither"),
    ],
)  # fmt: skip
def test_not_configured(trigger: Trigger, setup: Setup, missing: list[str] | None) -> None:
    skip = not_configured(trigger, setup)
    if missing is None:
        assert skip is None
        return
    assert skip is not None and skip.reason is SkipReason.NOT_CONFIGURED
    for what in missing:
        assert what in skip.detail
    assert skip.message.startswith("not_configured: missing ")
    assert f"bot replay --delivery {trigger.delivery_id}" in skip.detail
    assert skip.extra == {"workflow": trigger.workflow}
