"""`bot workflow run | status | stop` on a local repository."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.cli import main
from bot.engine.artifacts import RunStore
from bot.engine.details import RunDetails
from tests.engine.scripted import make_repo

DEMO = """
from bot.engine import WorkflowMeta

meta = WorkflowMeta("demo", "reads the repo", ("Scan",))


async def workflow(wf, args):
    wf.phase("Scan")
    result = await wf.agent("look around", agent_type="explorer", label="look")
    wf.log(f"agent ok={result.ok}")
    return {"ok": result.ok, "args": args}
"""

SLOW = """
import anyio
from bot.engine import WorkflowMeta

meta = {"name": "slow", "phases": [{"title": "Wait"}]}


async def workflow(wf, args):
    wf.phase("Wait")
    await anyio.sleep(120)
"""


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("BOT_MODEL", "BOT_LLM_BASE_URL", "BOT_LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    data = tmp_path / "data"
    monkeypatch.setenv("BOT_DATA_DIR", str(data))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "demo.py").write_text(DEMO)
    (tmp_path / "slow.py").write_text(SLOW)
    return data


def test_run_without_a_model_fails_each_agent_clearly(
    env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path / "r")
    code = main(["workflow", "run", "demo.py", "--args", '{"n": 1}', "--repo", str(repo)])
    out = capsys.readouterr().out
    assert code == 1  # the run completed, but its one agent failed
    assert out.startswith('Workflow "demo" completed - 0/1 agents ok, 1 failed across 1 phase(s)')
    assert (
        "- [look] (Scan) FAILED - no model configured (set BOT_MODEL and BOT_LLM_BASE_URL)" in out
    )
    assert '"n": 1' in out
    [run_id] = RunStore(env).run_ids()
    saved = RunStore(env).read_details(run_id)
    assert saved.repo == str(repo) and saved.base is not None


def test_json_output_status_and_stop(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["workflow", "run", "demo.py", "--args", '"a string"', "--json"]) == 1
    details = json.loads(capsys.readouterr().out)
    assert details["status"] == "completed" and details["result"]["args"] == "a string"
    run_id = details["run_id"]

    assert main(["workflow", "status"]) == 0
    listing = capsys.readouterr().out
    assert run_id in listing and "completed" in listing
    assert main(["workflow", "status", run_id[-5:], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == run_id
    assert main(["workflow", "stop", run_id]) == 1
    assert "is not running (completed)" in capsys.readouterr().err
    assert main(["workflow", "status", "wf_ffffffffffff"]) == 2
    assert "no run matches" in capsys.readouterr().err


def test_bad_inputs_get_clear_errors(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Path("broken.py").write_text("meta = 1\n")
    assert main(["workflow", "run", "broken.py"]) == 2
    assert "define `async def workflow(wf, args)`" in capsys.readouterr().err
    assert main(["workflow", "run", "missing.py"]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["workflow", "run", "demo.py", "--repo", "."]) == 2
    assert "is not a git repository" in capsys.readouterr().err
    assert main(["workflow", "run", "demo.py", "--resume-from", "../../x"]) == 2
    assert "not a run id" in capsys.readouterr().err


LEAKY = """
import logging
import os

meta = {"name": "leaky"}


async def workflow(wf, args):
    logging.getLogger("bot.test").warning("secret is %s", os.environ["BOT_WEBHOOK_SECRET"])
"""


def test_configured_secrets_are_redacted_from_the_runs_log(env: Path, tmp_path: Path) -> None:
    (tmp_path / "leaky.py").write_text(LEAKY)
    environ = {**os.environ, "BOT_WEBHOOK_SECRET": "plain-webhook-secret-42"}
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "workflow", "run", "leaky.py"],
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "secret is [redacted secret]" in done.stderr
    assert "plain-webhook-secret-42" not in done.stderr


def test_bad_agent_types_setting_gets_a_clear_error(
    env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BOT_AGENT_TYPES", '{"scout": {"instructions": "look", "tools": ["fly"]}}')
    assert main(["workflow", "run", "demo.py"]) == 2
    assert "agent type 'scout'" in capsys.readouterr().err
    assert RunStore(env).run_ids() == []


@pytest.mark.slow
def test_background_run_can_be_stopped(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["workflow", "run", "slow.py", "--background"]) == 0
    run_id = capsys.readouterr().out.strip()
    store = RunStore(env)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # wait for the child to take the run over
        details = store.read_details(run_id)
        if details.current_phase == "Wait":
            break
        time.sleep(0.05)
    assert details.current_phase == "Wait" and details.status == "running"
    assert main(["workflow", "stop", run_id[-6:]]) == 0
    assert "aborted (Stopped by user)" in capsys.readouterr().out
    final = store.read_details(run_id)
    assert final.status == "aborted" and final.error == "Stopped by user"
    assert (env / "runs" / run_id / "report.md").is_file()


def test_stop_never_signals_a_process_that_is_not_the_runs_child(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A run recorded as running in this very process (as a server's run would be).
    RunStore(env).write_details(RunDetails(run_id="wf_0000000000aa", name="x", pid=os.getpid()))
    assert main(["workflow", "stop", "wf_0000000000aa"]) == 1
    assert "is not a `bot workflow run` child" in capsys.readouterr().err
    assert RunStore(env).read_details("wf_0000000000aa").status == "running"
