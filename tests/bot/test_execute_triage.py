"""Triage through the real worker, executor, client and engine: the questions it asks the
reporter, the re-triage their reply starts, and the repository labels it offers and applies."""

from __future__ import annotations

import json

import pytest

from bot.github.client import InstallationClient
from bot.workflows.triage import REPLY_NOTE
from policies.config import RepoConfig, parse_repo_config
from tests.bot.test_execute import Rig, rig  # noqa: F401  (the fixture)
from tests.scripted import NEEDS_INFO_VERDICT, VERDICT, ModelScript

pytestmark = pytest.mark.anyio

QUESTION_1 = "1. Which command fails, and with what error message?"
REPLY = "It is `app start`; it prints `FileNotFoundError: config.yml`. Version 2.1."


def apply_labels(
    rig: Rig,  # noqa: F811
    setting: str = "triage: {apply_labels: true, labels: [bug, docs]}",
) -> None:
    async def read(client: InstallationClient) -> RepoConfig:
        return parse_repo_config(setting)

    rig.executor.config_reader = read


def statuses(rig: Rig) -> list[str]:  # noqa: F811
    rows = rig.store.conn().execute("SELECT status FROM runs ORDER BY created_at, rowid")
    return [str(row[0]) for row in rows]


async def test_an_issue_lacking_information_asks_its_reporter(rig: Rig) -> None:  # noqa: F811
    rig.llm.respond_with(ModelScript(verdict=NEEDS_INFO_VERDICT))
    rig.open_issue("It is broken.", user="reporter")
    await rig.worker.run_until_idle()
    (body,) = rig.own(1)
    assert "### Triage: needs more information" in body
    assert "@reporter, thanks for the report." in body
    assert QUESTION_1 in body and "2. Which version of the app are you running?" in body
    assert "triage runs again with your answers" in body
    assert "**What was found so far**" in body and "`src/app.py:2`" in body
    assert "Decision needed" not in body
    assert statuses(rig) == ["needs_info"]


async def test_the_reporters_reply_triages_again_in_the_same_comment(rig: Rig) -> None:  # noqa: F811
    rig.fake.add_label("octo", "hello", "bug")
    rig.llm.respond_with(ModelScript(verdict=NEEDS_INFO_VERDICT))
    rig.open_issue("It is broken.", user="reporter")
    await rig.worker.run_until_idle()
    (first,) = rig.fake.comments_on("octo", "hello", 1)
    asked = len(rig.llm.bodies)

    rig.llm.respond_with(ModelScript(verdict=VERDICT))
    reply = rig.command(1, REPLY, user="reporter")
    await rig.worker.run_until_idle()
    assert statuses(rig) == ["needs_info", "succeeded"]
    (body,) = rig.own(1)
    assert body.startswith("<!-- bot:run=wf_") and "### Triage\n" in body
    assert "crashes at start-up when `config.yml` is missing" in body
    edits = rig.fake.calls_to("PATCH", f"/repos/octo/hello/issues/comments/{first['id']}")
    assert len(edits) == 1
    assert len(rig.fake.calls_to("POST", "/repos/octo/hello/issues/1/comments")) == 1
    reactions = rig.fake.calls_to("POST", f"*/issues/comments/{reply['id']}/reactions")
    assert [c.json for c in reactions] == [{"content": "eyes"}]
    again = json.dumps(rig.llm.bodies[asked:])
    assert json.dumps(REPLY_NOTE.strip())[1:40] in again
    assert "FileNotFoundError: config.yml" in again
    assert "Which command fails" in again  # the earlier questions are part of the thread
    # The labels were listed once for both runs.
    assert len(rig.fake.calls_to("GET", "/repos/octo/hello/labels")) == 1


async def test_three_replies_triage_again_and_a_fourth_does_not(rig: Rig) -> None:  # noqa: F811
    rig.llm.respond_with(ModelScript(verdict=NEEDS_INFO_VERDICT))
    rig.open_issue("It is broken.", user="reporter")
    await rig.worker.run_until_idle()
    bodies = []
    for n in range(4):
        rig.command(1, f"More detail, take {n}.", user="reporter")
        await rig.worker.run_until_idle()
        bodies.append(rig.own(1)[0])
    assert statuses(rig) == ["needs_info"] * 4
    assert "triage runs again with your answers" in bodies[1]
    assert "a maintainer will take it from there" in bodies[2]  # the third and last re-triage
    assert bodies[3] == bodies[2]
    assert len(rig.own(1)) == 1


async def test_another_readers_comment_does_not_triage_again(rig: Rig) -> None:  # noqa: F811
    rig.llm.respond_with(ModelScript(verdict=NEEDS_INFO_VERDICT))
    rig.open_issue("It is broken.", user="reporter")
    await rig.worker.run_until_idle()
    model_calls, writes = len(rig.llm.bodies), len(rig.fake.writes())
    rig.command(1, "Same here, it is broken for me too.", user="reader")
    await rig.worker.run_until_idle()
    assert (len(rig.llm.bodies), len(rig.fake.writes())) == (model_calls, writes)
    assert statuses(rig) == ["needs_info"]


async def test_the_repositorys_labels_are_offered_and_the_chosen_ones_applied(
    rig: Rig,  # noqa: F811
) -> None:
    for name in ("bug", "docs"):
        rig.fake.add_label("octo", "hello", name)
    apply_labels(rig)
    rig.llm.respond_with(ModelScript(verdict={**VERDICT, "labels": ["BUG", "made-up-label"]}))
    rig.open_issue("The app crashes at start-up.")
    await rig.worker.run_until_idle()
    assert 'choose only from the repository\'s labels: \\"bug\\", \\"docs\\"' in rig.prompts()
    (added,) = rig.fake.calls_to("POST", "/repos/octo/hello/issues/1/labels")
    assert added.json == {"labels": ["bug"]}
    assert rig.fake.repos["octo/hello"].labels_created == []
    assert [label["name"] for label in rig.fake.repos["octo/hello"].issues[1]["labels"]] == ["bug"]
    (body,) = rig.own(1)
    assert "Labels applied: `bug`." in body
    assert statuses(rig) == ["succeeded"]
    # Applied before the comment is posted, so the comment can say how it went.
    assert [p.rsplit("/", 1)[-1] for _, p in rig.writes()] == ["labels", "comments"]


async def test_only_the_labels_the_allow_list_names_are_applied(rig: Rig) -> None:  # noqa: F811
    for name in ("bug", "deploy-approved"):
        rig.fake.add_label("octo", "hello", name)
    apply_labels(rig, "triage: {apply_labels: true}")  # no `labels`: none may be applied
    rig.llm.respond_with(ModelScript(verdict={**VERDICT, "labels": ["deploy-approved", "bug"]}))
    rig.open_issue("The app crashes at start-up.")
    await rig.worker.run_until_idle()
    assert rig.fake.calls_to("POST", "*/labels") == []
    (body,) = rig.own(1)
    assert "**Suggested labels:** `deploy-approved`, `bug`" in body
    assert "Not applied, as they are not in `triage.labels`: `deploy-approved`, `bug`." in body

    apply_labels(rig, "triage: {apply_labels: true, labels: [BUG]}")
    rig.llm.respond_with(ModelScript(verdict={**VERDICT, "labels": ["deploy-approved", "bug"]}))
    second = rig.open_issue("The app crashes again.")["number"]
    await rig.worker.run_until_idle()
    (added,) = rig.fake.calls_to("POST", f"/repos/octo/hello/issues/{second}/labels")
    assert added.json == {"labels": ["bug"]}
    (body,) = rig.own(second)
    assert "Labels applied: `bug`." in body
    assert "Not applied, as they are not in `triage.labels`: `deploy-approved`." in body


async def test_labels_are_only_suggested_unless_the_repository_says_so(rig: Rig) -> None:  # noqa: F811
    rig.fake.add_label("octo", "hello", "bug")
    apply_labels(rig, "triage: {apply_labels: false}")
    rig.open_issue("The app crashes at start-up.")
    await rig.worker.run_until_idle()
    assert rig.fake.calls_to("POST", "*/labels") == []
    (body,) = rig.own(1)
    assert "**Suggested labels:** `bug`" in body and "Labels applied" not in body


@pytest.mark.parametrize("status", [403, 404, 422])
async def test_github_refusing_the_labels_is_said_in_the_comment(
    rig: Rig,  # noqa: F811
    status: int,
) -> None:
    rig.fake.add_label("octo", "hello", "bug")
    apply_labels(rig)
    rig.fake.fail_next("POST", "/repos/octo/hello/issues/1/labels", status)
    rig.open_issue("The app crashes at start-up.")
    await rig.worker.run_until_idle()
    (body,) = rig.own(1)
    assert f"The labels `bug` could not be applied: GitHub answered {status}." in body
    assert statuses(rig) == ["succeeded"]
    assert rig.fake.repos["octo/hello"].issues[1]["labels"] == []


async def test_triage_goes_on_without_labels_it_cannot_list(rig: Rig) -> None:  # noqa: F811
    apply_labels(rig)
    rig.fake.fail_next("GET", "/repos/octo/hello/labels", 403)
    rig.open_issue("The app crashes at start-up.")
    await rig.worker.run_until_idle()
    assert "suggest short conventional labels" in rig.prompts()
    assert rig.fake.calls_to("POST", "*/labels") == []
    (body,) = rig.own(1)
    assert "Labels were not applied: the repository's labels could not be listed." in body
    assert statuses(rig) == ["succeeded"]
