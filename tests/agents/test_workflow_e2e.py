"""End to end: `bot workflow run` with the fake model on 127.0.0.1, three phases, real git."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.agents.conftest import git, make_repo
from tests.fakes.llm import FakeLLM, Reply, serve, text, tool_call

WORKFLOW = """
from bot.engine.workflow import WorkflowMeta

meta = WorkflowMeta(name="e2e", phases=("explore", "review", "implement"))

SCHEMA = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["ok", "problem"]},
        "findings": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["verdict", "findings"],
}


async def workflow(wf, args):
    wf.phase("explore")
    found = await wf.parallel([
        lambda: wf.agent("EXPLORE-README: what is this project?", agent_type="explorer",
                         label="explore-readme"),
        lambda: wf.agent("EXPLORE-GREP: where is greet defined?", agent_type="explorer",
                         label="explore-grep"),
    ])
    wf.phase("review")
    review = await wf.agent("REVIEW: is add() correct?", agent_type="reviewer",
                            label="review", schema=SCHEMA)
    wf.phase("implement")
    change = await wf.agent("IMPLEMENT: add a changelog and fix add()",
                            agent_type="implementer", label="implement",
                            isolation="worktree")
    return {
        "explored": [r.ok for r in found],
        "review": review.structured,
        "implemented": change.ok,
        "errors": [r.error for r in [*found, review, change] if r.error],
    }
"""

SCRIPTS: dict[str, list[Reply]] = {
    "EXPLORE-README": [
        tool_call("read_file", {"path": "README.md"}),
        text("It is a demo project (README.md:1)."),
    ],
    "EXPLORE-GREP": [
        tool_call("grep", {"pattern": "def greet"}),
        text("greet is defined at src/app.py:1."),
    ],
    "REVIEW": [
        tool_call("read_file", {"path": "src/app.py"}),
        tool_call("structured_output", {"verdict": "ok", "findings": ["src/app.py:5 add is fine"]}),
    ],
    "IMPLEMENT": [
        tool_call("write_file", {"path": "CHANGELOG.md", "content": "# Changes\n\n- add()\n"}),
        tool_call("edit_file", {"path": "src/app.py", "old_text": "a + b", "new_text": "b + a"}),
        tool_call("run_command", {"command": "grep -c 'b + a' src/app.py && ls"}),
        tool_call("commit", {"message": "Add a changelog and reorder add()"}),
        text("Committed the change."),
    ],
}


def respond(body: dict[str, Any]) -> Reply:
    messages = body["messages"]
    prompt = str(messages[1]["content"])
    step = sum(1 for m in messages if m["role"] == "assistant")
    for key, script in SCRIPTS.items():
        if prompt.startswith(key) or f"\n{key}" in prompt or key in prompt:
            return script[step]
    return text(f"unexpected prompt: {prompt[:80]}")


@pytest.mark.slow
def test_three_phase_workflow_end_to_end(tmp_path: Path) -> None:
    repo, base = make_repo(tmp_path / "repo")
    data = tmp_path / "data"
    flow = tmp_path / "flow.py"
    flow.write_text(WORKFLOW)
    fake = FakeLLM(api_key="sk-e2e")
    fake.respond_with(respond)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOT_")}
    with serve(fake) as base_url:
        env.update(
            BOT_MODEL="fake-model",
            BOT_LLM_BASE_URL=base_url,
            BOT_LLM_API_KEY="sk-e2e",
            BOT_DATA_DIR=str(data),
        )
        command = [sys.executable, "-m", "bot.cli", "workflow", "run", str(flow)]
        done = subprocess.run(
            [*command, "--repo", str(repo), "--json"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    details = json.loads(done.stdout)
    assert details["status"] == "completed"
    result = details["result"]
    assert result["errors"] == []
    assert result["explored"] == [True, True]
    assert result["review"] == {"verdict": "ok", "findings": ["src/app.py:5 add is fine"]}
    assert result["implemented"] is True

    # Every agent talked to the model; read-only agents were offered no writing tool.
    def offered(prefix: str) -> list[str]:
        body = next(b for b in fake.bodies if str(b["messages"][1]["content"]).startswith(prefix))
        return [t["function"]["name"] for t in body["tools"]]

    assert "write_file" not in offered("EXPLORE-README")
    assert "structured_output" in offered("REVIEW")
    assert {"write_file", "commit", "run_command"} <= set(offered("IMPLEMENT"))

    # The implementer's branch exists with its commit; the base branch is untouched.
    branches = git(repo, "branch", "--list", "bot/*", "--format=%(refname:short)").split()
    assert len(branches) == 1 and branches[0].startswith("bot/implement-")
    assert git(repo, "log", "-1", "--format=%s", branches[0]) == "Add a changelog and reorder add()"
    assert git(repo, "rev-parse", f"{branches[0]}~1") == base
    changed = git(repo, "show", "--name-only", "--format=", branches[0]).split()
    assert sorted(changed) == ["CHANGELOG.md", "src/app.py"]
    assert "b + a" in git(repo, "show", f"{branches[0]}:src/app.py")
    assert git(repo, "rev-parse", "main") == base

    # Transcripts and usage land in the run's artifacts.
    run_dir = data / "runs" / details["run_id"]
    transcripts = json.loads((run_dir / "transcripts.json").read_text())
    implement = next(t for t in transcripts.values() if t["label"] == "implement")
    assert implement["ok"] is True and len(implement["commits"]) == 1
    tool_results = [e for e in implement["transcript"] if e["role"] == "tool"]
    assert any("[exit code 0]" in e.get("content", "") for e in tool_results)
    review = next(t for t in transcripts.values() if t["label"] == "review")
    assert review["structured"]["verdict"] == "ok"
    assert details["usage"]["input"] > 0 and details["usage"]["output"] > 0
    saved = json.loads((run_dir / "workflow.json").read_text())
    assert saved["usage"]["total"] == details["usage"]["total"]
