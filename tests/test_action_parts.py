"""`bot action`'s pieces without a job: the environment, the checkout's remote, the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.action.env import ActionEnv, ActionEnvError, read_event
from bot.action.report import ActionReport, RunLine, write_step_summary
from bot.action.runner import review_key
from bot.action.workspace import origin_url, same_repository
from bot.settings import load_settings

JOB = {
    "GITHUB_EVENT_NAME": "pull_request",
    "GITHUB_EVENT_PATH": "/tmp/event.json",
    "GITHUB_TOKEN": "ghs_abcdefghijklmnopqrstuvwxyz0123456789",
    "GITHUB_REPOSITORY": "octo/hello",
    "GITHUB_RUN_ID": "77",
    "GITHUB_RUN_ATTEMPT": "2",
}


def test_the_job_environment_is_read_and_the_token_never_printed() -> None:
    env = ActionEnv.read(JOB)
    assert env.delivery_id == "action-77-2"
    assert env.github_api_url == "https://api.github.com"
    assert "ghs_" not in repr(env)


def test_a_missing_variable_is_named_with_how_to_pass_the_token() -> None:
    with pytest.raises(ActionEnvError, match=r"GITHUB_TOKEN unset \(pass the job's token"):
        ActionEnv.read({k: v for k, v in JOB.items() if k != "GITHUB_TOKEN"})
    with pytest.raises(ActionEnvError, match="not owner/name"):
        ActionEnv.read({**JOB, "GITHUB_REPOSITORY": "hello"})
    with pytest.raises(ActionEnvError, match="not an absolute path"):
        ActionEnv.read({**JOB, "GITHUB_WORKSPACE": "work/hello"})


def test_an_event_file_that_is_missing_or_not_json_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ActionEnvError, match="cannot be read"):
        read_event(tmp_path / "absent.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ActionEnvError, match="not JSON"):
        read_event(tmp_path / "bad.json")


def test_the_checkouts_origin_is_read_as_text(tmp_path: Path) -> None:
    (tmp_path / "config").write_text(
        '[core]\n\tbare = false\n[remote "upstream"]\n\turl = https://x/a/b\n'
        '[remote "origin"]\n\turl = https://github.com/octo/hello\n\tfetch = +refs/*\n'
    )
    assert origin_url(tmp_path) == "https://github.com/octo/hello"
    (tmp_path / "config").write_text("[core]\n")
    assert origin_url(tmp_path) is None


def test_the_memory_key_is_the_state_key_else_derived_from_the_model_key() -> None:
    given = load_settings({"BOT_STATE_KEY": "k" * 32}, dotenv=None)
    derived = load_settings({"BOT_LLM_API_KEY": "sk-0123456789abcdef"}, dotenv=None)
    again = load_settings({"BOT_LLM_API_KEY": "sk-0123456789abcdef"}, dotenv=None)
    other = load_settings({"BOT_LLM_API_KEY": "sk-other-0123456789"}, dotenv=None)
    assert review_key(derived) == review_key(again)  # the next job checks the marker
    assert review_key(derived)[0] != review_key(other)[0] != review_key(given)[0]
    assert b"sk-0123456789abcdef" not in review_key(derived)[0]
    key, warning = review_key(load_settings({}, dotenv=None))
    assert len(key) == 32 and warning is not None and "reviewed in full" in warning


def test_a_short_state_key_is_refused() -> None:
    from bot.settings import SettingsError

    with pytest.raises(SettingsError, match="at least 16 characters"):
        load_settings({"BOT_STATE_KEY": "short"}, dotenv=None)


def test_the_step_summary_quotes_text_and_names_a_missing_permission(tmp_path: Path) -> None:
    failed = RunLine(
        "review",
        "octo/hello#1",
        "failed",
        "GitHub API error 403: Resource not accessible (the token needs pull_requests=write)",
    )
    report = ActionReport("Ran review failed.", True, (failed,), ("@team <b>x</b>",))
    from bot.action.report import permission_notes

    notes = permission_notes((failed,))
    assert notes == [
        "GitHub refused the job's token a call: give the job `permissions:` `pull-requests: write`"
    ]
    path = tmp_path / "summary.md"
    write_step_summary(path, report)
    write_step_summary(path, ActionReport.skip("nothing"))
    text = path.read_text()
    assert "@\u200bteam" in text and "<b>" not in text  # nobody pinged, no HTML
    assert text.count("### repo-agent-bot") == 2  # appended, as GitHub's file is


def test_an_annotation_cannot_end_its_command_or_start_another() -> None:
    from bot.action.report import Annotation, unposted_findings

    details = json.dumps(
        {
            "result": {
                "review": {
                    "findings": [
                        {
                            "path": "a,b:c.py",
                            "start_line": 3,
                            "end_line": 1,
                            "severity": "high",
                            "title": "bad\n::add-mask::x, y: z",
                            "explanation": "100% wrong\r\n::set-output name=a::b",
                        },
                        {"path": "x.py", "title": "no line"},
                        "not a finding",
                    ]
                }
            }
        }
    )
    (found,) = unposted_findings(details)
    assert found == Annotation("error", "a,b:c.py", 3, 3, "bad\n::add-mask::x, y: z", "100% wrong")
    command = found.command()
    assert "\n" not in command and "\r" not in command
    assert command == (
        "::error file=a%2Cb%3Ac.py,line=3,endLine=3,"
        "title=bad%0A%3A%3Aadd-mask%3A%3Ax%2C y%3A z::100%25 wrong"
    )
    assert unposted_findings(None) == [] and unposted_findings("{") == []


def test_a_checkout_of_another_repository_or_host_is_not_borrowed_from() -> None:
    server = "https://github.com"
    assert same_repository("https://github.com/Octo/Hello.git", server, "octo/hello")
    assert same_repository("https://github.com/octo/hello", server, "octo/hello")
    assert not same_repository("https://github.com/octo/other.git", server, "octo/hello")
    assert not same_repository("https://evil.example/octo/hello.git", server, "octo/hello")
    assert not same_repository("git@github.com:octo/hello.git", server, "octo/hello")
