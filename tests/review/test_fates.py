"""bot.workflows.review.fates at a pull request's close, on the fake GitHub: the threads are
read once more (a maintainer's 👎 dismisses, a writer's "Done" marks fixed, the author's
"fixed" does nothing), open findings on outdated lines end `outdated`, the rest
`open_at_close`; an unreadable thread list leaves the memory's fates."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.store.sqlite import Store
from bot.workflows.review import fates, memory
from policies.finding_fates import PullClosed
from policies.review_state import ReviewState, StoredFinding
from tests.fakes.github import FakeGitHub, commit_files, make_fake_github
from tests.github._client_world import Sleeps, make_app

pytestmark = pytest.mark.anyio

BOT = "repo-agent[bot]"
BASE = "".join(f"line {i}\n" for i in range(1, 30))
LINES = [4, 5, 6, 7, 8]


@pytest.fixture
async def fake(tmp_path: Path) -> FakeGitHub:
    fake = make_fake_github(tmp_path, files={"app.py": BASE})
    bare = fake.repos["octo/hello"].git_dir
    changed = BASE
    for n in LINES:
        changed = changed.replace(f"line {n}\n", f"changed {n}\n")
    commit_files(bare, "topic", {"app.py": changed}, "c", base="main")
    await fake.add_pull("octo", "hello", head="topic", user="alice")
    fake.set_permission("octo", "hello", "maint", "maintain")
    fake.set_permission("octo", "hello", "carol", "write")
    return fake


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store.open(tmp_path / "bot.sqlite3")


async def posted(fake: FakeGitHub, store: Store) -> list[dict[str, object]]:
    """Our review of five lines, its findings in the store's memory as a review leaves them."""
    fr = fake.repos["octo/hello"]
    head = fr.pulls[1]["head"]["sha"]
    async with make_app(fake, Sleeps()) as app:
        client = app.installation(42, "octo", "hello")
        await client.create_review(
            1,
            body="s",
            commit_id=head,
            comments=[
                {"path": "app.py", "line": n, "side": "RIGHT", "body": f"ours {n}"} for n in LINES
            ],
        )
    ours = list(fr.review_comments[1])
    state = ReviewState(
        heads=[head],
        findings=[
            StoredFinding(
                fingerprint=f"f{i}",
                path="app.py",
                line=n,
                title=f"t{i}",
                comment_id=c["id"],
                severity="low" if i == 4 else "high",
                head=head,
            )
            for i, (n, c) in enumerate(zip(LINES, ours, strict=True))
        ],
    )
    state.findings[4] = state.findings[4].model_copy(
        update={"status": "fixed", "resolution": f"Fixed in {'d' * 40}"}
    )
    await memory.save_state(store, "octo/hello", 1, state)
    await fates.record(store, "octo/hello", 1, state)
    return ours


async def test_the_close_reads_the_threads_once_more(fake: FakeGitHub, store: Store) -> None:
    ours = await posted(fake, store)
    assert [f.outcome for f in store.finding_fates()] == ["open"] * 4 + ["fixed"]
    fake.react_to_review_comment(ours[0]["id"], "maint")
    fake.add_review_comment(
        "octo", "hello", 1, "Done.", user="carol", path="app.py", in_reply_to=ours[1]["id"]
    )
    fake.add_review_comment(
        "octo", "hello", 1, "fixed", user="alice", path="app.py", in_reply_to=ours[2]["id"]
    )
    # A push changes line 7 under its finding; nothing re-checked it.
    bare = fake.repos["octo/hello"].git_dir
    text = BASE
    for n in LINES:
        text = text.replace(f"line {n}\n", "moved 7\n" if n == 7 else f"changed {n}\n")
    sha = commit_files(bare, "topic", {"app.py": text}, "d")
    await fake.push_pull("octo", "hello", 1, sha)
    async with make_app(fake, Sleeps()) as app:
        client = app.installation(42, "octo", "hello")
        line = await fates.close_pull(
            store, PullClosed("octo/hello", 1, 42, True), client=client, bot_login=BOT
        )
    got = [(f.fingerprint, f.outcome, f.actor, f.how, f.pull) for f in store.finding_fates()]
    assert got == [
        ("f0", "dismissed", "maint", "👎", "merged"),
        ("f1", "fixed", "carol", "marked fixed", "merged"),
        ("f2", "open_at_close", None, None, "merged"),
        ("f3", "outdated", None, None, "merged"),
        ("f4", "fixed", "d" * 40, "re-check", "merged"),
    ]
    assert line == (
        "pull request merged: 5 findings (1 dismissed, 2 fixed, 1 open_at_close, 1 outdated)"
    )
    # The memory keeps what the close learned: a reopened pull request starts from it.
    kept = await memory.load_state(store, "octo/hello", 1, bot_login=BOT)
    assert [f.status for f in kept.findings] == ["dismissed", "fixed", "open", "open", "fixed"]


async def test_unreadable_threads_leave_the_memorys_fates(fake: FakeGitHub, store: Store) -> None:
    ours = await posted(fake, store)
    fake.react_to_review_comment(ours[0]["id"], "maint")
    fake.fail_next("POST", "*/graphql", 403, times=5)
    async with make_app(fake, Sleeps()) as app:
        client = app.installation(42, "octo", "hello")
        await fates.close_pull(
            store, PullClosed("octo/hello", 1, 42, False), client=client, bot_login=BOT
        )
    outcomes = [(f.outcome, f.pull) for f in store.finding_fates()]
    assert outcomes == [("open_at_close", "closed")] * 4 + [("fixed", "closed")]


async def test_a_pull_request_never_reviewed_records_nothing(store: Store) -> None:
    line = await fates.close_pull(
        store, PullClosed("octo/hello", 9, 42, True), client=None, bot_login=BOT
    )
    assert line == "pull request merged: no findings were posted"
    assert store.finding_fates() == []


async def test_a_review_that_ends_after_the_merge_records_a_closed_pull_request(
    store: Store,
) -> None:
    from bot.workflows.review import runner

    state = ReviewState(
        findings=[
            StoredFinding(fingerprint="f0", path="a.py", title="t0"),
            StoredFinding(fingerprint="f1", path="a.py", title="t1", status="fixed"),
        ]
    )
    await runner.remember(store, "octo/hello", 3, state, pull="merged")
    got = [(f.outcome, f.pull) for f in store.finding_fates()]
    assert got == [("open_at_close", "merged"), ("fixed", "merged")]
    # Reopened and reviewed again: open once more.
    await runner.remember(store, "octo/hello", 3, state)
    assert [(f.outcome, f.pull) for f in store.finding_fates()] == [
        ("open", "open"),
        ("fixed", "open"),
    ]
