"""How many findings one review takes: the reviewer's schema, the workflow, and the runner each
hold to `review.max_findings`, the most severe kept."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

from bot.engine.schema import normalize_schema
from bot.github.models import GitRef, PullRequest, User
from bot.workflows.review.runner import conclude, prepare
from bot.workflows.review.workflow import most_severe
from bot.workflows.schemas import ReviewFinding, UnitReview, unit_review_schema
from policies.config import ReviewConfig
from policies.review_state import ReviewState
from tests.review._calc import build_calc

FLOOD = 2500


def finding(i: int, severity: str = "low") -> dict[str, object]:
    line = 16 + i % 7
    return {
        "path": "calc/ops.py",
        "start_line": line,
        "end_line": line,
        "severity": severity,
        "category": "bug",
        "title": f"Problem number {i}",
        "explanation": "x",
    }


def test_the_reviewers_schema_holds_at_most_max_findings() -> None:
    schema = normalize_schema(unit_review_schema(50))
    assert schema is not None
    jsonschema.validate({"findings": [finding(i) for i in range(50)]}, schema)
    with pytest.raises(jsonschema.ValidationError, match="too long"):
        jsonschema.validate({"findings": [finding(i) for i in range(FLOOD)]}, schema)
    assert unit_review_schema(50) is unit_review_schema(50)  # one class per cap
    widest = normalize_schema(unit_review_schema(10_000))
    assert widest is not None and widest["properties"]["findings"]["maxItems"] == 500
    # The plain model reads any result the schema admitted.
    assert len(UnitReview.model_validate({"findings": [finding(1)]}).findings) == 1


def test_most_severe_keeps_the_worst_in_order() -> None:
    found = [
        ReviewFinding.model_validate(finding(i, sev))
        for i, sev in enumerate(["low", "high", "critical", "low", "medium", "critical"])
    ]
    kept = most_severe(found, 3)
    assert [f.title for f in kept] == ["Problem number 2", "Problem number 5", "Problem number 1"]
    assert most_severe(found, 50) == sorted(
        found, key=lambda f: ["critical", "high", "medium", "low"].index(f.severity)
    )


@pytest.mark.anyio
async def test_the_runner_takes_at_most_max_findings(tmp_path: Path) -> None:
    calc = build_calc(tmp_path)
    pull = PullRequest(
        id=1,
        number=1,
        head=GitRef(ref="topic", sha=calc.head1),
        base=GitRef(ref="main", sha=calc.base),
        user=User(login="alice"),
    )
    config = ReviewConfig(max_findings=50)
    prep = await prepare(
        calc.git_dir,
        pull=pull,
        state=ReviewState(),
        config=config,
        full=False,
        fence="F",
        author_trusted=False,
    )
    result = {"review": {"findings": ["junk", *(finding(i) for i in range(FLOOD))]}}
    done = await conclude(calc.git_dir, prep, result, config=config)
    assert len(done.new) == 50
    assert len(done.state.findings) == 50
