"""bot.workflows.review.memory: who may dismiss, where the mirrored state is read from, its key, and
that packing it never holds up the event loop."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import pytest
from cryptography.hazmat.primitives import serialization

from bot.github.models import IssueComment, User
from bot.publish.render import run_marker, sticky_marker
from bot.settings import Settings, load_settings
from bot.workflows.review import memory
from policies.review_state import ReviewState, StoredFinding, encode_marker
from tests.fakes.github import FakeGitHub, commit_files, make_fake_github
from tests.github._client_world import Sleeps, make_app

BOT = "repo-agent[bot]"
KEY = b"s" * 32
BASE = "".join(f"line {i}\n" for i in range(1, 30))


def _comment(n: int, body: str, login: str = BOT) -> IssueComment:
    return IssueComment(id=n, body=body, user=User(login=login))


def _summary(run: str, line: str, kind: str = "review", sticky: str | None = "review") -> str:
    head = run_marker(run, kind) + (f"\n{sticky_marker(sticky)}" if sticky else "")
    return f"{head}\n### Review\n\nAll good.\n{line}"


def test_only_the_last_line_of_the_apps_own_review_summary_is_read(
    caplog: pytest.LogCaptureFixture,
) -> None:
    mine = ReviewState(heads=["a" * 40])
    newer = ReviewState(heads=["a" * 40, "b" * 40])
    paused = ReviewState(paused=True)

    def line(state: ReviewState, number: int = 1) -> str:
        return encode_marker(state, key=KEY, repo="octo/hello", number=number)

    comments = [
        _comment(1, _summary("wf_aaaaaaaaaaaa", line(mine))),
        # The same, signed line as the last line of comments that are not the summary:
        _comment(2, f"I saw:\n{line(paused)}", login="alice"),  # someone else's
        _comment(3, _summary("wf_bbbbbbbbbbbb", line(paused), kind="ask", sticky=None)),
        _comment(4, _summary("wf_cccccccccccc", line(paused), sticky="fix")),
        _comment(5, f"{line(paused)}\n{_summary('wf_dddddddddddd', 'no marker')}"),
        _comment(6, _summary("wf_eeeeeeeeeeee", line(paused), kind="fix")),
        # A summary by someone else whose login only looks like the app's.
        _comment(7, _summary("wf_ffffffffffff", line(paused)), login="repo-agent"),
        # Another pull request's real summary line.
        _comment(8, _summary("wf_999999999999", line(paused, number=2))),
    ]
    where = {"bot_login": BOT, "key": KEY, "repo": "octo/hello", "number": 1}
    with caplog.at_level("WARNING"):
        assert memory.recover_state(comments, **where) == mine  # type: ignore[arg-type]
    assert "ignored" in caplog.text
    record = next(r for r in caplog.records if "ignored" in r.getMessage())
    assert getattr(record, "ignored", None) == 7
    # The newest summary that verifies wins; a wrong key reads nothing.
    later = [*comments, _comment(9, _summary("wf_111111111111", line(newer)))]
    assert memory.recover_state(later, **where) == newer  # type: ignore[arg-type]
    wrong = {**where, "key": b"other"}
    assert memory.recover_state(later, **wrong) is None  # type: ignore[arg-type]


def test_the_marker_is_packed_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[int] = []
    real = memory.encode_marker

    def spy(state: ReviewState, *, key: bytes, repo: str, number: int) -> str:
        threads.append(threading.get_ident())
        return real(state, key=key, repo=repo, number=number)

    monkeypatch.setattr(memory, "encode_marker", spy)
    state = ReviewState(
        findings=[
            StoredFinding(fingerprint=f"{i:020x}", path=f"f{i}.py", title=f"t{i}")
            for i in range(2500)
        ]
    )

    async def main() -> tuple[int, str]:
        loop = threading.get_ident()
        return loop, await memory.mirror_line(state, key=KEY, repo="octo/hello", number=1)

    loop, line = anyio.run(main)
    assert threads and threads[0] != loop
    assert line == real(state, key=KEY, repo="octo/hello", number=1)


def _pkcs1(pem: str) -> str:
    key = serialization.load_pem_private_key(pem.encode(), password=None)
    return key.private_bytes(  # type: ignore[union-attr]
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()


def test_the_key_comes_from_the_private_key_else_the_webhook_secret(tmp_path: Path) -> None:
    fake = FakeGitHub()
    pem = fake.private_key_pem
    inline = load_settings({"BOT_PRIVATE_KEY": pem, "BOT_WEBHOOK_SECRET": "hook-1"}, None)
    (tmp_path / "app.pem").write_text(_pkcs1(pem))
    as_file = load_settings({"BOT_PRIVATE_KEY_PATH": str(tmp_path / "app.pem")}, None)
    key = memory.review_state_key(inline)
    assert key == memory.review_state_key(as_file)  # however the PEM is written
    assert len(key) == 32 and pem.encode() not in key
    hook = memory.review_state_key(load_settings({"BOT_WEBHOOK_SECRET": "hook-1,hook-0"}, None))
    assert hook not in (key, b"hook-1") and len(hook) == 32
    assert hook == memory.review_state_key(load_settings({"BOT_WEBHOOK_SECRET": "hook-1"}, None))
    nothing = Settings()
    assert memory.review_state_key(nothing) != memory.review_state_key(nothing)


@pytest.fixture
async def fake(tmp_path: Path) -> FakeGitHub:
    fake = make_fake_github(tmp_path, files={"app.py": BASE})
    bare = fake.repos["octo/hello"].git_dir
    commit_files(bare, "topic", {"app.py": BASE.replace("line 4\n", "four\n")}, "c", base="main")
    await fake.add_pull("octo", "hello", head="topic", user="alice")
    fake.set_permission("octo", "hello", "maint", "maintain")
    fake.set_permission("octo", "hello", "tri", "triage")
    fake.set_permission("octo", "hello", "carol", "write")
    return fake


@pytest.mark.anyio
async def test_only_people_who_may_write_dismiss(fake: FakeGitHub) -> None:
    """The author (no permission), a triager, and a writer whose permission GitHub does not
    tell (500s) dismiss nothing; a maintainer does."""
    fr = fake.repos["octo/hello"]
    head = fr.pulls[1]["head"]["sha"]
    async with make_app(fake, Sleeps()) as app:
        client = app.installation(42, "octo", "hello")
        lines = [4, 3, 5, 6]
        await client.create_review(
            1,
            body="s",
            commit_id=head,
            comments=[
                {"path": "app.py", "line": n, "side": "RIGHT", "body": f"ours {n}"} for n in lines
            ],
        )
        ours = list(fr.review_comments[1])
        fake.resolve_thread(ours[0]["id"], "alice")
        fake.react_to_review_comment(ours[1]["id"], "tri")
        fake.add_review_comment(
            "octo", "hello", 1, "false positive", user="carol", path="app.py", line=5,
            in_reply_to=ours[2]["id"],
        )  # fmt: skip
        fake.fail_next("GET", "*/collaborators/carol/permission", 500, times=10)
        fake.react_to_review_comment(ours[3]["id"], "maint")
        fake.react_to_review_comment(ours[3]["id"], "alice")
        state = ReviewState(
            findings=[
                StoredFinding(fingerprint=f"f{i}", path="app.py", title=f"t{i}", comment_id=c["id"])
                for i, c in enumerate(ours)
            ]
        )
        threads = await client.review_threads(1)
        writers = await memory.writers_among(client, state, threads, bot_login=BOT)
        assert writers == {"maint"}
        after, now = memory.apply_threads(state, threads, bot_login=BOT, writers=writers)
    assert [f.status for f in after.findings] == ["open", "open", "open", "dismissed"]
    assert now == ["t3 (@maint reacted 👎)"]
    assert all(f.thread_id for f in after.findings)
