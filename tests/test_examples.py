"""The README's example commands work as written: `examples/` runs with the fake model.

Each `bot workflow run examples/...` line of the README's "Try it locally" runs from the root
of a checkout that holds `examples/` (a scratch repository with a copy of it, so the test does
not depend on how this project itself was checked out), with the fake model on 127.0.0.1.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main
from tests.engine.scripted import git
from tests.fakes.llm import FakeLLM, Reply, serve, text, tool_call
from tests.fakes.review_model import user_prompt

ROOT = Path(__file__).resolve().parents[1]


def readme_commands(prefix: str) -> list[list[str]]:
    """The README's `.venv/bin/bot ...` command lines that start with `prefix`, as argv."""
    found = []
    for line in (ROOT / "README.md").read_text().splitlines():
        line = line.split("  #", 1)[0].strip()
        if line.startswith(f".venv/bin/bot {prefix}"):
            found.append(shlex.split(line)[1:])
    return found


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    work = tmp_path / "checkout"
    shutil.copytree(ROOT / "examples", work / "examples")
    (work / "README.md").write_text("# A project\n")
    git(work, "init", "-q", "-b", "main")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "initial")
    monkeypatch.chdir(work)
    for name in ("BOT_AGENT_TYPES", "BOT_ROLE_MODELS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("BOT_DATA_DIR", str(tmp_path / "data"))
    return work


def test_the_readme_names_the_example_workflow_in_examples() -> None:
    [argv] = readme_commands("workflow run examples/my_workflow.py")
    assert argv == ["workflow", "run", "examples/my_workflow.py", "--repo", "."]
    assert (ROOT / "examples" / "my_workflow.py").is_file()


def tour(body: dict[str, Any]) -> Reply:
    prompt = user_prompt(body)
    if prompt.startswith("Survey the layout"):
        return text("Two folders: `examples/` and the README (README.md:1).")
    if prompt.startswith("Find the entry points"):
        return text("No program: the README is the way in (README.md:1).")
    if prompt.startswith("Write a short tour"):
        assert "Two folders" in prompt and "No program" in prompt  # both surveys handed on
        return tool_call(
            "structured_output",
            {
                "summary": "A small project: read the README first.",
                "start_here": [{"path": "README.md", "why": "it says what this is"}],
            },
        )
    return text(f"unexpected prompt: {prompt[:60]}")


def test_the_example_workflow_runs_as_the_readme_says(
    checkout: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    [argv] = readme_commands("workflow run examples/my_workflow.py")
    fake = FakeLLM()
    fake.respond_with(tour)
    with serve(fake) as base_url:
        monkeypatch.setenv("BOT_MODEL", "fake-model")
        monkeypatch.setenv("BOT_LLM_BASE_URL", base_url)
        code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert 'Workflow "repo-tour" completed - 3/3 agents ok across 2 phase(s)' in captured.out
    assert "A small project: read the README first." in captured.out
    # The two surveys run at once, in either order; the write-up comes after both.
    firsts = [user_prompt(b).split(" ", 1)[0] for b in fake.bodies]
    assert sorted(firsts[:2]) == ["Find", "Survey"] and firsts[2:] == ["Write"]


def test_the_example_workflow_fails_loudly_without_a_model(
    checkout: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    [argv] = readme_commands("workflow run examples/my_workflow.py")
    for name in ("BOT_MODEL", "BOT_LLM_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    assert main(argv) == 1
    assert "the write-up failed: no model configured" in capsys.readouterr().err


def test_the_example_issue_is_triaged_as_the_readme_says(
    checkout: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    [argv] = readme_commands("workflow run triage --issue-file examples/")
    verdict = {"actionable": True, "kind": "docs", "summary": "The quick start needs a step."}

    def respond(body: dict[str, Any]) -> Reply:
        prompt = user_prompt(body)
        if prompt.startswith("You are triaging"):
            assert "Title: The quick start" in prompt
            return tool_call("structured_output", {"findings": "README.md:1 is the start."})
        return tool_call("structured_output", verdict)

    fake = FakeLLM()
    fake.respond_with(respond)
    with serve(fake) as base_url:
        monkeypatch.setenv("BOT_MODEL", "fake-model")
        monkeypatch.setenv("BOT_LLM_BASE_URL", base_url)
        code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out.startswith("triage: succeeded\n\nThe quick start needs a step.")
