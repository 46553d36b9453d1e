"""End to end on a real pull request: starlette's #867 from `../shared/real-repos`, reviewed
at its first commit, then the push of its second commit (skipped without `../shared`; the
`fixtures/repos/calc` pull request in test_e2e_review.py covers the same paths)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e_world import RealPull, ReviewWorld, needs_real
from tests.fakes.review_model import ReviewModel

World = ReviewWorld
pytestmark = [pytest.mark.slow, needs_real]


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[World, dict[str, object]]]:
    pull = RealPull.clone(tmp_path_factory.mktemp("review-real"), 867)
    model = ReviewModel(generic=True, outside=True)
    with pull.serving(model, user="aviramha") as w:
        yield w, pull.pr


def test_a_real_pull_request_and_its_push(real: tuple[World, dict[str, object]]) -> None:
    world, pr = real
    fake = world.fake
    world.review_opened()
    (review,) = world.reviews()
    assert review["commit_id"] == world.calc.head1
    inline = world.review_comments()
    assert inline  # each one accepted by the fake's anchor check against the real diff
    assert "**Outside the diff**" in review["body"]
    (summary,) = world.own_comments()
    assert "bot:review-state" in summary["body"]
    runs = [r for r in fake.check_runs.values() if r["head_sha"] == world.calc.head1]
    assert len(runs) == 1 and runs[0]["status"] == "completed"

    reviewed_before = len(world.model.reviewed_paths)
    guid = world.push(world.calc.head2)
    _, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-3000:]
    sent = {p for paths in world.model.reviewed_paths[reviewed_before:] for p in paths}
    assert sent and sent <= set(pr["last_push_files"])  # type: ignore[arg-type]
    markers = [c["body"].rsplit("bot:finding=", 1)[-1] for c in world.review_comments()]
    assert len(markers) == len(set(markers))  # no finding posted twice
    assert not any("git-receive-pack" in c.path for c in fake.calls)
