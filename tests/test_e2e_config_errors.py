"""End to end: a broken `.github/bot.yml` is said on GitHub once, where it matters, through
`bot serve`, the fake GitHub and the fake model on 127.0.0.1.

The repository's story, in order: its config has a YAML error on line 1, column 5. A writer's
`@repo-agent ask` gets one reply naming the file, the line, the column and the error, and
saying the app stays off until it is fixed; the same command from someone without write
access gets nothing. A new issue gets nothing on GitHub, and the operator's page shows the
error beside the skip. A pull request gets one neutral check run on its head, whether the
delivery comes again or the same head is pushed again. Text from the file that would ping a
team or hide a comment is shown defused; an error in the file `_extends` names names that
file. Once the file is fixed, the next command runs as usual.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from policies.config_notice import CHECK_TITLE
from policies.untrusted_text import ZWSP
from tests.fakes.gitrepo import commit_files, init_bare_repo
from tests.scripted import bot_with_fakes, comment_created, issues_opened, repository_json
from tests.test_e2e import Bot
from tests.ui.conftest import TOKEN

pytestmark = pytest.mark.slow

BROKEN = "a: b: c\n"  # "mapping values are not allowed here", line 1, column 5
HOSTILE = 'review:\n  "@octo/admins <!-- hidden -->": 1\n'
EXTENDS = "_extends: settings\n"
SETTINGS_BROKEN = "triage:\n  labels: [bug\n"  # an unclosed list in octo/settings' file
FIXED = "triage:\n  enabled: true\n"
CHECK = "repo-agent: review"


@pytest.fixture(scope="module")
def bot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bot]:
    root = tmp_path_factory.mktemp("e2e-config")
    env = {"BOT_UI_TOKEN": TOKEN}
    settings = init_bare_repo(root / "remote" / "octo" / "settings.git", {"README.md": "x\n"})
    with bot_with_fakes(root, extra_env=env, files={".github/bot.yml": BROKEN}) as (
        fake,
        llm,
        running,
    ):
        fake.set_permission("octo", "hello", "maint", "write")
        fake.set_permission("octo", "hello", "reader", "read")
        fake.add_repo("octo", "settings", settings)
        fake.installations[42].repos.append("octo/settings")
        commit_files(settings, "main", {".github/bot.yml": SETTINGS_BROKEN}, "shared config")
        yield Bot(running.url, fake, llm, running.db, running.log)


def write_config(bot: Bot, text: str) -> None:
    commit_files(bot.fake.repos["octo/hello"].git_dir, "main", {".github/bot.yml": text}, "cfg")


def handled(bot: Bot, guid: str) -> tuple[str, str]:
    """Wait until the delivery's job is done (its skip answered, if at all): (decision, reason)."""

    def done() -> bool:
        rows = bot.query("SELECT status FROM jobs WHERE delivery_id = ?", guid)
        return bool(rows) and rows[0][0] == "done"

    bot.wait(f"the job of {guid}", done)
    ((decision, reason),) = bot.query(
        "SELECT decision, reason FROM deliveries WHERE guid = ?", guid
    )
    return str(decision), str(reason)


def command(bot: Bot, number: int, text: str, user: str) -> str:
    comment = bot.fake.add_comment("octo", "hello", number, text, user=user)
    issue = bot.fake.repos["octo/hello"].issues[number]
    bot.post("issue_comment", comment_created(issue, comment, "octo/hello", 42))
    return f"e2e-{bot.counter:04d}"


def again(bot: Bot, guid: str) -> str:
    """The same body as `guid`'s under a new GUID (a replay, or GitHub's redelivery)."""
    event, body = bot.sent[guid]
    bot.counter += 1
    new = f"e2e-{bot.counter:04d}"
    bot.sent[new] = (event, body)
    assert bot.post(event, {}, guid=new).status_code == 202
    return new


def test_a_writers_command_gets_one_reply_naming_the_file_line_and_column(bot: Bot) -> None:
    fake = bot.fake
    issue = fake.add_issue("octo", "hello", title="Where?", body="Config?", user="someone")
    writes, asked = len(fake.writes()), len(bot.llm.bodies)
    guid = command(bot, issue["number"], "@repo-agent ask where is the config read?", "maint")
    decision, reason = handled(bot, guid)
    assert decision == "skip"
    assert reason.startswith("invalid_config: .github/bot.yml line 1, column 5: invalid YAML")

    (reply,) = bot.own(issue["number"])
    body = reply["body"]
    assert "`.github/bot.yml` line 1, column 5:" in body
    assert "mapping values are not allowed here" in body
    assert "stays off in this repository until" in body
    assert "`ask` was not run" in body
    new_writes = fake.writes()[writes:]
    assert [(c.method, c.path) for c in new_writes] == [
        ("POST", f"/repos/octo/hello/issues/{issue['number']}/comments")
    ]
    assert len(bot.llm.bodies) == asked
    assert bot.query("SELECT count(*) FROM runs WHERE delivery_id = ?", guid) == [(0,)]

    # The same body under another GUID: skipped, and the reply is neither repeated nor edited.
    assert handled(bot, again(bot, guid))[0] == "skip"
    assert len(bot.own(issue["number"])) == 1
    assert len(fake.writes()) == writes + 1


def test_the_same_command_from_someone_without_write_access_gets_nothing(bot: Bot) -> None:
    fake = bot.fake
    issue = fake.add_issue("octo", "hello", title="Me too", body="?", user="someone")
    writes = len(fake.writes())
    guid = command(bot, issue["number"], "@repo-agent ask where is the config read?", "reader")
    decision, reason = handled(bot, guid)
    assert (decision, reason.split(":")[0]) == ("skip", "no_permission")
    assert bot.own(issue["number"]) == []
    assert len(fake.writes()) == writes


def test_an_opened_issue_posts_nothing_and_the_operators_page_shows_the_error(bot: Bot) -> None:
    fake = bot.fake
    writes = len(fake.writes())
    issue = fake.add_issue("octo", "hello", title="Crash", body="It crashes.", user="someone")
    guid = f"e2e-{bot.counter + 1:04d}"
    bot.post("issues", issues_opened(issue, "octo/hello", 42))
    decision, reason = handled(bot, guid)
    assert decision == "skip"
    assert reason.startswith("invalid_config: .github/bot.yml line 1, column 5:")
    assert len(fake.writes()) == writes
    assert bot.own(issue["number"]) == []

    with httpx.Client(base_url=bot.url, timeout=10) as client:
        client.post("/ui/sign-in", data={"token": TOKEN})
        listed = client.get("/ui/deliveries").text
        shown = client.get(f"/ui/deliveries/{guid}").text
    for page in (listed, shown):
        assert "invalid_config: .github/bot.yml line 1, column 5: invalid YAML: mapping" in page


def pull_payload(bot: Bot, action: str, number: int) -> dict[str, Any]:
    pull = bot.fake.repos["octo/hello"].pulls[number]
    return {
        "action": action,
        "number": number,
        "pull_request": pull,
        "repository": repository_json("octo/hello"),
        "installation": {"id": 42},
        "sender": pull["user"],
    }


def test_a_pull_request_gets_one_neutral_check_on_its_head(bot: Bot) -> None:
    fake = bot.fake
    bare = fake.repos["octo/hello"].git_dir
    head = commit_files(bare, "topic", {"src/new.py": "x = 1\n"}, "Add", base="main")
    pull = anyio.run(lambda: fake.add_pull("octo", "hello", head="topic", user="alice"))
    number = pull["number"]
    writes = len(fake.writes())
    opened = f"e2e-{bot.counter + 1:04d}"
    bot.post("pull_request", pull_payload(bot, "opened", number))
    assert handled(bot, opened)[0] == "skip"

    def checks() -> list[dict[str, Any]]:
        return [run for run in fake.check_runs.values() if run["head_sha"] == head]

    (check,) = checks()
    assert (check["name"], check["status"], check["conclusion"]) == (CHECK, "completed", "neutral")
    assert check["output"]["title"] == CHECK_TITLE
    summary = check["output"]["summary"]
    assert "`.github/bot.yml` line 1, column 5:" in summary
    assert "stays off in this repository until" in summary
    assert bot.own(number) == []
    assert len(fake.writes()) == writes + 1

    # GitHub delivers it again (the same GUID), the same body comes under another GUID, and
    # the same head is "pushed" again: still the one check, and nothing else written.
    assert bot.post("pull_request", {}, guid=opened).status_code == 200
    assert handled(bot, again(bot, opened))[0] == "skip"
    reopened = f"e2e-{bot.counter + 1:04d}"
    bot.post("pull_request", pull_payload(bot, "reopened", number))
    assert handled(bot, reopened)[0] == "skip"
    assert len(checks()) == 1
    assert len(fake.writes()) == writes + 1


def test_text_from_the_file_is_shown_defused(bot: Bot) -> None:
    write_config(bot, HOSTILE)
    issue = bot.fake.add_issue("octo", "hello", title="Q", body="?", user="someone")
    guid = command(bot, issue["number"], "@repo-agent fix the typo", "maint")
    handled(bot, guid)
    issue_guid = command(bot, issue["number"], "@repo-agent ask what now?", "maint")
    handled(bot, issue_guid)
    replies = bot.own(issue["number"])
    assert len(replies) == 2  # one per command
    for reply in replies:
        body = reply["body"]
        assert f"@{ZWSP}octo/admins" in body
        assert "<!-- hidden" not in body
        assert "`.github/bot.yml` line 2:" in body

    # The pull request's head again, under another error: its one check says the new one.
    pulls = bot.fake.repos["octo/hello"].pulls
    number = max(pulls)
    reopened = f"e2e-{bot.counter + 1:04d}"
    bot.post("pull_request", pull_payload(bot, "reopened", number))
    handled(bot, reopened)
    head = pulls[number]["head"]["sha"]
    (check,) = [run for run in bot.fake.check_runs.values() if run["head_sha"] == head]
    summary = check["output"]["summary"]
    assert f"@{ZWSP}octo/admins" in summary and "<!-- hidden" not in summary
    assert check["conclusion"] == "neutral"


def test_an_error_in_the_extended_file_names_that_file(bot: Bot) -> None:
    write_config(bot, EXTENDS)
    issue = bot.fake.add_issue("octo", "hello", title="Q", body="?", user="someone")
    guid = command(bot, issue["number"], "@repo-agent ask where?", "maint")
    _, reason = handled(bot, guid)
    assert reason.startswith("invalid_config: octo/settings:.github/bot.yml line 3, column 1:")
    (reply,) = bot.own(issue["number"])
    assert "`octo/settings:.github/bot.yml` line 3, column 1:" in reply["body"]


def test_once_the_file_is_fixed_the_next_command_runs(bot: Bot) -> None:
    write_config(bot, FIXED)
    issue = bot.fake.add_issue("octo", "hello", title="Where?", body="Config?", user="someone")
    guid = command(bot, issue["number"], "@repo-agent ask where is the config read?", "maint")
    _, status = bot.finished_run(guid)
    assert status == "succeeded"
    (answer,) = bot.own(issue["number"])
    assert "load_config()" in answer["body"]
    assert "stays off" not in answer["body"]
    assert bot.decided(guid) == "trigger"
