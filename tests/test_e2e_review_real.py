"""End to end on a real pull request: starlette's #867 from `../shared/real-repos`, reviewed
at its first commit, then the push of its second commit (skipped without `../shared`; the
`fixtures/repos/calc` pull request in test_e2e_review.py covers the same paths)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import anyio
import pytest

from tests.conftest import SHARED
from tests.e2e_world import ReviewWorld, head_files
from tests.fakes.github import FakeGitHub
from tests.fakes.review_model import ReviewModel
from tests.review._calc import CalcRepo

World = ReviewWorld
REAL = SHARED / "real-repos"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (REAL / "starlette.bundle").exists(), reason="needs ../shared/real-repos"
    ),
]


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[World, dict[str, object]]]:
    root = tmp_path_factory.mktemp("review-real")
    pr = next(p for p in json.loads((REAL / "starlette-prs.json").read_text()) if p["pr"] == 867)
    bare = root / "remote" / "octo" / "hello.git"
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(REAL / "starlette.bundle"), str(bare)], check=True
    )
    fake = FakeGitHub()
    fake.add_repo("octo", "hello", bare, default_branch="master")
    fake.add_installation(42, "octo", ["octo/hello"])
    fake.set_permission("octo", "hello", "octo", "admin")
    anyio.run(
        lambda: fake.add_pull(
            "octo", "hello", head=pr["commits"][-2], base=pr["base"], user="aviramha"
        )
    )
    model = ReviewModel(generic=True, outside=True, files=head_files(bare, fake))
    calc = CalcRepo(bare, pr["base"], pr["commits"][-2], pr["commits"][-1])
    with World.serving(root, fake, model, model=model, calc=calc) as w:
        yield w, pr


def test_a_real_pull_request_and_its_push(real: tuple[World, dict[str, object]]) -> None:
    world, pr = real
    fake = world.fake
    guid = world.post("pull_request", world.pull_payload("opened"))
    _, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-3000:]
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
