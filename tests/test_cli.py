"""The `bot` command loads every area's subcommands in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

COMMANDS = (
    "serve",
    "worker",
    "replay",
    "deliveries",
    "redeliver",
    "findings",
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


def _pyproject_version() -> str:
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    return str(tomllib.loads(pyproject.read_text())["project"]["version"])


def test_version_prints_the_installed_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    from bot.cli import main

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"bot {metadata.version('repo-agent-bot')}\n"


def test_version_in_a_fresh_process_from_outside_the_checkout(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "bot.cli", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"bot {metadata.version('repo-agent-bot')}\n"


def test_version_without_an_installed_package_is_the_one_in_the_source(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bot import cli

    def not_installed(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(cli.metadata, "version", not_installed)
    assert cli.package_version() == _pyproject_version()


def test_the_source_version_is_pyprojects() -> None:
    import bot

    assert bot.__version__ == _pyproject_version()
