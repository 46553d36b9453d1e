"""Shared set-up for the run tests and bench/e2e.py: a scripted model and webhook payloads.

`ModelScript` answers the fake model's requests by the task at the start of each agent's
prompt (the built-in workflows' explorer, conclusion and answer tasks), so a whole triage or
ask run can be driven without counting turns. Payload builders give the fields a real
delivery carries, shaped on the fake GitHub's own objects.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.fakes.github import FakeGitHub, make_fake_github, serve_fake_github
from tests.fakes.llm import FakeLLM, Reply, serve, text, tool_call

REPO = Path(__file__).resolve().parents[1]

EXPLORER = {
    "findings": "Start-up reads `config.yml` in `src/app.py:2` without a fallback.",
    "references": [{"path": "src/app.py", "line": 2, "note": "reads the config"}],
}
VERDICT = {
    "actionable": True,
    "kind": "bug",
    "summary": "The app crashes at start-up when `config.yml` is missing.",
    "labels": ["bug"],
    "areas": [{"path": "src/app.py", "line": 2, "note": "reads the config"}],
    "assumptions": ["The default config path is used."],
}
BLOCKED_VERDICT = {
    "actionable": False,
    "kind": "bug",
    "summary": "The report does not say what fails.",
    "labels": [],
    "areas": [],
    "blocked": {
        "decision": "Which command fails, and with what error message?",
        "why": "The issue only says that it is broken; nothing in the repository narrows it down.",
        "options": ["`app start` fails", "`app build` fails", "Something else"],
        "default": "`app start` fails",
        "risk": "Investigating the wrong command wastes the maintainers' time.",
    },
}
NEEDS_INFO_VERDICT = {
    "actionable": False,
    "kind": "bug",
    "summary": "Start-up reads `config.yml` in `src/app.py:2`; the report does not say what fails.",
    "labels": ["bug", "made-up-label"],
    "areas": [{"path": "src/app.py", "line": 2, "note": "reads the config"}],
    "questions": [
        "Which command fails, and with what error message?",
        "Which version of the app are you running?",
    ],
}
"""An issue lacking what only its reporter can tell: triage asks them (`needs_info`)."""
HIGH_RISK_VERDICT = {
    "actionable": True,
    "kind": "bug",
    "summary": "The report includes a working exploit for the config loader.",
    "labels": [],
    "areas": [{"path": "src/app.py", "line": 2, "note": "loads untrusted YAML"}],
    "blocked": {
        "decision": "Should this vulnerability be handled as a private security advisory?",
        "why": "Discussing a working exploit in public puts every user at risk.",
        "options": ["Move it to a private advisory", "Keep it public"],
        "default": "Move it to a private advisory",
        "risk": "A public exploit before a fix is released.",
    },
}
"""A decision that is high-risk and irreversible: triage stops with BLOCKED."""
ANSWER = {
    "answer": "The config is read in `src/app.py:2` by `load_config()`.",
    "references": [{"path": "src/app.py", "line": 2}],
    "assumptions": [],
}


def structured(arguments: dict[str, Any]) -> Reply:
    return tool_call("structured_output", arguments)


def user_prompt(body: dict[str, Any]) -> str:
    for message in body.get("messages", []):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


@dataclass
class ModelScript:
    """`fake.respond_with(ModelScript(...))`: a reply per agent task; `echo` is appended to
    every text field, to test that what the model says is redacted before it is posted."""

    verdict: dict[str, Any] = field(default_factory=lambda: dict(VERDICT))
    explorer: dict[str, Any] = field(default_factory=lambda: dict(EXPLORER))
    answer: dict[str, Any] = field(default_factory=lambda: dict(ANSWER))
    echo: str = ""

    def _with_echo(self, data: dict[str, Any], key: str) -> dict[str, Any]:
        if not self.echo:
            return data
        return {**data, key: f"{data[key]} {self.echo}"}

    def __call__(self, body: dict[str, Any]) -> Reply:
        prompt = user_prompt(body)
        if prompt.startswith(("You are triaging", "Someone with write access")):
            return structured(self._with_echo(self.explorer, "findings"))
        if prompt.startswith("Triage "):
            return structured(self._with_echo(self.verdict, "summary"))
        if prompt.startswith("Answer this question"):
            return structured(self._with_echo(self.answer, "answer"))
        return text("I have no script for this task.")


def repository_json(full_name: str, default_branch: str = "main") -> dict[str, Any]:
    owner, name = full_name.split("/", 1)
    return {
        "id": 1296269,
        "name": name,
        "full_name": full_name,
        "private": False,
        "owner": {"login": owner, "id": 1, "type": "Organization"},
        "default_branch": default_branch,
    }


def issues_opened(issue: dict[str, Any], full_name: str, installation_id: int) -> dict[str, Any]:
    return {
        "action": "opened",
        "issue": issue,
        "repository": repository_json(full_name),
        "installation": {"id": installation_id},
        "sender": issue["user"],
    }


def comment_created(
    issue: dict[str, Any], comment: dict[str, Any], full_name: str, installation_id: int
) -> dict[str, Any]:
    return {
        "action": "created",
        "issue": issue,
        "comment": comment,
        "repository": repository_json(full_name),
        "installation": {"id": installation_id},
        "sender": comment["user"],
    }


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def delivery_headers(event: str, guid: str, secret: str, body: bytes) -> dict[str, str]:
    return {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": guid,
        "X-Hub-Signature-256": sign(secret, body),
        "Content-Type": "application/json",
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class RunningBot:
    url: str
    db: Path
    log: Path
    process: subprocess.Popen[bytes] | None = None

    def log_lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]


def bot_env(
    root: Path,
    *,
    github_url: str,
    llm_url: str,
    app_id: int,
    private_key_pem: str,
    webhook_secret: str,
    extra_env: dict[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a `bot` process using the fakes: BOT_* settings only, data in
    `root/data`, the App's key in `root/app.pem`."""
    key = root / "app.pem"
    key.write_text(private_key_pem)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOT_")}
    env.update(
        {
            "BOT_GITHUB_API_URL": github_url,
            "BOT_GITHUB_WEB_URL": github_url,
            "BOT_LLM_BASE_URL": llm_url,
            "BOT_MODEL": "fake-model",
            "BOT_APP_ID": str(app_id),
            "BOT_PRIVATE_KEY_PATH": str(key),
            "BOT_WEBHOOK_SECRET": webhook_secret,
            "BOT_DATA_DIR": str(root / "data"),
            "BOT_WORKERS": "2",
            # No redelivery pass at start-up (on by default) unless a test asks for one: its
            # listing would land among the calls a test counts.
            "BOT_REDELIVER_INTERVAL": "0",
            "PYTHONPATH": str(REPO),
            **(extra_env or {}),
        }
    )
    return env


@contextmanager
def running_bot(
    root: Path,
    *,
    github_url: str,
    llm_url: str,
    app_id: int,
    private_key_pem: str,
    webhook_secret: str,
    extra_env: dict[str, str] | None = None,
    serve_args: Sequence[str] = (),
) -> Iterator[RunningBot]:
    """`bot serve` as a subprocess on a free port of 127.0.0.1, configured only by BOT_* env;
    `serve_args` are added to its command line (e.g. `--no-worker`)."""
    data = root / "data"
    env = bot_env(
        root,
        github_url=github_url,
        llm_url=llm_url,
        app_id=app_id,
        private_key_pem=private_key_pem,
        webhook_secret=webhook_secret,
        extra_env=extra_env,
    )
    with serving(root, env, serve_args) as (url, proc):
        yield RunningBot(url, data / "bot.sqlite3", root / "serve.log", proc)


@contextmanager
def serving(
    root: Path, env: dict[str, str], serve_args: Sequence[str] = ()
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`bot serve` with exactly `env` on a free port of 127.0.0.1, its output appended to
    `root/serve.log` (a test may start it twice on one root); its URL once /readyz answers."""
    port = free_port()
    log_path = root / "serve.log"
    command = [sys.executable, "-m", "bot.cli", "serve", "--host", "127.0.0.1"]
    command += ["--port", str(port), *serve_args]
    with log_path.open("ab") as log_file:
        proc = subprocess.Popen(
            command, cwd=root, env=env, stdout=log_file, stderr=subprocess.STDOUT
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"bot serve did not start:\n{log_path.read_text()}")
                time.sleep(0.1)
            yield url, proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def metric_sample(page: str, name: str, **labels: str) -> float | None:
    """The value of one sample in a Prometheus text page, None when it is absent."""
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in page.splitlines():
        if line.startswith("#"):
            continue
        match = re.fullmatch(r"([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)", line)
        if match is None or match.group(1) != name:
            continue
        found = ",".join(sorted((match.group(2) or "").split(","))) if match.group(2) else ""
        if found == wanted:
            return float(match.group(3))
    return None


REPO_FILES = {
    "src/app.py": "import yaml\nconfig = load_config('config.yml')\n",
    "README.md": "app\n",
}


@contextmanager
def serving_fakes(
    fake: FakeGitHub,
    responder: Callable[[dict[str, Any]], Reply],
    *,
    extra_env: dict[str, str] | None = None,
) -> Iterator[tuple[FakeLLM, dict[str, Any]]]:
    """`fake` and a fake model answering with `responder`, each on 127.0.0.1; yields the model
    and the keyword arguments `running_bot` and `bot_env` take to use both (with `extra_env`)."""
    llm = FakeLLM()
    llm.respond_with(responder)
    with serve_fake_github(fake) as gh_url, serve(llm) as llm_url:
        yield (
            llm,
            {
                "github_url": gh_url,
                "llm_url": llm_url,
                "app_id": fake.app_id,
                "private_key_pem": fake.private_key_pem,
                "webhook_secret": fake.webhook_secret,
                "extra_env": extra_env,
            },
        )


@contextmanager
def bot_on_fakes(
    root: Path,
    fake: FakeGitHub,
    responder: Callable[[dict[str, Any]], Reply],
    *,
    extra_env: dict[str, str] | None = None,
    serve_args: Sequence[str] = (),
) -> Iterator[tuple[FakeLLM, RunningBot]]:
    """`serving_fakes`, and `bot serve [serve_args]` as a subprocess configured to use both."""
    with (
        serving_fakes(fake, responder, extra_env=extra_env) as (llm, options),
        running_bot(root, serve_args=serve_args, **options) as running,
    ):
        yield llm, running


@contextmanager
def bot_with_fakes(
    root: Path,
    *,
    extra_env: dict[str, str] | None = None,
    files: dict[str, str] | None = None,
    serve_args: Sequence[str] = (),
) -> Iterator[tuple[FakeGitHub, FakeLLM, RunningBot]]:
    """The fake GitHub (repository `octo/hello` holding REPO_FILES, and `files`) and the fake
    model, each on 127.0.0.1, and `bot serve [serve_args]` as a subprocess configured to use
    both."""
    fake = make_fake_github(root, files={**REPO_FILES, **(files or {})})
    script = ModelScript()
    with bot_on_fakes(root, fake, script, extra_env=extra_env, serve_args=serve_args) as served:
        yield fake, *served
