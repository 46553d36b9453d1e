"""End to end: what became of each finding, through `bot serve`, the fake GitHub and the fake
model, read back with `bot findings --json` and `GET /metrics`.

The pull request is `fixtures/repos/calc` (see test_e2e_review.py): its first review posts
three findings (`mean` divides by zero, `clamp` swaps its bounds, one outside the diff). A
maintainer 👎's `mean` (the author's "fixed" reply on it counts for nothing: she may not write
here), the push that fixes `clamp` has it re-checked and fixed, and the merge leaves the
third one open at close. One server serves the module; the tests run in order. The last
test does the same on a real pull request, starlette's #867 from `../shared/real-repos`
(skipped without it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e_world import REAL, RealPull, ReviewWorld, review_world
from tests.fakes.review_model import CALC_RULES, ReviewModel
from tests.scripted import metric_sample

pytestmark = pytest.mark.slow

World = ReviewWorld
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("review-fates")
    with review_world(root, ReviewModel(CALC_RULES), permissions={"maint": "write"}) as w:
        yield w


def findings(world: World, *args: str) -> dict[str, Any]:
    """`bot findings --json [args]` as an operator runs it, on the server's database."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOT_")}
    env.update(BOT_DATA_DIR=str(world.root / "data"), PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "findings", "--json", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=world.root,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def by_title(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["title"]: f for f in report["findings"]}


def decided(world: World, guid: str) -> tuple[str, str]:
    def done() -> bool:
        rows = world.query("SELECT decision FROM deliveries WHERE guid = ?", guid)
        return bool(rows) and rows[0][0] is not None

    world.wait(f"the decision on {guid}", done)
    decision, reason = world.query("SELECT decision, reason FROM deliveries WHERE guid = ?", guid)[
        0
    ]
    return str(decision), str(reason)


def test_a_review_records_every_finding_it_posts(world: World) -> None:
    world.review_opened()
    report = findings(world)
    assert len(report["findings"]) == 3
    assert {f["outcome"] for f in report["findings"]} == {"open"}
    assert {f["pull"] for f in report["findings"]} == {"open"}
    assert {f["head"] for f in report["findings"]} == {world.calc.head1}
    total = report["figures"]["total"]
    assert total["posted"] == 3 and total["resolution_rate"] is None  # nothing closed yet


def test_a_fixing_push_and_a_maintainers_thumbs_down(world: World) -> None:
    fake = world.fake
    inline = {c["body"].split("\n", 1)[0]: c for c in world.review_comments()}
    mean = next(c for t, c in inline.items() if "mean divides by zero" in t)
    # The author cannot clear a finding by saying so; a maintainer's 👎 dismisses it.
    fake.add_review_comment(
        "octo", "hello", 1, "Fixed", user="alice", path=mean["path"], in_reply_to=mean["id"]
    )
    fake.react_to_review_comment(mean["id"], "maint")
    _, status = world.finished(world.push(world.calc.head2))
    assert status == "succeeded", world.log.read_text()[-3000:]
    fates = by_title(findings(world))
    clamp = next(f for t, f in fates.items() if "clamp swaps" in t)
    assert (clamp["outcome"], clamp["how"], clamp["actor"]) == (
        "fixed",
        "re-check",
        world.calc.head2,
    )
    dismissed = next(f for t, f in fates.items() if "mean divides by zero" in t)
    assert (dismissed["outcome"], dismissed["actor"], dismissed["how"]) == (
        "dismissed",
        "maint",
        "👎",
    )
    assert sorted(f["outcome"] for f in fates.values()) == ["dismissed", "fixed", "open"]


def test_after_the_merge_findings_and_metrics_show_one_fixed(world: World) -> None:
    payload = world.fake.close_pull("octo", "hello", 1, merged=True, user="maint")
    decision, reason = decided(world, world.post("pull_request", payload))
    assert decision == "findings", reason
    assert reason == ("pull request merged: 3 findings (1 dismissed, 1 fixed, 1 open_at_close)"), (
        world.log.read_text()[-3000:]
    )
    report = findings(world)
    assert {f["pull"] for f in report["findings"]} == {"merged"}
    assert sorted(f["outcome"] for f in report["findings"]) == [
        "dismissed",
        "fixed",
        "open_at_close",
    ]
    total = report["figures"]["total"]
    assert (total["posted"], total["fixed"], total["dismissed"], total["open_at_close"]) == (
        3,
        1,
        1,
        1,
    )
    assert total["resolution_rate"] == pytest.approx(1 / 3)
    assert report["figures"]["repos"]["octo/hello"]["fixed"] == 1
    assert report["figures"]["categories"]  # per category and severity as well
    assert report["figures"]["severities"]
    assert findings(world, "--repo", "octo/other")["findings"] == []

    page = httpx.get(f"{world.url}/metrics", timeout=10).text
    assert metric_sample(page, "bot_review_findings_total", outcome="fixed") == 1
    assert metric_sample(page, "bot_review_findings_total", outcome="posted") == 3
    assert metric_sample(page, "bot_review_findings_total", outcome="dismissed") == 1
    assert metric_sample(page, "bot_review_findings_total", outcome="open_at_close") == 1
    assert "octo/hello" not in page
    # The same close delivered again (another GUID) counts nothing twice.
    again, _ = decided(world, world.post("pull_request", payload))
    assert again == "findings"
    page = httpx.get(f"{world.url}/metrics", timeout=10).text
    assert metric_sample(page, "bot_review_findings_total", outcome="posted") == 3
    assert metric_sample(page, "bot_review_findings_total", outcome="fixed") == 1


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    if not (REAL / "starlette.bundle").exists():
        pytest.skip("needs ../shared/real-repos")
    pull = RealPull.clone(tmp_path_factory.mktemp("review-fates-real"), 867)
    with pull.serving(ReviewModel(generic=True, outside=True), user="aviramha") as w:
        yield w


def test_a_real_pull_request_reviewed_pushed_and_closed(real: World) -> None:
    world = real
    world.review_opened()
    first = world.review_comments()[0]
    world.fake.react_to_review_comment(first["id"], "octo")  # the admin 👎's one
    _, status = world.finished(world.push(world.calc.head2))
    assert status == "succeeded", world.log.read_text()[-3000:]
    payload = world.fake.close_pull("octo", "hello", 1, merged=False, user="octo")
    decision, reason = decided(world, world.post("pull_request", payload))
    assert decision == "findings", reason
    report = findings(world)
    fates = report["findings"]
    assert fates and {f["pull"] for f in fates} == {"closed"}
    assert "open" not in {f["outcome"] for f in fates}  # each met an end at the close
    thumbs = [f for f in fates if f["how"] == "👎"]
    assert [(f["outcome"], f["actor"]) for f in thumbs] == [("dismissed", "octo")]
    total = report["figures"]["total"]
    assert total["posted"] == len(fates)
    assert total["resolution_rate"] == pytest.approx(total["fixed"] / len(fates))
    page = httpx.get(f"{world.url}/metrics", timeout=10).text
    for outcome in ("posted", "fixed", "dismissed", "outdated", "open_at_close"):
        assert metric_sample(page, "bot_review_findings_total", outcome=outcome) == total[outcome]
