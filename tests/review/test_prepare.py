"""bot.workflows.review.runner.prepare on real pull requests: what a first and a follow-up review look at."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bot.github.models import GitRef, PullRequest, User
from bot.workflows.review.runner import prepare
from policies.config import ReviewConfig
from policies.review_state import ReviewState, patch_signature, with_heads
from tests.conftest import SHARED

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        not (SHARED / "real-repos" / "starlette.bundle").exists(),
        reason="needs ../shared/real-repos (a fixture repository covers the same paths)",
    ),
]
PRS = SHARED / "real-repos" / "starlette-prs.json"


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("starlette") / "s.git"
    subprocess.run(
        [
            "git",
            "clone",
            "-q",
            "--bare",
            str(SHARED / "real-repos" / "starlette.bundle"),
            str(target),
        ],
        check=True,
    )
    return target


def pull(base: str, head: str) -> PullRequest:
    return PullRequest(
        id=1,
        number=1,
        head=GitRef(ref="topic", sha=head),
        base=GitRef(ref="master", sha=base),
        user=User(login="author"),
    )


def prs() -> list[dict[str, Any]]:
    return list(json.loads(PRS.read_text())) if PRS.exists() else []


async def first_and_follow_up(mirror: Path, pr: dict[str, Any]) -> tuple[Any, Any]:
    config = ReviewConfig()
    first = await prepare(
        mirror,
        pull=pull(pr["base"], pr["commits"][-2]),
        state=ReviewState(),
        config=config,
        full=False,
        fence="F",
        author_trusted=False,
    )
    state = with_heads(ReviewState(), first.base, first.head, first.signatures)
    second = await prepare(
        mirror,
        pull=pull(pr["base"], pr["commits"][-1]),
        state=state,
        config=config,
        full=False,
        fence="F",
        author_trusted=False,
    )
    return first, second


@pytest.mark.parametrize("pr", prs(), ids=lambda p: f"pr{p['pr']}")
async def test_follow_up_reviews_only_what_the_push_changed(
    mirror: Path, pr: dict[str, Any]
) -> None:
    first, second = await first_and_follow_up(mirror, pr)
    reviewed_first = set(first.plan.paths) | {s.path for s in first.plan.skipped}
    assert reviewed_first == {f.path for f in first.changes.files}
    again = set(second.plan.paths)
    if pr["pr"] == 541:
        # The last commit merges the base branch into the PR: nothing of the PR changed.
        assert again <= set(pr["files"]) and len(again) <= 1
    else:
        assert again <= set(pr["last_push_files"])
    for unit in second.units:
        assert 'fence="F"' in unit["block"] and unit["block"].startswith("<untrusted-data")
    unchanged = [s for s in second.plan.skipped if s.reason == "unchanged since the last review"]
    assert {s.path for s in unchanged} | again | {
        s.path for s in second.plan.skipped if s.reason != "unchanged since the last review"
    } == {f.path for f in second.changes.files}


async def test_full_review_and_force_push(mirror: Path) -> None:
    pr = next(p for p in prs() if len(p["commits"]) >= 3)
    first, _ = await first_and_follow_up(mirror, pr)
    state = with_heads(ReviewState(), first.base, first.head, first.signatures)
    config = ReviewConfig()
    full = await prepare(
        mirror,
        pull=pull(pr["base"], pr["commits"][-1]),
        state=state,
        config=config,
        full=True,
        fence="F",
        author_trusted=True,
    )
    assert set(full.plan.paths) | {s.path for s in full.plan.skipped} == set(pr["files"])
    assert not any(u["focus"] for u in full.units)
    # A head that is not a descendant of the reviewed one (a force push): whole patches of
    # the files whose patch changed, no "since the last review" focus.
    rewritten = state.model_copy(update={"heads": [pr["commits"][0][:39] + "0"]})
    forced = await prepare(
        mirror,
        pull=pull(pr["base"], pr["commits"][-1]),
        state=rewritten,
        config=config,
        full=False,
        fence="F",
        author_trusted=True,
    )
    assert not any(u["focus"] for u in forced.units)
    assert {p for p in forced.plan.paths} == {
        f.path
        for f in forced.changes.files
        if first.signatures.get(f.path) != patch_signature(f.patch)
    } - {s.path for s in forced.plan.skipped}
