"""`fix` asked in a review thread: the app's own thread is resolved only once the fix is on
the pull request's head (bot/workflows/fix/thread.py, against the fake GitHub)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.github.installation import InstallationClient
from bot.store.sqlite import Store
from bot.workflows.fix.thread import close_own_thread, thread_args
from bot.workflows.review.memory import load_state, save_state
from bot.workflows.thread_context import read_thread
from policies.event import Trigger
from policies.outcome import Outcome, OutcomeStatus
from policies.review_state import ReviewState, StoredFinding
from tests.fakes.github import FakeGitHub, commit_files, make_fake_github
from tests.github._client_world import make_app

pytestmark = pytest.mark.anyio

FP = "abcdef1234567890"


@pytest.fixture
async def fake(tmp_path: Path) -> FakeGitHub:
    fake = make_fake_github(tmp_path, files={"calc.py": "def mean(xs):\n    return 0\n"})
    bare = fake.repos["octo/hello"].git_dir
    commit_files(
        bare, "bot/fix-3-mean", {"calc.py": "def mean(xs):\n    return 1\n"}, "c", base="main"
    )
    await fake.add_pull("octo", "hello", head="bot/fix-3-mean", user=fake.bot_login)
    return fake


@pytest.fixture
async def client(fake: FakeGitHub) -> AsyncIterator[InstallationClient]:
    async with make_app(fake) as app:
        yield app.installation(42, "octo", "hello")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = Store.open(tmp_path / "bot.sqlite3")
    yield store
    store.close()


TRIGGER = Trigger("fix", "octo/hello", 42, "pull_request", 1, "maint", "d1")


def done(*branches: str, status: OutcomeStatus = "succeeded") -> Outcome:
    return Outcome(
        status=status, summary="-", run_id="wf_0000000000aa", workflow="fix", branches=branches
    )


async def ours(
    fake: FakeGitHub, client: InstallationClient, store: Store
) -> tuple[dict[str, Any], dict[str, Any]]:
    finding = fake.add_review_comment(
        "octo",
        "hello",
        1,
        f"Wrong mean <!-- bot:finding={FP} -->",
        user=fake.bot_login,
        path="calc.py",
        line=2,
    )
    state = ReviewState(
        findings=[StoredFinding(fingerprint=FP, path="calc.py", line=2, comment_id=finding["id"])]
    )
    await save_state(store, "octo/hello", 1, state)
    thread = await read_thread(client, 1, finding["id"])
    assert thread is not None
    return finding, thread_args(thread, bot_login=fake.bot_login)


async def test_the_apps_own_thread_is_resolved_once_the_fix_is_on_the_head(
    fake: FakeGitHub, client: InstallationClient, store: Store
) -> None:
    finding, args = await ours(fake, client, store)
    assert args == {"first_comment_id": finding["id"], "own": True, "finding": FP}
    resolved = await close_own_thread(
        client,
        TRIGGER,
        {"thread": args},
        done("bot/fix-3-mean"),
        store=store,
        bot_login=fake.bot_login,
    )
    assert resolved and fake.thread_of(finding["id"])["resolved"]
    (stored,) = (await load_state(store, "octo/hello", 1, bot_login=fake.bot_login)).findings
    head = fake.repos["octo/hello"].pulls[1]["head"]["sha"]
    assert stored.status == "fixed" and stored.resolution == f"fixed by `fix` in {head[:12]}"


@pytest.mark.parametrize(
    ("outcome", "own"),
    [
        pytest.param(done("bot/fix-1-other"), True, id="a-draft-pull-request-into-the-head"),
        pytest.param(done(), True, id="a-patch-nothing-pushed"),
        pytest.param(done("bot/fix-3-mean", status="blocked"), True, id="blocked"),
        pytest.param(done("bot/fix-3-mean"), False, id="someone-elses-thread"),
    ],
)
async def test_no_thread_is_resolved_before_its_fix_is_on_the_head(
    fake: FakeGitHub, client: InstallationClient, store: Store, outcome: Outcome, own: bool
) -> None:
    finding, args = await ours(fake, client, store)
    resolved = await close_own_thread(
        client,
        TRIGGER,
        {"thread": {**args, "own": own}},
        outcome,
        store=store,
        bot_login=fake.bot_login,
    )
    assert not resolved and not fake.thread_of(finding["id"])["resolved"]
    (stored,) = (await load_state(store, "octo/hello", 1, bot_login=fake.bot_login)).findings
    assert stored.status == "open"


async def test_a_person_who_writes_in_a_thread_does_not_make_it_the_apps_own(
    fake: FakeGitHub, client: InstallationClient
) -> None:
    theirs = fake.add_review_comment(
        "octo", "hello", 1, "Rename this", user="bob", path="calc.py", line=2
    )
    thread = await read_thread(client, 1, theirs["id"])
    assert thread is not None
    assert thread_args(thread, bot_login=fake.bot_login) == {
        "first_comment_id": theirs["id"],
        "own": False,
        "finding": None,
    }
