"""`decide` through the real worker, executor, engine and store, against the fake GitHub and model.

A BLOCKED run is answered by a reply; the follow-up resumes it (read-only calls before the
decision replay from its journal), posts its own comment, and marks the question answered.
"""

from __future__ import annotations

import pytest

from bot.store.sqlite import RunRecord
from policies.budget import BudgetLimits
from policies.event import Trigger
from tests.bot import test_execute
from tests.bot.test_execute import Rig
from tests.fakes.github import commit_files
from tests.scripted import ANSWER, BLOCKED_VERDICT, ModelScript, issues_opened, user_prompt

pytestmark = pytest.mark.anyio
rig = test_execute.rig  # the executor tests' rig: the real worker, executor, engine and store

ASK_BLOCKED = {
    **ANSWER,
    "blocked": {
        "decision": "Should the answer cover the legacy loader too?",
        "why": "Two loaders read the config.",
        "options": ["Only the new loader", "Both loaders"],
        "default": "Only the new loader",
        "risk": "An answer about the wrong loader misleads.",
    },
}


def own_comments(rig: Rig, number: int) -> list[dict[str, object]]:
    return [
        c
        for c in rig.fake.comments_on("octo", "hello", number)
        if c["user"]["login"] == rig.fake.bot_login  # type: ignore[index]
    ]


def run_of(rig: Rig, guid: str) -> RunRecord:
    (run,) = rig.store.runs_for_delivery(guid)
    return run


def decide_trigger(guid: str, args: str, number: int = 1) -> Trigger:
    return Trigger(
        workflow="decide",
        repo_full_name="octo/hello",
        installation_id=42,
        target_kind="issue",
        number=number,
        actor="maint",
        delivery_id=guid,
        args=args,
        command="decide",
    )


async def blocked_triage(rig: Rig) -> RunRecord:
    rig.llm.respond_with(ModelScript(verdict=BLOCKED_VERDICT))
    rig.open_issue("It is broken.")
    await rig.worker.run_until_idle()
    rig.llm.respond_with(ModelScript())
    run = run_of(rig, f"guid-{rig.counter}")
    assert run.status == "blocked"
    return run


async def test_decide_resumes_a_blocked_triage_and_marks_the_question_answered(rig: Rig) -> None:
    blocked = await blocked_triage(rig)
    assert blocked.args is not None and blocked.args["context"]
    assert len(rig.llm.bodies) == 2
    rig.command(1, "@repo-agent decide 2")
    await rig.worker.run_until_idle()

    follow = run_of(rig, "guid-2")
    assert follow.status == "succeeded"
    assert follow.args is not None
    assert follow.args["decision"] == {
        "text": "`app build` fails",
        "by": "maint",
        "option": 2,
        "question": "Which command fails, and with what error message?",
        "blocked_run": blocked.id,
        "earlier": [],
    }
    # The same arguments as the blocked run, so the explorer's prompt is byte-identical.
    assert {k: v for k, v in follow.args.items() if k != "decision"} == blocked.args
    # Only the conclusion ran again: the explorer replayed from the blocked run's journal.
    assert len(rig.llm.bodies) == 3
    conclusion = user_prompt(rig.llm.bodies[2])
    assert conclusion.startswith("Triage issue #1")
    assert (
        'stopped to ask "Which command fails, and with what error message?". A maintainer '
        "with write access to the repository, @maint, chose option 2: \"'app build' fails\". "
        "Treat it as a decision, not as data"
    ) in conclusion
    assert conclusion.index("The maintainer's decision") < conclusion.index("## Context")

    asked, answer = own_comments(rig, 1)
    asked_body, answer_body = str(asked["body"]), str(answer["body"])
    assert f"<!-- bot:run={follow.id} kind=follow-up -->" in answer_body
    assert "bot:sticky" not in answer_body
    assert "### Triage\n" in answer_body
    assert (
        f"**Follow-up** to the question of [run `{blocked.id}`]({asked['html_url']}), answered "
        "by @maint: option 2, “'app build' fails”; replayed 1 of 2 agent calls."
    ) in answer_body
    assert "crashes at start-up when `config.yml` is missing" in answer_body

    assert f"<!-- bot:run={blocked.id} kind=triage -->" in asked_body
    assert (
        "**Answered** by @\u200bmaint: option 2, “'app build' fails” — follow-up: "
        f"[run `{follow.id}`]({answer['html_url']})"
    ) in asked_body
    assert "**Decision needed:** Which command fails" in asked_body
    assert "To answer" not in asked_body
    assert [m for m, _ in rig.writes()] == ["POST", "POST", "POST", "PATCH"]

    # The same question again: already answered, a short reply, no model.
    rig.command(1, '@repo-agent decide "the app crashes on `app start --fast`"')
    await rig.worker.run_until_idle()
    assert run_of(rig, "guid-3").status == "skipped"
    reply = str(own_comments(rig, 1)[-1]["body"])
    assert "kind=decide" in reply and "bot:sticky=decide" in reply
    assert f"The question of run `{blocked.id}` was already answered: run `{follow.id}`" in reply
    assert len(rig.llm.bodies) == 3


async def test_a_follow_up_that_blocks_again_is_the_next_one_answered(rig: Rig) -> None:
    blocked = await blocked_triage(rig)
    rig.llm.respond_with(ModelScript(verdict=BLOCKED_VERDICT))
    rig.command(1, "@repo-agent decide 1")
    await rig.worker.run_until_idle()
    again = run_of(rig, "guid-2")
    assert again.status == "blocked"
    rig.llm.respond_with(ModelScript())
    rig.command(1, '@repo-agent decide "it fails on the first run only"')
    await rig.worker.run_until_idle()

    last = run_of(rig, "guid-3")
    assert last.status == "succeeded"
    assert last.args is not None
    decision = last.args["decision"]
    assert (decision["blocked_run"], decision["option"]) == (again.id, None)
    assert [d["text"] for d in decision["earlier"]] == ["`app start` fails"]
    # Two follow-ups: the explorer ran once in all; both conclusions saw their answers.
    assert len(rig.llm.bodies) == 4
    assert 'answered in their own words: "it fails on the first run only"' in user_prompt(
        rig.llm.bodies[3]
    )
    asked, first, second = (str(c["body"]) for c in own_comments(rig, 1))
    assert f"follow-up: [run `{again.id}`]" in asked
    assert "### Triage: needs a decision" in first
    assert (
        f"**Answered** by @\u200bmaint: “it fails on the first run only” — follow-up: [run `{last.id}`]"
        in first
    )
    assert f"**Follow-up** to the question of [run `{blocked.id}`]" in first
    assert f"**Follow-up** to the question of [run `{again.id}`]" in second
    assert "replayed 1 of 2 agent calls" in second


async def test_decide_answers_an_ask_in_the_persons_own_words(rig: Rig) -> None:
    issue = rig.fake.add_issue("octo", "hello", title="Config", body="Where is it read?")
    rig.llm.respond_with(ModelScript(answer=ASK_BLOCKED))
    rig.command(issue["number"], "@repo-agent ask where is the config read?")
    await rig.worker.run_until_idle()
    blocked = run_of(rig, "guid-1")
    assert blocked.status == "blocked"
    rig.llm.respond_with(ModelScript())
    rig.command(issue["number"], "@repo-agent decide only the loader used at start-up")
    await rig.worker.run_until_idle()
    follow = run_of(rig, "guid-2")
    assert follow.status == "succeeded"
    asked, answer = (str(c["body"]) for c in own_comments(rig, issue["number"]))
    assert "### Answer\n" in answer
    assert "replayed 1 of 2 agent calls" in answer
    assert "`load_config()`" in answer
    assert "“only the loader used at start-up” — follow-up" in asked
    assert len(rig.llm.bodies) == 3
    assert 'answered in their own words: "only the loader used at start-up"' in user_prompt(
        rig.llm.bodies[2]
    )


async def test_nothing_blocked_an_option_out_of_range_and_a_reader_get_no_follow_up(
    rig: Rig,
) -> None:
    rig.open_issue("The app crashes at start-up.")
    await rig.worker.run_until_idle()
    rig.command(1, "@repo-agent decide 1")
    await rig.worker.run_until_idle()
    _triage, reply = (str(c["body"]) for c in own_comments(rig, 1))
    assert "There is no BLOCKED question to answer here" in reply
    assert run_of(rig, "guid-2").status == "skipped"
    assert len(rig.llm.bodies) == 2

    rig.llm.respond_with(ModelScript(verdict=BLOCKED_VERDICT))
    issue = rig.fake.add_issue("octo", "hello", title="Broken", body="It is broken.")
    rig.deliver("issues", issues_opened(issue, "octo/hello", 42))
    await rig.worker.run_until_idle()
    rig.llm.respond_with(ModelScript())
    models = len(rig.llm.bodies)
    rig.command(issue["number"], "@repo-agent decide 9")
    await rig.worker.run_until_idle()
    blocked, reply = (str(c["body"]) for c in own_comments(rig, issue["number"]))
    assert "There is no option 9" in reply and "has options 1, 2 or 3" in reply
    assert "To answer" in blocked

    writes = len(rig.writes())
    rig.command(issue["number"], "@repo-agent decide 1", user="reader")
    await rig.worker.run_until_idle()
    assert len(rig.writes()) == writes
    assert rig.store.runs_for_delivery(f"guid-{rig.counter}") == []
    assert len(rig.llm.bodies) == models


async def test_a_retried_follow_up_posts_once(rig: Rig) -> None:
    await blocked_triage(rig)
    rig.command(1, "@repo-agent decide 1")
    await rig.worker.run_until_idle()
    follow = run_of(rig, "guid-2")
    posts = [p for m, p in rig.writes() if m == "POST" and p.endswith("/comments")]
    assert len(posts) == 2

    await rig.executor(decide_trigger("guid-2", "1"), follow)  # finished: nothing happens
    rig.store.update_run(follow.id, status="running")  # as if the process died mid-run
    crashed = rig.store.get_run(follow.id)
    assert crashed is not None
    await rig.executor(decide_trigger("guid-2", "1"), crashed)
    assert [p for m, p in rig.writes() if m == "POST" and p.endswith("/comments")] == posts
    assert len(own_comments(rig, 1)) == 2
    again = rig.store.get_run(follow.id)
    assert again is not None and again.status == "succeeded"


async def test_a_failed_post_is_retried_without_the_model_and_still_marks_the_question(
    rig: Rig,
) -> None:
    blocked = await blocked_triage(rig)
    rig.fake.fail_next("POST", "/repos/octo/hello/issues/1/comments", 502, times=4)
    rig.command(1, "@repo-agent decide 1")
    await rig.worker.run_until_idle()
    follow = run_of(rig, "guid-2")
    assert follow.status == "publishing"
    assert "Answered" not in str(own_comments(rig, 1)[0]["body"])
    models = len(rig.llm.bodies)
    await rig.executor(decide_trigger("guid-2", "1"), follow)  # what the retried job does
    assert len(rig.llm.bodies) == models
    asked, answer = (str(c["body"]) for c in own_comments(rig, 1))
    assert f"**Follow-up** to the question of [run `{blocked.id}`]" in answer
    assert f"follow-up: [run `{follow.id}`]" in asked
    done = rig.store.get_run(follow.id)
    assert done is not None and done.status == "succeeded"


@pytest.mark.parametrize(
    ("workflow", "said"),
    [
        pytest.param(
            "nightly", "Runs of `nightly` cannot be resumed by `decide` yet", id="unknown"
        ),
        pytest.param("review", "cannot be resumed: it ran before", id="review-without-args"),
    ],
)
async def test_a_blocked_run_decide_cannot_resume_gets_a_reply_and_no_model(
    rig: Rig, workflow: str, said: str
) -> None:
    issue = rig.fake.add_issue("octo", "hello", title="Q", body="q")
    review = rig.store.create_run(
        delivery_id="old",
        repo="octo/hello",
        target_kind="issue",
        number=issue["number"],
        workflow=workflow,
        mode="webhook",
    )
    blocked = {
        "status": "blocked",
        "summary": "s",
        "run_id": review.id,
        "workflow": workflow,
        "blocked": {"decision": "Ship it?", "options": ["yes", "no"], "default": "no"},
    }
    rig.store.update_run(review.id, status="blocked", outcome=blocked)
    rig.command(issue["number"], "@repo-agent decide 1")
    await rig.worker.run_until_idle()
    (reply,) = (str(c["body"]) for c in own_comments(rig, issue["number"]))
    assert said in reply
    assert run_of(rig, "guid-1").status == "skipped"
    assert rig.llm.bodies == []
    assert rig.store.answered_by(rig.store.get_run(review.id)) is None  # type: ignore[arg-type]


async def test_decide_on_a_pull_request_reads_the_same_head_and_completes_its_check_run(
    rig: Rig,
) -> None:
    repo = rig.fake.repos["octo/hello"]
    commit_files(repo.git_dir, "feature", {"src/app.py": "config = {}\n"}, "Drop yaml", base="main")
    pull = await rig.fake.add_pull("octo", "hello", head="feature", title="Drop yaml", user="maint")
    rig.llm.respond_with(ModelScript(answer=ASK_BLOCKED))
    rig.command(pull["number"], "@repo-agent ask is yaml still needed?")
    await rig.worker.run_until_idle()
    assert run_of(rig, "guid-1").status == "blocked"
    rig.llm.respond_with(ModelScript())
    rig.command(pull["number"], "@repo-agent decide 2")
    await rig.worker.run_until_idle()
    follow = run_of(rig, "guid-2")
    assert follow.status == "succeeded"
    # explorer and reviewer of the change replayed; only the answer ran again
    assert len(rig.llm.bodies) == 4
    _asked, answer = (str(c["body"]) for c in own_comments(rig, pull["number"]))
    assert "replayed 2 of 3 agent calls" in answer
    checks = sorted(rig.fake.check_runs.values(), key=lambda c: c["id"])
    assert [(c["name"], c["head_sha"], c["conclusion"]) for c in checks] == [
        ("repo-agent: ask", pull["head"]["sha"], "neutral"),
        ("repo-agent: ask", pull["head"]["sha"], "success"),
    ]
    assert checks[1]["external_id"] == follow.id


async def test_a_follow_up_stopped_by_its_budget_says_so_and_asks_the_model_nothing(
    rig: Rig,
) -> None:
    issue = rig.fake.add_issue("octo", "hello", title="Config", body="Where is it read?")
    rig.llm.respond_with(ModelScript(answer=ASK_BLOCKED))
    rig.command(issue["number"], "@repo-agent ask where is the config read?")
    await rig.worker.run_until_idle()
    assert run_of(rig, "guid-1").status == "blocked"
    asked = len(rig.llm.bodies)
    rig.executor.run_caps = BudgetLimits(max_tokens=50)  # the operator's cap, for every run
    rig.command(issue["number"], "@repo-agent decide only the loader used at start-up")
    await rig.worker.run_until_idle()
    assert run_of(rig, "guid-2").status == "failed"
    assert len(rig.llm.bodies) == asked  # the replayed call is free; the next one was refused
    answer = str(own_comments(rig, issue["number"])[-1]["body"])
    assert "**Stopped: budget reached: the run's 50 tokens" in answer
    assert "The question was not answered" in answer
