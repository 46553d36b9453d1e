"""The review workflow on the real engine with a scripted runner: pipeline, reuse, failures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.agents.models import CACHE_MARK
from bot.engine.engine import Engine
from bot.engine.types import AgentInvocation
from bot.workflows.review import workflow as review
from tests.engine.scripted import POLICY, Script, ScriptedRunner

pytestmark = pytest.mark.anyio
FENCE = "0123456789abcdef"

FINDING = {
    "path": "a.py",
    "start_line": 3,
    "end_line": 3,
    "severity": "medium",
    "category": "bug",
    "title": "Off by one",
    "explanation": "`a.py:3`",
}
ACCEPTED = {
    "criteria": [
        {"id": cid, "status": "accepted", "evidence": ["a.py:3"], "note": ""}
        for cid in ("evidence", "in-change", "not-repeated")
    ]
}


def unit(n: int, path: str) -> dict[str, Any]:
    return {"id": f"u{n}", "key": f"key-{n}", "paths": [path], "block": f"changes of {path}"}


def args(units: list[dict[str, Any]], **review_args: Any) -> dict[str, Any]:
    return {
        "target": "pull request #1",
        "fence": FENCE,
        "context": "context",
        "review": {"units": units, "known": [], "recheck": [], "suggest": 0, **review_args},
    }


def rule(call: AgentInvocation) -> Script | None:
    if call.label.startswith("review "):
        path = "a.py" if call.label.endswith("u1") else "b.py"
        return Script(structured={"findings": [{**FINDING, "path": path}]})
    if call.label.startswith("verify "):
        return Script(structured={"verdicts": [{"index": 0, "keep": True}], "acceptance": ACCEPTED})
    if call.label == "summarize":
        return Script(structured={"summary": "One finding."})
    return None


async def test_finished_units_are_recorded_and_reused(tmp_path: Path) -> None:
    runner = ScriptedRunner(rule=rule)
    engine = Engine(runner, data_dir=tmp_path)
    done: dict[str, Any] = {}
    units = [unit(1, "a.py"), unit(2, "b.py")]
    first = await engine.run(
        review.meta, review.workflow, args(units, done=done), interaction=POLICY, repo=None
    )
    assert first.status == "completed"
    assert set(done) == {"key-1", "key-2"}
    assert sorted(f["path"] for f in first.result["review"]["findings"]) == ["a.py", "b.py"]

    runner.calls.clear()
    second = await engine.run(
        review.meta,
        review.workflow,
        args(units, cached={"key-1": done["key-1"]}),
        interaction=POLICY,
        repo=None,
    )
    labels = [c.label for c in runner.calls]
    assert "review u1" not in labels and "verify u1" not in labels
    assert "review u2" in labels and "verify u2" in labels
    assert len(second.result["review"]["findings"]) == 2


async def test_a_unit_whose_verifier_fails_posts_nothing_and_is_not_remembered(
    tmp_path: Path,
) -> None:
    def failing(call: AgentInvocation) -> Script | None:
        if call.label == "verify u1":
            return Script(error="the model timed out")
        return rule(call)

    runner = ScriptedRunner(rule=failing)
    done: dict[str, Any] = {}
    details = await Engine(runner, data_dir=tmp_path).run(
        review.meta,
        review.workflow,
        args([unit(1, "a.py")], done=done),
        interaction=POLICY,
        repo=None,
    )
    assert details.status == "completed"
    result = details.result["review"]
    assert result["findings"] == [] and result["unverified"] == ["a.py"]
    assert done == {}


async def test_a_follow_up_with_nothing_serious_makes_no_advisor_call(tmp_path: Path) -> None:
    runner = ScriptedRunner(rule=rule)
    details = await Engine(runner, data_dir=tmp_path).run(
        review.meta,
        review.workflow,
        args([unit(1, "a.py")], follow_up=True),
        interaction=POLICY,
        repo=None,
    )
    assert "summarize" not in [c.label for c in runner.calls]
    assert details.result["summary"] == ""


async def test_with_linked_issues_the_advisor_judges_them_on_every_review(tmp_path: Path) -> None:
    linked = [{"issue": "#3", "title": "mean crashes"}]

    def judging(call: AgentInvocation) -> Script | None:
        if call.label == "summarize":
            return Script(
                structured={
                    "summary": "Fixes mean.",
                    "linked_issues": [{"issue": "#3", "addressed": "yes", "reason": "guarded"}],
                }
            )
        return rule(call)

    runner = ScriptedRunner(rule=judging)
    details = await Engine(runner, data_dir=tmp_path).run(
        review.meta,
        review.workflow,
        args([unit(1, "a.py")], follow_up=True, linked=linked),
        interaction=POLICY,
        repo=None,
    )
    (summarize,) = [c for c in runner.calls if c.label == "summarize"]
    assert 'Linked issues (JSON):\n[{"issue": "#3", "title": "mean crashes"}]' in summarize.prompt
    assert details.result["linked_issues"] == [
        {"issue": "#3", "addressed": "yes", "reason": "guarded"}
    ]


async def test_every_units_calls_share_their_prompt_up_to_the_mark(tmp_path: Path) -> None:
    runner = ScriptedRunner(rule=rule)
    engine = Engine(runner, data_dir=tmp_path)
    units = [unit(1, "a.py"), unit(2, "b.py")]
    done = await engine.run(
        review.meta, review.workflow, args(units), interaction=POLICY, repo=None
    )
    assert done.status == "completed"
    for role in ("review ", "verify "):
        calls = [c for c in runner.calls if c.label.startswith(role)]
        assert len(calls) == 2
        heads = {c.prompt.split(CACHE_MARK)[0] for c in calls}
        assert len(heads) == 1, role  # the provider caches it across the units
        (head,) = heads
        assert "a.py" not in head and "b.py" not in head
        assert all(c.prompt.count(CACHE_MARK) == 1 for c in calls)
    review_1 = next(c for c in runner.calls if c.label == "review u1")
    assert review_1.prompt.split(CACHE_MARK)[1].startswith('Files of this part: "a.py"')
    assert review_1.prompt.split(CACHE_MARK)[0].rstrip().endswith("context")


async def test_a_small_follow_up_delta_is_reviewed_and_ruled_on_in_one_call(tmp_path: Path) -> None:
    runner = ScriptedRunner(rule=rule)
    engine = Engine(runner, data_dir=tmp_path)
    small = {**unit(1, "a.py"), "focus": True, "one_call": True}
    linted = {
        **unit(2, "b.py"),
        "focus": True,
        "one_call": True,
        "lint": [{**FINDING, "path": "b.py"}],
    }
    known = [{"path": "a.py", "title": "Earlier finding", "status": "dismissed"}]
    done = await engine.run(
        review.meta,
        review.workflow,
        args([small, linted], known=known),
        interaction=POLICY,
        repo=None,
    )
    assert done.status == "completed"
    labels = sorted(c.label for c in runner.calls if c.label.split()[0] in ("review", "verify"))
    # The lint hits of the second unit still go to a verifier; the first unit's reviewer rules.
    assert labels == ["review u1", "review u2", "verify u2"]
    (alone,) = [c for c in runner.calls if c.label == "review u1"]
    assert "no verifier will see your findings" in alone.prompt
    assert "Earlier finding" in alone.prompt.split(CACHE_MARK)[1]
    (paired,) = [c for c in runner.calls if c.label == "review u2"]
    assert "no verifier will see your findings" not in paired.prompt
    assert sorted(f["path"] for f in done.result["review"]["findings"]) == ["a.py", "b.py"]


def recheck_item(fingerprint: str, path: str) -> dict[str, Any]:
    return {
        "fingerprint": fingerprint,
        "path": path,
        "line": 3,
        "title": f"Earlier finding {fingerprint}",
        "block": f"code of {path} near line 3 ({fingerprint})",
    }


async def test_a_units_reviewer_re_checks_the_earlier_findings_on_its_files(
    tmp_path: Path,
) -> None:
    def ruling(call: AgentInvocation) -> Script | None:
        if call.label == "review u1":
            verdict = {"fingerprint": "fp-a", "still_present": False, "reason": "a.py:3"}
            return Script(structured={"findings": [FINDING], "rechecks": [verdict]})
        if call.label == "re-check":
            verdict = {"fingerprint": "fp-c", "still_present": True}
            return Script(structured={"verdicts": [verdict]})
        return rule(call)

    runner = ScriptedRunner(rule=ruling)
    recheck = [recheck_item("fp-a", "a.py"), recheck_item("fp-c", "c.py")]
    done = await Engine(runner, data_dir=tmp_path).run(
        review.meta,
        review.workflow,
        args([unit(1, "a.py"), unit(2, "b.py")], recheck=recheck, follow_up=True),
        interaction=POLICY,
        repo=None,
    )
    assert done.status == "completed"
    by_label = {c.label: c for c in runner.calls}
    # The reviewer of a.py reads its earlier finding's code after its own changes, where
    # the prompt a provider caches has ended, and rules on it in the same call.
    head, tail = by_label["review u1"].prompt.split(CACHE_MARK)
    assert "fp-a" not in head and "code of a.py near line 3 (fp-a)" in tail
    assert "fp-a" not in by_label["review u2"].prompt
    assert head == by_label["review u2"].prompt.split(CACHE_MARK)[0]
    # Only the finding on a file no unit reviews gets a re-check call.
    assert "fp-c" in by_label["re-check"].prompt and "fp-a" not in by_label["re-check"].prompt
    verdicts = {v["fingerprint"]: v["still_present"] for v in done.result["review"]["rechecks"]}
    assert verdicts == {"fp-a": False, "fp-c": True}


async def test_a_re_check_no_units_reviewer_answered_goes_to_the_re_check_call(
    tmp_path: Path,
) -> None:
    def silent(call: AgentInvocation) -> Script | None:
        if call.label == "review u1":
            return Script(structured={"findings": [], "rechecks": []})
        if call.label == "re-check":
            verdict = {"fingerprint": "fp-a", "still_present": True}
            return Script(structured={"verdicts": [verdict]})
        return rule(call)

    runner = ScriptedRunner(rule=silent)
    done = await Engine(runner, data_dir=tmp_path).run(
        review.meta,
        review.workflow,
        args([unit(1, "a.py")], recheck=[recheck_item("fp-a", "a.py")], follow_up=True),
        interaction=POLICY,
        repo=None,
    )
    (recheck,) = [c for c in runner.calls if c.label == "re-check"]
    assert "code of a.py near line 3 (fp-a)" in recheck.prompt
    assert done.result["review"]["rechecks"] == [
        {"fingerprint": "fp-a", "still_present": True, "reason": ""}
    ]
