"""The review workflow's verifier and the repository's learnings: a finding a learning covers
is left out and the learning named, in code for a dismissal's learning and by the verifier's
word for one given by hand; the learnings reach the verifier fenced, after its task."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.engine.engine import Engine
from bot.engine.types import AgentInvocation
from bot.workflows.review import workflow as review
from tests.engine.scripted import POLICY, Script, ScriptedRunner
from tests.workflows.test_review_workflow import ACCEPTED, FINDING, args, unit

pytestmark = pytest.mark.anyio

DECLINED = {
    "number": 4,
    "text": "intentional: the index starts at one here",
    "author": "maint",
    "category": "bug",
    "title": "Off by one",
    "paths": ["a.py"],
}
BY_HAND = {
    "number": 7,
    "text": "we never check types at runtime",
    "author": "octo",
    "category": "",
    "title": "",
    "paths": [],
}
BLOCK = (
    '<data fence="0123456789abcdef" source="learnings">\n#4 ...\n</data fence="0123456789abcdef">'
)
TYPES = {
    **FINDING,
    "start_line": 5,
    "end_line": 5,
    "category": "error-handling",
    "title": "No check",
}


def scripted(verdicts: list[dict[str, Any]]) -> Any:
    def rule(call: AgentInvocation) -> Script | None:
        if call.label.startswith("review "):
            return Script(structured={"findings": [FINDING, TYPES]})
        if call.label.startswith("verify "):
            return Script(structured={"verdicts": verdicts, "acceptance": ACCEPTED})
        if call.label == "summarize":
            return Script(structured={"summary": "Done."})
        return None

    return rule


async def run(tmp_path: Path, verdicts: list[dict[str, Any]], **extra: Any) -> Any:
    runner = ScriptedRunner(rule=scripted(verdicts))
    engine = Engine(runner, data_dir=tmp_path)
    done = await engine.run(
        review.meta,
        review.workflow,
        args([unit(1, "a.py")], **extra),
        interaction=POLICY,
        repo=None,
    )
    assert done.status == "completed", done.error
    return runner, done.result["review"]


async def test_a_dismissals_learning_drops_its_finding_before_the_verifier(
    tmp_path: Path,
) -> None:
    runner, out = await run(
        tmp_path,
        [{"index": 0, "keep": True}],
        learnings=[DECLINED, BY_HAND],
        learnings_block=BLOCK,
    )
    assert [f["title"] for f in out["findings"]] == ["No check"]
    assert out["learned"] == [{"path": "a.py", "title": "Off by one", "learning": 4}]
    (verify,) = [c for c in runner.calls if c.label.startswith("verify ")]
    # The verifier is asked about the other finding only, with the learnings fenced below.
    assert '"title": "Off by one"' not in verify.prompt
    assert verify.prompt.index("verdict's `learning`") < verify.prompt.index(
        "## Context from GitHub"
    )
    assert verify.prompt.index("## Context from GitHub") < verify.prompt.index(BLOCK)


async def test_the_verifier_names_the_learning_it_drops_a_finding_for(tmp_path: Path) -> None:
    _, out = await run(
        tmp_path,
        [{"index": 0, "keep": True}, {"index": 1, "keep": False, "learning": 7}],
        learnings=[BY_HAND],
        learnings_block=BLOCK,
    )
    assert [f["title"] for f in out["findings"]] == ["Off by one"]
    assert out["learned"] == [{"path": "a.py", "title": "No check", "learning": 7}]


async def test_without_learnings_nothing_is_left_out(tmp_path: Path) -> None:
    runner, out = await run(
        tmp_path, [{"index": 0, "keep": True}, {"index": 1, "keep": False, "learning": 3}]
    )
    assert [f["title"] for f in out["findings"]] == ["Off by one"]
    assert out["learned"] == []  # no learning 3 to name: dropped as any other
    (verify,) = [c for c in runner.calls if c.label.startswith("verify ")]
    assert "learnings" not in verify.prompt
