"""End to end on a real pull request: starlette's #867 from `../shared/real-repos`, as if the
app had opened it from a `bot/` branch at its first commit, reviewed by a person with two
inline comments (skipped without `../shared`; test_e2e_iterate.py tells the whole story on
`fixtures/repos/calc`)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import anyio
import pytest

from tests.e2e_world import RealPull, needs_real
from tests.fakes.fix_model import Edit
from tests.fakes.github import FakeGitHub
from tests.test_e2e_iterate import BRANCH, Model, World

pytestmark = [pytest.mark.slow, needs_real]

REQUESTS = "starlette/requests.py"
SWALLOWED = "                except http.cookies.CookieError:\n                    pass\n"
LOGGED = (
    "                except http.cookies.CookieError:\n"
    "                    cookies = {}  # an invalid header gives no cookies at all\n"
)
COMMENTS = [
    {"path": REQUESTS, "line": 97, "body": "say why an invalid cookie header is dropped"},
    {"path": "docs/requests.md", "line": 76, "body": "name RFC 2109 as a link"},
]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    real = RealPull.clone(tmp_path_factory.mktemp("iterate-real"), 867)
    first = real.commit(0)
    subprocess.run(
        ["git", f"--git-dir={real.bare}", "update-ref", f"refs/heads/{BRANCH}", first], check=True
    )
    source = subprocess.run(
        ["git", f"--git-dir={real.bare}", "show", f"{first}:{REQUESTS}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert SWALLOWED in source
    fake = FakeGitHub()
    fake.add_repo("octo", "hello", real.bare, default_branch="master")
    fake.add_installation(42, "octo", ["octo/hello"])
    fake.set_permission("octo", "hello", "maint", "write")
    anyio.run(
        lambda: fake.add_pull(
            "octo",
            "hello",
            head=BRANCH,
            base=str(real.pr["base"]),
            user=fake.bot_login,
            title="Ignore invalid cookies",
        )
    )
    edit = Edit(
        "line 97: say why an invalid cookie",
        {REQUESTS: source.replace(SWALLOWED, LOGGED)},
        "Say why an invalid cookie header gives no cookies",
    )
    model = Model((edit,))
    serving = World.serving(
        real.root, fake, model, ("--receivers", "1"), model=model, git_dir=real.bare
    )
    with serving as w:
        yield w


def test_a_review_of_a_real_pull_request_gets_one_commit_and_the_replies(world: World) -> None:
    before = world.head()
    guid = world.review(comments=COMMENTS)
    _, status = world.finished(guid)
    assert status == "succeeded", world.log.read_text()[-4000:]
    after = world.head()
    assert world.git("rev-parse", f"{after}~1").strip() == before
    assert "an invalid header gives no cookies" in world.git("show", f"{after}:{REQUESTS}")
    changed = world.git("diff", "--name-only", before, after).split()
    assert changed == [REQUESTS]
    for comment in world.review_comments_by("maint"):
        (reply,) = world.replies_to(comment["id"])
        assert (
            reply["body"]
            == f"Addressed in `{after[:7]}`: one commit for the 2 comments of this review."
        )
    assert [r["login"] for r in world.pull()["requested_reviewers"]] == ["maint"]
