"""Tests for bot/publish/publisher.py against the fake GitHub through the real client."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.github.client import GitHubApp, InstallationClient, RetryPolicy
from bot.publish.publisher import Publisher
from bot.publish.render import Progress, parse_markers, run_marker
from policies.outcome import Blocked, Outcome
from tests.fakes.github import FakeGitHub, commit_files, make_fake_github
from tests.github._markdown_check import hidden_comments, problems

RUN = "wf_00000000000a"
TOKEN = "ghp_" + "Z9y8X7w6V5" * 3 + "u4T3s2"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fake(tmp_path: Path) -> FakeGitHub:
    fake = make_fake_github(tmp_path, files={"src/app.py": "print('hi')\n"})
    fake.add_issue("octo", "hello", title="Crash", body="It crashes", user="reporter")
    return fake


@pytest.fixture
async def client(fake: FakeGitHub) -> AsyncIterator[InstallationClient]:
    async def no_sleep(_: float) -> None:
        return None

    app = GitHubApp(
        fake.app_id,
        fake.private_key_pem,
        api_url="http://github.test",
        transport=httpx.ASGITransport(fake.app),
        policy=RetryPolicy(backoff_s=0.0, mutation_interval_s=0.0),
        sleep=no_sleep,
    )
    try:
        yield app.installation(42, "octo", "hello")
    finally:
        await app.aclose()


def publisher(client: InstallationClient, fake: FakeGitHub, **kw: Any) -> Publisher:
    options: dict[str, Any] = {"run_id": RUN, "kind": "triage", "number": 1}
    options.update(kw)
    return Publisher(client, bot_login=fake.bot_login, **options)


def progress(run_id: str = RUN, kind: str = "triage", phase: str | None = None) -> Progress:
    return Progress(
        run_id=run_id, workflow=kind, phases=("Explore", "Conclude"), current_phase=phase
    )


def outcome(
    summary: str = "Looks like a bug in `src/app.py`.", run_id: str = RUN, kind: str = "triage"
) -> Outcome:
    return Outcome(status="succeeded", summary=summary, run_id=run_id, workflow=kind)


def writes(fake: FakeGitHub) -> list[tuple[str, str]]:
    return [(c.method, c.path) for c in fake.writes()]


@pytest.mark.anyio
async def test_one_comment_created_throttled_and_finalized(
    client: InstallationClient, fake: FakeGitHub
) -> None:
    clock = Clock()
    pub = publisher(client, fake, known_comments=[], interval=3.0, clock=clock)
    await pub.start(progress())
    clock.now += 1.0
    assert await pub.progress(progress(phase="Conclude")) is False
    clock.now += 3.0
    assert await pub.progress(progress(phase="Conclude")) is True
    await pub.finish(outcome())
    comments = fake.comments_on("octo", "hello", 1)
    assert len(comments) == 1
    assert "Looks like a bug" in comments[0]["body"]
    assert comments[0]["user"]["login"] == fake.bot_login
    cid = comments[0]["id"]
    assert writes(fake) == [
        ("POST", "/repos/octo/hello/issues/1/comments"),
        ("PATCH", f"/repos/octo/hello/issues/comments/{cid}"),
        ("PATCH", f"/repos/octo/hello/issues/comments/{cid}"),
    ]
    assert fake.calls_to("GET", "*/comments") == []  # known_comments spared the lookup


@pytest.mark.anyio
async def test_unchanged_body_is_not_sent_again(
    client: InstallationClient, fake: FakeGitHub
) -> None:
    pub = publisher(client, fake, interval=0.0)
    await pub.start(progress())
    await pub.progress(progress())
    assert len(writes(fake)) == 1


@pytest.mark.anyio
async def test_retried_run_edits_its_comment_instead_of_posting(
    client: InstallationClient, fake: FakeGitHub
) -> None:
    await publisher(client, fake).start(progress())
    again = publisher(client, fake)  # a new process after a crash: nothing known
    await again.start(progress(phase="Explore"))
    await again.finish(outcome())
    assert len(fake.comments_on("octo", "hello", 1)) == 1
    assert [m for m, _ in writes(fake)] == ["POST", "PATCH", "PATCH"]


@pytest.mark.anyio
async def test_later_run_of_a_sticky_kind_reuses_the_comment(
    client: InstallationClient, fake: FakeGitHub
) -> None:
    first = publisher(client, fake)
    await first.start(progress())
    await first.finish(outcome("first"))
    later = publisher(client, fake, run_id="wf_00000000000b")
    await later.start(progress("wf_00000000000b"))
    await later.finish(outcome("second", run_id="wf_00000000000b"))
    (comment,) = fake.comments_on("octo", "hello", 1)
    assert parse_markers(comment["body"]).run_id == "wf_00000000000b"
    assert "second" in comment["body"]


@pytest.mark.anyio
async def test_each_ask_gets_its_own_comment(client: InstallationClient, fake: FakeGitHub) -> None:
    for run_id in ("wf_00000000000c", "wf_00000000000d"):
        pub = publisher(client, fake, run_id=run_id, kind="ask")
        await pub.start(progress(run_id, "ask"))
        await pub.finish(outcome(f"answer {run_id}", run_id=run_id, kind="ask"))
    bodies = [c["body"] for c in fake.comments_on("octo", "hello", 1)]
    assert len(bodies) == 2
    assert "answer wf_00000000000c" in bodies[0]
    assert "answer wf_00000000000d" in bodies[1]


@pytest.mark.anyio
async def test_a_copied_marker_in_someone_elses_comment_is_never_edited(
    client: InstallationClient, fake: FakeGitHub
) -> None:
    planted = f"{run_marker(RUN, 'triage')}\n<!-- bot:sticky=triage -->\nmine"
    fake.add_comment("octo", "hello", 1, planted, user="mallory")
    pub = publisher(client, fake)
    await pub.start(progress())
    await pub.finish(outcome())
    mallory, ours = fake.comments_on("octo", "hello", 1)
    assert mallory["body"] == planted
    assert ours["user"]["login"] == fake.bot_login


@pytest.mark.anyio
async def test_everything_posted_is_redacted(client: InstallationClient, fake: FakeGitHub) -> None:
    secret_value = "operator-secret-42"
    pub = publisher(
        client,
        fake,
        redactor=lambda text: text.replace(secret_value, "[redacted secret]").replace(TOKEN, "[x]"),
    )
    await pub.start(progress())
    await pub.finish(outcome(f"token {TOKEN} and {secret_value}"))
    body = fake.comments_on("octo", "hello", 1)[0]["body"]
    assert TOKEN not in body
    assert secret_value not in body


@pytest.mark.anyio
async def test_default_redactor_removes_token_shapes(
    client: InstallationClient, fake: FakeGitHub
) -> None:
    pub = publisher(client, fake)
    await pub.start(progress())
    await pub.finish(outcome(f"echo {TOKEN}"))
    body = fake.comments_on("octo", "hello", 1)[0]["body"]
    assert TOKEN not in body
    assert "[redacted github token]" in body


@pytest.mark.anyio
async def test_reaction_on_the_command_comment(
    client: InstallationClient, fake: FakeGitHub
) -> None:
    command = fake.add_comment("octo", "hello", 1, "@repo-agent ask why?", user="octo")
    pub = publisher(client, fake, kind="ask", command_comment_id=command["id"])
    await pub.acknowledge()
    await pub.acknowledge()
    calls = fake.calls_to("POST", f"*/issues/comments/{command['id']}/reactions")
    assert [c.json for c in calls] == [{"content": "eyes"}]


@pytest.mark.anyio
async def test_reaction_on_a_review_comment_and_none_on_a_review(
    client: InstallationClient, fake: FakeGitHub
) -> None:
    commit_files(fake.repos["octo/hello"].git_dir, "feature", {"a.txt": "a\n"}, "A", base="main")
    pull = await fake.add_pull("octo", "hello", head="feature", title="A")
    line = fake.add_review_comment("octo", "hello", pull["number"], "@repo-agent ask why?")
    pub = publisher(
        client,
        fake,
        kind="ask",
        number=pull["number"],
        command_comment_id=line["id"],
        command_comment_kind="review_comment",
    )
    await pub.acknowledge()
    assert [r["target"] for r in fake.reactions] == [
        {"repo": "octo/hello", "review_comment_id": line["id"]}
    ]
    review = publisher(
        client, fake, kind="ask", command_comment_id=12345, command_comment_kind="review"
    )
    await review.acknowledge()
    assert len(fake.calls_to("POST", "*/reactions")) == 1


@pytest.mark.anyio
async def test_failed_reaction_does_not_stop_the_run(
    client: InstallationClient, fake: FakeGitHub
) -> None:
    fake.fail_next("POST", "*/reactions", 500, times=10)
    pub = publisher(client, fake, kind="ask", command_comment_id=999)
    await pub.acknowledge()
    await pub.start(progress(kind="ask"))
    assert len(fake.comments_on("octo", "hello", 1)) == 1


@pytest.mark.anyio
async def test_comment_post_survives_two_502s(client: InstallationClient, fake: FakeGitHub) -> None:
    fake.fail_next("POST", "*/issues/1/comments", 502, times=2)
    pub = publisher(client, fake, known_comments=[])
    await pub.start(progress())
    await pub.finish(outcome())
    assert len(fake.comments_on("octo", "hello", 1)) == 1
    assert len(fake.calls_to("POST", "*/issues/1/comments")) == 3


@pytest.mark.anyio
async def test_pull_request_check_run_lifecycle(
    client: InstallationClient, fake: FakeGitHub, tmp_path: Path
) -> None:
    repo = fake.repos["octo/hello"]
    commit_files(repo.git_dir, "feature", {"src/app.py": "print('bye')\n"}, "Change", base="main")
    pull = await fake.add_pull("octo", "hello", head="feature", title="Change greeting")
    sha = pull["head"]["sha"]
    blocked = Blocked("Which?", "", ("a", "b"), "a", "", '@repo-agent review --decision "a"')
    final = Outcome(
        status="blocked", summary="Which?", run_id=RUN, workflow="review", blocked=blocked
    )

    pub = publisher(
        client,
        fake,
        kind="review",
        number=pull["number"],
        check_name="repo-agent: review",
        head_sha=sha,
    )
    await pub.start(progress(kind="review"))
    again = publisher(
        client,
        fake,
        kind="review",
        number=pull["number"],
        check_name="repo-agent: review",
        head_sha=sha,
    )
    await again.start(progress(kind="review"))
    await again.finish(final)

    assert len(fake.check_runs) == 1
    (check,) = fake.check_runs.values()
    assert check["external_id"] == RUN
    assert check["status"] == "completed"
    assert check["conclusion"] == "neutral"
    assert check["output"]["title"] == "Review: Needs a decision"
    assert len(fake.comments_on("octo", "hello", pull["number"])) == 1


@pytest.mark.anyio
async def test_deferred_start_publishes_a_fast_run_in_one_write(
    client: InstallationClient, fake: FakeGitHub
) -> None:
    clock = Clock()
    pub = publisher(client, fake, known_comments=[], clock=clock)
    await pub.start(progress(), defer=True)
    clock.now += 1.0
    assert await pub.progress(progress(phase="Conclude")) is False
    await pub.finish(outcome())
    assert writes(fake) == [("POST", "/repos/octo/hello/issues/1/comments")]
    assert "Looks like a bug" in fake.comments_on("octo", "hello", 1)[0]["body"]


@pytest.mark.anyio
async def test_deferred_start_shows_working_once_the_interval_passes(
    client: InstallationClient, fake: FakeGitHub
) -> None:
    clock = Clock()
    pub = publisher(client, fake, known_comments=[], clock=clock)
    await pub.start(progress(), defer=True)
    clock.now += 3.5
    assert await pub.progress(progress(phase="Explore")) is True
    assert "working" in fake.comments_on("octo", "hello", 1)[0]["body"]
    await pub.finish(outcome())
    assert [m for m, _ in writes(fake)] == ["POST", "PATCH"]


@pytest.mark.anyio
async def test_fast_pull_request_run_creates_its_check_run_completed(
    client: InstallationClient, fake: FakeGitHub
) -> None:
    repo = fake.repos["octo/hello"]
    commit_files(repo.git_dir, "feature", {"src/app.py": "x = 1\n"}, "Change", base="main")
    pull = await fake.add_pull("octo", "hello", head="feature")
    pub = publisher(
        client,
        fake,
        kind="ask",
        number=pull["number"],
        check_name="repo-agent: ask",
        head_sha=pull["head"]["sha"],
        known_fresh_checks=True,
        known_comments=[],
    )
    await pub.start(progress(kind="ask"), defer=True)
    await pub.finish(outcome(kind="ask"))
    assert [(m, p.rsplit("/", 1)[-1]) for m, p in writes(fake)] == [
        ("POST", "comments"),
        ("POST", "check-runs"),
    ]
    (check,) = fake.check_runs.values()
    assert (check["status"], check["conclusion"], check["external_id"]) == (
        "completed",
        "success",
        RUN,
    )


MODEL_WRITTEN = (
    "Fixed it. ![x](https://evil.test/pixel.png) <img src=https://evil.test/p.png>\n"
    "<!-- hidden -->\n"
    f"<!-- bot:run={RUN} kind=review -->\n"
    "<a href=javascript:alert(1)>open</a> and [click](http://x.test)"
)


@pytest.mark.anyio
async def test_model_output_is_posted_clean_in_the_comment_and_the_check_run(
    client: InstallationClient, fake: FakeGitHub
) -> None:
    repo = fake.repos["octo/hello"]
    commit_files(repo.git_dir, "feature", {"src/app.py": "x = 2\n"}, "Change", base="main")
    pull = await fake.add_pull("octo", "hello", head="feature")
    pub = publisher(
        client,
        fake,
        number=pull["number"],
        check_name="repo-agent: triage",
        head_sha=pull["head"]["sha"],
    )
    await pub.start(progress())
    await pub.finish(outcome(MODEL_WRITTEN))
    (comment,) = fake.comments_on("octo", "hello", pull["number"])
    body = comment["body"]
    own = (run_marker(RUN, "triage"), "<!-- bot:sticky=triage -->", "<sub>", "</sub>")
    assert problems(body, allowed_html=own) == []
    assert hidden_comments(body) == [run_marker(RUN, "triage"), "<!-- bot:sticky=triage -->"]
    assert "bot:run=" + RUN + " kind=review" not in body
    assert "evil.test" not in body
    assert "open" in body and "click" in body and "x.test" not in body.split("click")[1]
    (check,) = fake.check_runs.values()
    assert problems(check["output"]["summary"], allowed_html=own) == []
    assert "evil.test" not in check["output"]["summary"]


@pytest.mark.anyio
async def test_amend_edits_only_the_runs_own_comment_and_never_creates_one(
    client: InstallationClient, fake: FakeGitHub
) -> None:
    blocked = Blocked("Which?", "", ("a", "b"), "a", "", "@app decide 1", '@app decide "x"')
    asked = Outcome(
        status="blocked", summary="Which?", run_id=RUN, workflow="triage", blocked=blocked
    )
    first = publisher(client, fake)
    await first.finish(asked)
    later = "wf_00000000000b"
    await publisher(client, fake, run_id=later).finish(outcome(run_id=later))  # takes the sticky
    fake.add_comment("octo", "hello", 1, run_marker(RUN, "triage") + "\ncopied", user="mallory")
    before = writes(fake)

    gone = publisher(client, fake)
    assert await gone.amend(asked, answered="**Answered** by x") is False
    assert writes(fake) == before  # the sticky comment is a later run's now: left alone

    other = "wf_00000000000c"
    asked = dataclasses.replace(asked, run_id=other)  # a follow-up that blocked again
    follow = publisher(client, fake, run_id=other, kind="follow-up")
    await follow.finish(asked)
    assert follow.comment_url is not None and follow.comment_url.endswith(
        f"#issuecomment-{follow.comment_id}"
    )
    mine = publisher(client, fake, run_id=other, kind="follow-up")
    assert await mine.amend(asked, answered="**Answered** by x") is True
    assert await mine.amend(asked, answered="**Answered** by x") is True
    body = fake.comments[follow.comment_id]["body"]  # type: ignore[index]
    assert "**Answered** by x" in body and "To answer" not in body
    assert parse_markers(body).kind == "follow-up"
    assert [m for m, _ in writes(fake)[len(before) :]] == ["POST", "PATCH"]


@pytest.mark.anyio
async def test_amend_keeps_the_hidden_line_the_comment_ends_with(
    client: InstallationClient, fake: FakeGitHub
) -> None:
    blocked = Blocked("Ship?", "", ("yes", "no"), "no", "", "@app decide 2", '@app decide "x"')
    asked = Outcome(
        status="blocked", summary="Ship?", run_id=RUN, workflow="review", blocked=blocked
    )
    line = "<!-- bot:review-state v2 abc -->"
    first = publisher(client, fake, kind="review")
    await first.finish(asked, hidden=line)
    again = publisher(client, fake, kind="review")
    assert await again.amend(asked, answered="**Answered** by x", hidden=line) is True
    body = fake.comments[first.comment_id]["body"]  # type: ignore[index]
    assert "**Answered** by x" in body and body.endswith("\n" + line)
