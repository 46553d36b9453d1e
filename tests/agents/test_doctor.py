"""`bot doctor`: one line per check, secrets never printed, non-zero exit when required fails."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot import cli
from bot.ops import doctor
from tests.fakes.llm import FakeLLM, serve, text


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # no stray .env
    for key in list(os.environ):
        if key.startswith("BOT_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("BOT_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


def test_doctor_all_good_against_a_model_on_loopback(
    env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeLLM([text("ready")], api_key="sk-doctor-secret")
    with serve(fake) as base_url:
        monkeypatch.setenv("BOT_MODEL", "fake-model")
        monkeypatch.setenv("BOT_LLM_BASE_URL", base_url)
        monkeypatch.setenv("BOT_LLM_API_KEY", "sk-doctor-secret")
        monkeypatch.setenv("BOT_WEBHOOK_SECRET", "whsec-doctor")
        code = cli.main(["doctor"])
    out = capsys.readouterr().out
    status = {line[6:].split(":")[0]: line.split()[0] for line in out.splitlines()}
    assert code == 0, out  # warnings (no GitHub App yet) do not fail
    assert status["model"] == status["sandbox"] == status["data dir"] == status["git"] == "ok"
    assert status["database"] == "ok"
    assert status["settings"] == "warn"
    model_line = next(line for line in out.splitlines() if " model:" in line)
    assert model_line.startswith("ok    model: fake-model at http://127.0.0.1:")
    assert "sk-doctor-secret" not in out and "whsec-doctor" not in out
    assert "BOT_LLM_API_KEY" in out and "missing: BOT_APP_ID" in out
    assert fake.bodies[0]["model"] == "fake-model"


def test_doctor_fails_without_a_model(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["doctor"])
    captured = capsys.readouterr()
    assert code == 1
    lines = captured.out.splitlines()
    assert lines[0].startswith("FAIL  settings:") and "BOT_MODEL" in lines[0]
    assert lines[1] == "FAIL  model: no model configured -> set BOT_MODEL and BOT_LLM_BASE_URL"
    assert "check(s) failed: settings, model" in captured.err


def test_doctor_reports_a_rejected_key(
    env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeLLM([text("ready")], api_key="sk-right")
    with serve(fake) as base_url:
        monkeypatch.setenv("BOT_MODEL", "m")
        monkeypatch.setenv("BOT_LLM_BASE_URL", base_url)
        monkeypatch.setenv("BOT_LLM_API_KEY", "sk-wrong-key")
        code = cli.main(["doctor"])
    out = capsys.readouterr().out
    assert code == 1
    model_line = next(line for line in out.splitlines() if "model:" in line)
    assert "HTTP 401: invalid api key" in model_line and "BOT_LLM_API_KEY" in model_line
    assert "sk-wrong-key" not in out


@pytest.mark.anyio
async def test_sandbox_and_data_dir_problems_are_explained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot.agents import sandbox

    monkeypatch.setattr(sandbox, "bwrap_path", lambda: None)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    ctx = doctor.load_context({"BOT_DATA_DIR": str(blocker / "sub")})
    results = {r.name: r for r in await doctor.run_checks(ctx)}
    assert results["sandbox"].status == "warn"
    assert "no run_command tool" in results["sandbox"].detail
    assert results["data dir"].status == "fail"
    assert "BOT_DATA_DIR" in results["data dir"].fix


@pytest.mark.anyio
async def test_a_crashing_check_does_not_hide_the_others() -> None:
    async def broken(ctx: doctor.DoctorContext) -> doctor.CheckResult:
        raise RuntimeError("boom")

    ctx = doctor.DoctorContext(settings=None, settings_error="bad BOT_PORT")
    results = await doctor.run_checks(ctx, [broken, doctor.check_git])
    assert results[0].line() == "FAIL  broken: the check crashed: RuntimeError('boom')"
    assert results[1].status == "ok"


def test_git_version_parse() -> None:
    assert doctor.git_version("git version 2.39.5") == (2, 39)
    assert doctor.git_version("nonsense") is None


def test_doctor_with_unreadable_settings_still_checks_the_rest(
    env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BOT_PORT", "not-a-port")
    code = cli.main(["doctor", "--skip-model"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 1
    assert lines[0].startswith("FAIL  settings: invalid BOT_* setting") and "port" in lines[0]
    assert any(line.startswith("ok    git:") for line in lines)
    assert any(line.startswith("ok    sandbox:") for line in lines)
