"""`action.yml`: every input reaches `bot action`, and every setting it passes is a real one."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from bot.settings import Settings

ROOT = Path(__file__).resolve().parents[1]


def action() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "action.yml").read_text())
    return data


def run_step() -> dict[str, Any]:
    (step,) = [s for s in action()["runs"]["steps"] if 'bot" action' in s.get("run", "")]
    return step


def test_every_setting_the_action_passes_is_a_setting() -> None:
    fields = {name.upper() for name in Settings.model_fields}
    passed = [name for name in run_step()["env"] if name.startswith("BOT_")]
    assert passed and [n for n in passed if n.removeprefix("BOT_") not in fields] == []


def test_every_input_is_used_and_secrets_never_reach_the_command_line() -> None:
    text = (ROOT / "action.yml").read_text()
    for name in action()["inputs"]:
        assert text.count(f"inputs.{name}") >= 1, f"input {name} is never used"
    step = run_step()
    script = step["run"]
    for secret in ("inputs.api-key", "inputs.state-key", "inputs.token"):
        assert secret not in script  # only in `env:`, never in argv or the script's text
    assert re.search(r"inputs\.api-key", str(step["env"]))


def test_the_action_installs_from_the_lock_file() -> None:
    install = next(
        s for s in action()["runs"]["steps"] if s.get("name") == "Install repo-agent-bot"
    )
    assert "--require-hashes" in install["run"] and "requirements.lock" in install["run"]
    assert "--no-deps" in install["run"]
