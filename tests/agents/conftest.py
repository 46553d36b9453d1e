"""Fixtures for the agent runtime: a small git repository and invocation builders."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.agents.openai_model import OpenAIChatModel
from bot.agents.runtime import AgentRuntime, Limits
from bot.agents.sandbox import SandboxStatus
from bot.agents.types import EXPLORER
from bot.engine.types import AgentInvocation, AgentType, Workspace
from policies.interaction import RunInteractionMode, RunInteractionPolicy
from tests.fakes.llm import FakeLLM

FILES = {
    "README.md": "# Demo\n\nA small project.\n",
    "src/app.py": "def greet(name):\n    return 'hello ' + name\n\n\ndef add(a, b):\n    return a + b\n",
    "src/util.py": "TOKEN = 'x'\n",
    "docs/guide.md": "Use greet() to say hello.\n",
}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(cwd),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@example.com",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.com",
        },
    )
    return done.stdout.decode().strip()


def make_repo(root: Path, files: dict[str, str] | None = None) -> tuple[Path, str]:
    """A work tree with one commit of `files`; returns (work tree, commit sha)."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    for name, text in (files or FILES).items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    return root, git(root, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    return make_repo(tmp_path / "repo")


@pytest.fixture
def read_workspace(repo: tuple[Path, str]) -> Workspace:
    root, sha = repo
    return Workspace(git_dir=root / ".git", commit=sha)


WEBHOOK = RunInteractionPolicy(RunInteractionMode.WEBHOOK)


def invocation(
    prompt: str = "Look at the code.",
    *,
    agent_type: AgentType = EXPLORER,
    workspace: Workspace | None = None,
    schema: dict[str, Any] | None = None,
    interaction: RunInteractionPolicy = WEBHOOK,
    model: str | None = None,
) -> AgentInvocation:
    return AgentInvocation(
        run_id="wf_0123456789ab",
        index=1,
        label="test-agent",
        phase=None,
        prompt=prompt,
        agent_type=agent_type,
        interaction=interaction,
        workspace=workspace or Workspace(),
        schema=schema,
        model=model,
    )


# No backoff between retries; the watchdog and tool limits stay generous, since no test using
# these limits waits for them to fire (a loaded machine must not trip them).
FAST = Limits(first_response_timeout=30.0, tool_timeout=60.0, backoff=0.0, max_turns=20)


@pytest.fixture
def fake() -> FakeLLM:
    return FakeLLM()


RuntimeFactory = Callable[..., AgentRuntime]


@pytest.fixture
async def runtime_for(fake: FakeLLM) -> AsyncIterator[RuntimeFactory]:
    clients: list[httpx.AsyncClient] = []

    def build(
        *, limits: Limits = FAST, stream: bool = True, sandbox_ok: bool = False, **kw: Any
    ) -> AgentRuntime:
        client = fake.client()
        clients.append(client)
        model = OpenAIChatModel(fake.base_url, "sk-test", http_client=client, stream=stream)
        return AgentRuntime(
            model,
            default_model="fake-model",
            sandbox=SandboxStatus(sandbox_ok, "" if sandbox_ok else "disabled in this test"),
            limits=limits,
            **kw,
        )

    yield build
    for client in clients:
        await client.aclose()
