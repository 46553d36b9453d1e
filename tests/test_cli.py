"""The `bot` command loads every area's subcommands in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

import pytest

COMMANDS = (
    "serve",
    "worker",
    "replay",
    "deliveries",
    "redeliver",
    "workflow",
    "doctor",
    "setup",
    "backup",
    "restore",
)


def test_every_subcommand_is_registered_in_a_fresh_process() -> None:
    # A fresh interpreter imports the command modules in the CLI's own order, which is what
    # catches import cycles that a test process (with everything already imported) hides.
    out = subprocess.run(
        [sys.executable, "-m", "bot.cli", "--help"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    for name in COMMANDS:
        assert name in out.stdout


@pytest.mark.parametrize("name", COMMANDS)
def test_each_subcommand_has_help(name: str) -> None:
    from bot.cli import build_parser

    parser = build_parser()
    with pytest.raises(SystemExit) as done:
        parser.parse_args([name, "--help"])
    assert done.value.code == 0


@pytest.mark.parametrize(
    "module", ["bot.agents.types", "bot.engine.types", "bot.runs.worker", "bot.github.client"]
)
def test_module_imports_first_in_a_fresh_process(module: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
