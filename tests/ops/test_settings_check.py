"""Operator warnings: unknown BOT_* variables, and a model or GitHub App not configured."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.ops import doctor
from bot.ops.settings_check import (
    check_unknown_settings,
    credentials_gap,
    log_startup_warnings,
    model_gap,
    unknown_settings,
)
from bot.settings import OUTSIDE_SETTINGS, Settings, read_variables
from bot.settings_sources import ENVIRONMENT
from bot.wiring import has_model

ROOT = Path(__file__).resolve().parents[2]
PEM_PATH = "/nonexistent/app.pem"


@pytest.fixture
def clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No BOT_* variables from outside, and the working directory (and its .env) our own."""
    for key in list(os.environ):
        if key.upper().startswith("BOT_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_typo_is_reported_with_the_setting_it_resembles(tmp_path: Path) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text("BOT_MODLE=gpt-4.1\nBOT_PORT=8001 # dev\n")
    found = unknown_settings(read_variables({"BOT_WEBHOK_SECRET": "s"}, dotenv))
    by_name = {u.name: u for u in found}
    assert set(by_name) == {"BOT_MODLE", "BOT_WEBHOK_SECRET"}
    assert by_name["BOT_MODLE"].suggestion == "BOT_MODEL"
    assert "did you mean BOT_MODEL?" in by_name["BOT_MODLE"].message
    assert str(dotenv) in by_name["BOT_MODLE"].message
    assert ENVIRONMENT in by_name["BOT_WEBHOK_SECRET"].message
    assert "did you mean BOT_WEBHOOK_SECRET?" in by_name["BOT_WEBHOK_SECRET"].message


def test_names_are_compared_without_case_and_secrets_files_count(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "bot_app_idd").write_text("1")
    (secrets / "bot_app_id").write_text("1")
    (secrets / "postgres_password").write_text("not ours")
    variables = read_variables({"bot_modle": "m", "BOT_SECRETS_DIR": str(secrets)}, None)
    found = {u.name: u for u in unknown_settings(variables)}
    assert set(found) == {"BOT_MODLE", "BOT_APP_IDD"}
    assert found["BOT_APP_IDD"].suggestion == "BOT_APP_ID"
    assert str(secrets / "bot_app_idd") in found["BOT_APP_IDD"].message


def test_a_name_like_no_setting_is_reported_without_a_guess() -> None:
    [found] = unknown_settings({"BOT_FROBNICATE": ENVIRONMENT})
    assert found.suggestion is None
    assert "BOT_FROBNICATE" in found.message and "did you mean" not in found.message


def test_variables_the_app_reads_itself_are_not_reported() -> None:
    names = {
        "BOT_TEST_DATABASE_URL",
        "BOT_TEST_POSTGRES_DIR",
        "BOT_SETUP_BENCH",
        "BOT_GIT_NAME",
        "BOT_GIT_EMAIL",
        "BOT_SECRETS_DIR",
    }
    assert names <= set(OUTSIDE_SETTINGS)
    variables = dict.fromkeys(names, ENVIRONMENT)
    assert unknown_settings({**variables, "BOT_MODEL": ENVIRONMENT}) == []


def test_an_environment_only_variable_in_dotenv_is_reported_as_ignored_there() -> None:
    [found] = unknown_settings({"BOT_GIT_NAME": "/srv/bot/.env", "BOT_MODEL": "/srv/bot/.env"})
    assert found.name == "BOT_GIT_NAME" and found.suggestion is None
    assert "read from the environment only" in found.message


def test_every_app_variable_read_outside_settings_is_listed() -> None:
    """Each BOT_* name that bot/, tests/ and scripts/ read from the environment themselves."""
    import re

    fields = {f"BOT_{name.upper()}" for name in Settings.model_fields}
    read = re.compile(r"""(?:environ(?:\.get)?\(|environ\[|getenv\(|\$\{?)["']?(BOT_[A-Z0-9_]+)""")
    found: set[str] = set()
    paths = [*(ROOT / "bot").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]
    paths += [*(ROOT / "bench").glob("*.py"), *(ROOT / "scripts").iterdir(), ROOT / ".ci" / "run"]
    for path in paths:
        found |= set(read.findall(path.read_text(errors="replace")))
    assert found - fields - set(OUTSIDE_SETTINGS) == set()


# --- a model and GitHub credentials ------------------------------------------------------


def test_no_model_names_what_the_openai_provider_needs() -> None:
    gap = model_gap(Settings())
    assert gap is not None
    assert gap.missing == ("BOT_MODEL", "BOT_LLM_BASE_URL")
    assert "BOT_MODEL" in gap.fix and "BOT_LLM_BASE_URL" in gap.fix
    assert model_gap(Settings(model="m", llm_base_url="http://127.0.0.1:11434/v1")) is None
    keyless = model_gap(Settings(model="m", llm_base_url="https://api.openai.com/v1"))
    assert keyless is not None and keyless.missing == ("BOT_LLM_API_KEY",)


def test_no_model_names_what_the_anthropic_provider_needs() -> None:
    gap = model_gap(Settings(llm_provider="anthropic"))
    assert gap is not None
    assert gap.missing == ("BOT_MODEL", "BOT_ANTHROPIC_API_KEY")
    assert "BOT_LLM_BASE_URL" not in gap.fix
    assert model_gap(Settings(llm_provider="anthropic", model="m", anthropic_api_key="k")) is None
    assert model_gap(Settings(llm_provider="anthropic", model="m", llm_api_key="k")) is None


def test_a_model_without_the_key_its_endpoint_needs_is_a_gap_of_its_own() -> None:
    gap = model_gap(Settings(llm_provider="anthropic", model="m"))
    assert gap is not None and gap.missing == ("BOT_ANTHROPIC_API_KEY",)
    assert gap.what.startswith("the Anthropic API needs a key")
    proxy = Settings(llm_provider="anthropic", model="m", llm_base_url="http://127.0.0.1:9/")
    assert model_gap(proxy) is None


def test_azure_without_its_key_is_a_gap() -> None:
    deployment = "https://res.openai.azure.com/openai/deployments/d"
    gap = model_gap(Settings(llm_provider="azure", model="d", llm_base_url=deployment))
    assert gap is not None and gap.missing == ("BOT_LLM_API_KEY",)
    keyed = Settings(llm_provider="azure", model="d", llm_base_url=deployment, llm_api_key="k")
    assert model_gap(keyed) is None


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({}, id="nothing"),
        pytest.param({"model": "m"}, id="model-only"),
        pytest.param({"llm_base_url": "http://127.0.0.1:1/v1"}, id="endpoint-only"),
        pytest.param({"model": "m", "llm_base_url": "http://127.0.0.1:1/v1"}, id="openai"),
        pytest.param({"model": "m", "llm_provider": "anthropic"}, id="anthropic-keyless"),
        pytest.param(
            {"llm_provider": "anthropic", "anthropic_api_key": "k"}, id="anthropic-no-model"
        ),
    ],
)
def test_no_model_is_said_exactly_when_the_worker_skips_for_it(values: dict[str, str]) -> None:
    settings = Settings.model_validate(values)
    gap = model_gap(settings)
    said = gap is not None and gap.what.startswith("no model configured")
    assert said == (not has_model(settings))


def test_no_credentials_names_them_and_bot_setup() -> None:
    gap = credentials_gap(Settings())
    assert gap is not None and "BOT_APP_ID" in gap.missing
    assert "bot setup" in gap.fix
    ok = Settings(app_id=1, private_key="k", webhook_secret="w")
    assert credentials_gap(ok) is None


def test_startup_warnings_name_each_problem(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text("BOT_MODLE=m\n")
    log = logging.getLogger("bot.test.startup")
    with caplog.at_level(logging.WARNING):
        log_startup_warnings(log, Settings(), environ={}, dotenv=dotenv)
    lines = [r.getMessage() for r in caplog.records]
    assert any("BOT_MODLE" in line and "did you mean BOT_MODEL?" in line for line in lines)
    typo = next(r for r in caplog.records if "BOT_MODLE" in r.getMessage())
    assert typo.__dict__["variable"] == "BOT_MODLE"
    assert typo.__dict__["did_you_mean"] == "BOT_MODEL"
    model = next(r for r in caplog.records if "no model" in r.getMessage())
    assert model.__dict__["missing"] == ["BOT_MODEL", "BOT_LLM_BASE_URL"]
    assert any("bot setup" in line and "BOT_APP_ID" in line for line in lines)


def test_no_startup_warning_when_everything_is_set(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(
        app_id=1,
        private_key="k",
        webhook_secret="w",
        model="m",
        llm_base_url="http://127.0.0.1:1/v1",
    )
    with caplog.at_level(logging.WARNING):
        log_startup_warnings(
            logging.getLogger("bot.test.startup"), settings, environ={}, dotenv=None
        )
    assert caplog.records == []


# --- bot doctor --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_doctor_fails_on_a_typo_in_dotenv_and_names_the_setting(clean: Path) -> None:
    (clean / ".env").write_text("BOT_MODLE=gpt-4.1\n")
    result = await check_unknown_settings(doctor.load_context({}))
    assert result.status == "fail"
    assert "BOT_MODLE" in result.detail and "did you mean BOT_MODEL?" in result.detail
    assert result.fix == "rename BOT_MODLE to BOT_MODEL"


@pytest.mark.anyio
async def test_doctor_fails_on_an_unknown_secret_file(clean: Path) -> None:
    secrets = clean / "secrets"
    secrets.mkdir()
    (secrets / "bot_frobnicate").write_text("x")
    result = await check_unknown_settings(doctor.load_context({"BOT_SECRETS_DIR": str(secrets)}))
    assert result.status == "fail" and "BOT_FROBNICATE" in result.detail


@pytest.mark.anyio
async def test_doctor_warns_on_unknown_names_in_the_shared_environment(clean: Path) -> None:
    result = await check_unknown_settings(doctor.load_context({"BOT_MODLE": "m", "BOT_X": "1"}))
    assert result.status == "warn"
    assert "did you mean BOT_MODEL?" in result.detail and "BOT_X" in result.detail


@pytest.mark.anyio
async def test_doctor_is_content_with_known_names(clean: Path) -> None:
    ctx = doctor.load_context({"BOT_MODEL": "m", "BOT_TEST_DATABASE_URL": "x"})
    assert (await check_unknown_settings(ctx)).status == "ok"


@pytest.mark.anyio
async def test_doctor_reports_typos_even_when_the_settings_are_invalid(clean: Path) -> None:
    (clean / ".env").write_text("BOT_PORT=x\nBOT_PROT=8000\n")
    ctx = doctor.load_context({})
    assert ctx.settings is None
    result = await check_unknown_settings(ctx)
    assert result.status == "fail" and "did you mean BOT_PORT?" in result.detail


def test_doctor_lists_the_unknown_settings_check(clean: Path) -> None:
    assert check_unknown_settings in doctor.CHECKS


@pytest.mark.anyio
async def test_doctor_settings_fix_names_the_model_and_the_credentials(clean: Path) -> None:
    result = await doctor.check_settings(doctor.load_context({}))
    assert result.status == "fail"
    assert "BOT_MODEL" in result.fix and "BOT_LLM_BASE_URL" in result.fix
    assert "bot setup" in result.fix and "BOT_APP_ID" in result.detail


@pytest.mark.anyio
async def test_doctor_settings_fix_for_anthropic_asks_for_its_key(clean: Path) -> None:
    result = await doctor.check_settings(doctor.load_context({"BOT_LLM_PROVIDER": "anthropic"}))
    assert result.status == "fail"
    assert "BOT_ANTHROPIC_API_KEY" in result.fix and "BOT_LLM_BASE_URL" not in result.fix
    model = await doctor.check_model(doctor.load_context({"BOT_LLM_PROVIDER": "anthropic"}))
    assert "BOT_ANTHROPIC_API_KEY" in model.fix


# --- through the command line ------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
def test_bot_serve_warns_at_start(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("BOT_MODLE=gpt-4.1\nBOT_APP_SLUG=repo-agent\n")
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("BOT_")}
    env.update({"BOT_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(ROOT)})
    log_path = tmp_path / "serve.log"
    port = str(_free_port())
    with log_path.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "serve", "--receivers", "1", "--port", port],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        lines: list[dict[str, object]] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            text = log_path.read_text()
            lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
            if any(line["msg"] == "serving" for line in lines):
                break
            time.sleep(0.2)
        assert any(line["msg"] == "serving" for line in lines), log_path.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    warnings = [line for line in lines if line["level"] == "warning"]
    typo = [w for w in warnings if w.get("variable") == "BOT_MODLE"]
    assert typo and "did you mean BOT_MODEL?" in str(typo[0]["msg"])
    assert typo[0]["did_you_mean"] == "BOT_MODEL"
    assert any(w.get("missing") == ["BOT_MODEL", "BOT_LLM_BASE_URL"] for w in warnings)
    assert any("bot setup" in str(w["msg"]) for w in warnings)
