"""The files people look for in a project: present, and true to pyproject, Settings and README."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from bot.settings import ENVIRONMENT_ONLY, OUTSIDE_SETTINGS, Settings, load_settings

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
ENV_EXAMPLE = ROOT / ".env.example"
# `KEY=value`, or `# KEY=value` for one left unset; everything else is a comment.
ASSIGNMENT = re.compile(r"^(?:#\s?)?(BOT_[A-Z0-9_]+)=(.*)$")


def env_example() -> dict[str, str]:
    values: dict[str, str] = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        found = ASSIGNMENT.match(line)
        if found:
            key, value = found.groups()
            assert key not in values, f"{key} twice in .env.example"
            values[key] = value
    return values


def settings_keys() -> set[str]:
    return {f"BOT_{name.upper()}" for name in Settings.model_fields}


@pytest.mark.parametrize(
    "name",
    [
        "LICENSE",
        "CHANGELOG.md",
        "SECURITY.md",
        "CONTRIBUTING.md",
        ".env.example",
        ".pre-commit-config.yaml",
    ],
)
def test_the_file_is_there(name: str) -> None:
    assert (ROOT / name).is_file() and (ROOT / name).read_text().strip()


def test_the_license_is_the_one_pyproject_declares() -> None:
    assert PYPROJECT["license"] == "MIT"
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n")
    assert "the repo-agent-bot authors" in text
    assert "Permission is hereby granted, free of charge" in text


def test_the_changelog_has_a_section_for_the_current_version() -> None:
    headings = re.findall(r"^## \[([^\]]+)\]", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert headings[:2] == ["Unreleased", PYPROJECT["version"]], headings


def test_every_key_in_env_example_is_a_setting() -> None:
    unknown = set(env_example()) - settings_keys() - set(OUTSIDE_SETTINGS)
    assert not unknown, f"not Settings fields: {sorted(unknown)}"


def test_every_setting_is_in_env_example() -> None:
    missing = settings_keys() - set(env_example())
    assert not missing, f"missing from .env.example: {sorted(missing)}"


def test_every_setting_in_the_readme_is_in_env_example() -> None:
    readme = (ROOT / "README.md").read_text()
    table = readme.split("## Settings", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`(BOT_[A-Z0-9_]+)`", table))
    assert documented, "README's settings table not found"
    assert documented - set(env_example()) == set()


def test_env_example_shows_each_default_and_no_secret(tmp_path: Path) -> None:
    """Every value it shows, uncommented into a .env, gives the settings one gets without it."""
    values = env_example()
    secrets = {
        f"BOT_{name.upper()}"
        for name, field in Settings.model_fields.items()
        if "SecretStr" in str(field.annotation)
    }
    assert {"BOT_WEBHOOK_SECRET", "BOT_UI_TOKEN", "BOT_DATABASE_URL"} <= secrets
    assert all(not values[key] for key in secrets), {k: values[k] for k in secrets}
    shown = {k: v for k, v in values.items() if v and k not in ENVIRONMENT_ONLY}
    dotenv = tmp_path / ".env"
    dotenv.write_text("".join(f"{k}={v}\n" for k, v in shown.items()))
    assert load_settings({}, dotenv) == load_settings({}, None)


def test_nothing_is_set_by_copying_env_example(tmp_path: Path) -> None:
    """Copied to .env as it is, it changes nothing: every line is commented out."""
    dotenv = tmp_path / ".env"
    dotenv.write_text(ENV_EXAMPLE.read_text())
    assert load_settings({}, dotenv) == load_settings({}, None)
    assert all(line.startswith("#") or not line.strip() for line in dotenv.read_text().splitlines())


def test_pre_commit_runs_the_projects_own_checks_offline() -> None:
    import yaml

    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    hooks = {hook["id"]: hook for repo in config["repos"] for hook in repo["hooks"]}
    assert {"ruff-check", "ruff-format", "mypy"} <= set(hooks)
    for repo in config["repos"]:
        assert repo["repo"] == "local"
    for hook in hooks.values():
        assert hook["language"] == "system"
        assert hook["entry"].startswith(".venv/bin/")
