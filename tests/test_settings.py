"""Deployment settings: BOT_* values over .env, with clear errors for bad values."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.settings import SettingsError, load_settings


def test_environment_wins_over_dotenv(tmp_path: Path) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text('BOT_MODEL="from-file"\nBOT_PORT=9000\n# comment\nOTHER=1\n')
    settings = load_settings({"BOT_MODEL": "from-env"}, dotenv)
    assert settings.model == "from-env" and settings.port == 9000


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param("openai", "openai", id="openai"),
        pytest.param(" Anthropic ", "anthropic", id="case-and-spaces"),
    ],
)
def test_provider_is_normalized(raw: str, expected: str) -> None:
    assert load_settings({"BOT_LLM_PROVIDER": raw}, None).llm_provider == expected


def test_unknown_provider_is_refused_with_the_choices() -> None:
    # Otherwise the runtime would find no model for it and blame BOT_MODEL instead.
    with pytest.raises(SettingsError, match="BOT_LLM_PROVIDER: must be one of openai, anthropic"):
        load_settings({"BOT_LLM_PROVIDER": "openia"}, None)


def test_unreadable_dotenv_is_a_settings_error(tmp_path: Path) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_bytes(b"BOT_MODEL=\xff\xfe\n")
    with pytest.raises(SettingsError, match=r"\.env cannot be read"):
        load_settings({}, dotenv)


def test_secret_values_are_the_rotation_parts_without_spaces() -> None:
    settings = load_settings({"BOT_WEBHOOK_SECRET": "old-secret-1, new-secret-2"}, None)
    assert [s.decode() for s in settings.webhook_secrets] == ["old-secret-1", "new-secret-2"]
    # Redaction matches these literally: a leading space would miss the secret at a line start.
    assert settings.secret_values() == ["old-secret-1", "new-secret-2"]


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("postgresql://bot:pg-s3cret-pw@db.internal:5432/bot", id="url"),
        pytest.param("postgres://bot@/bot?host=/run/pg&password=pg-s3cret-pw", id="url-query"),
    ],
)
def test_a_postgres_url_selects_postgres_and_its_password_is_redacted(url: str) -> None:
    settings = load_settings({"BOT_DATABASE_URL": url}, None)
    assert settings.uses_postgres and settings.database_dsn == url
    assert "pg-s3cret-pw" in settings.secret_values()
    assert "pg-s3cret-pw" not in repr(settings)


def test_a_sqlite_url_names_the_database_file(tmp_path: Path) -> None:
    settings = load_settings({"BOT_DATABASE_URL": f"sqlite:///{tmp_path}/x.db"}, None)
    assert not settings.uses_postgres and settings.sqlite_path == tmp_path / "x.db"
    assert load_settings({}, None).sqlite_path == Path(".bot/bot.sqlite3")


def test_the_redelivery_interval_is_15_minutes_unless_set_and_0_turns_it_off() -> None:
    assert load_settings({}, None).redeliver_interval == 900.0
    assert load_settings({"BOT_REDELIVER_INTERVAL": ""}, None).redeliver_interval == 900.0
    assert load_settings({"BOT_REDELIVER_INTERVAL": "300"}, None).redeliver_interval == 300.0
    assert load_settings({"BOT_REDELIVER_INTERVAL": "0"}, None).redeliver_interval == 0.0
    with pytest.raises(SettingsError, match="BOT_REDELIVER_INTERVAL: must be at least 0"):
        load_settings({"BOT_REDELIVER_INTERVAL": "-1"}, None)


# --- .env parsed as python-dotenv does ---------------------------------------------------


def write_env(tmp_path: Path, text: str) -> Path:
    dotenv = tmp_path / ".env"
    dotenv.write_text(text)
    return dotenv


def test_a_comment_after_a_value_is_not_part_of_it(tmp_path: Path) -> None:
    settings = load_settings({}, write_env(tmp_path, "BOT_PORT=8001 # dev port\n"))
    assert settings.port == 8001


def test_a_quoted_value_followed_by_a_comment_loses_its_quotes(tmp_path: Path) -> None:
    dotenv = write_env(tmp_path, "BOT_APP_SLUG=\"my-app\" # note\nBOT_MODEL='m 1'  # x\n")
    settings = load_settings({}, dotenv)
    assert settings.app_slug == "my-app" and settings.model == "m 1"


def test_export_lines_are_read(tmp_path: Path) -> None:
    dotenv = write_env(tmp_path, "export BOT_MODEL=from-export\nexport BOT_WORKERS=3\n")
    settings = load_settings({}, dotenv)
    assert settings.model == "from-export" and settings.workers == 3


PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAK\nq3x/9\n-----END RSA PRIVATE KEY-----\n"


@pytest.mark.parametrize(
    "line",
    [
        pytest.param("BOT_PRIVATE_KEY=" + PEM.replace("\n", "\\n"), id="bare-literal-n"),
        pytest.param("BOT_PRIVATE_KEY='" + PEM.replace("\n", "\\n") + "'", id="single-literal-n"),
        pytest.param('BOT_PRIVATE_KEY="' + PEM.replace("\n", "\\n") + '"', id="double-escape-n"),
        pytest.param('BOT_PRIVATE_KEY="' + PEM + '"', id="multi-line"),
    ],
)
def test_the_private_key_in_dotenv_keeps_its_lines(tmp_path: Path, line: str) -> None:
    settings = load_settings({}, write_env(tmp_path, line + "\nBOT_APP_ID=3\n"))
    assert settings.private_key_pem() == PEM and settings.app_id == 3


def test_the_private_key_with_literal_newlines_in_the_environment_works_too() -> None:
    settings = load_settings({"BOT_PRIVATE_KEY": PEM.replace("\n", "\\n")}, None)
    assert settings.private_key_pem() == PEM


def test_names_in_the_environment_are_case_insensitive() -> None:
    assert load_settings({"bot_model": "lower", "Bot_Port": "8123"}, None).model == "lower"
    assert load_settings({"Bot_Port": "8123"}, None).port == 8123


@pytest.mark.parametrize(
    ("env", "dotenv_text"),
    [
        pytest.param({"BOT_ROLE_MODELS": '{"reviewer": "gpt-4.1"}'}, "", id="environment"),
        pytest.param({}, 'BOT_ROLE_MODELS=\'{"reviewer": "gpt-4.1"}\'\n', id="dotenv"),
    ],
)
def test_json_settings_are_read_from_either_source(
    tmp_path: Path, env: dict[str, str], dotenv_text: str
) -> None:
    settings = load_settings(env, write_env(tmp_path, dotenv_text))
    assert settings.role_models == {"reviewer": "gpt-4.1"}
    assert settings.agent_types == {} and settings.model_prices == {}


def test_an_empty_json_setting_is_empty() -> None:
    assert load_settings({"BOT_MODEL_PRICES": ""}, None).model_prices == {}


def test_bad_json_names_the_variable() -> None:
    with pytest.raises(SettingsError, match=r"BOT_AGENT_TYPES: must be a JSON object"):
        load_settings({"BOT_AGENT_TYPES": "{not json"}, None)


# --- errors that name the variable, where it was set, and the fix ------------------------


def test_a_bad_value_in_the_environment_names_it_and_shows_it() -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings({"BOT_PORT": "8001 # x"}, None)
    message = str(caught.value)
    assert "BOT_PORT: must be an integer, got '8001 # x'" in message
    assert "the environment" in message and "8000" in message  # where, and the default


def test_a_bad_value_in_dotenv_names_the_file_and_the_key(tmp_path: Path) -> None:
    dotenv = write_env(tmp_path, "BOT_MODEL=m\nBOT_WORKERS=0\n")
    with pytest.raises(SettingsError) as caught:
        load_settings({}, dotenv)
    message = str(caught.value)
    assert "BOT_WORKERS: must be at least 1, got '0'" in message
    assert str(dotenv) in message


def test_every_bad_value_is_reported_at_once(tmp_path: Path) -> None:
    dotenv = write_env(tmp_path, "BOT_WORKERS=many\n")
    with pytest.raises(SettingsError) as caught:
        load_settings({"BOT_LLM_STREAM": "perhaps", "BOT_DURABILITY": "always"}, dotenv)
    message = str(caught.value)
    assert "BOT_WORKERS: must be an integer, got 'many'" in message
    assert "BOT_LLM_STREAM: must be true or false, got 'perhaps'" in message
    assert "BOT_DURABILITY: must be 'normal' or 'fsync', got 'always'" in message


def test_a_bad_secret_is_named_but_never_shown() -> None:
    from pydantic import ValidationError

    from bot.settings import Settings
    from bot.settings_sources import describe_errors

    with pytest.raises(ValidationError) as caught:
        Settings.model_validate({"ui_token": 1234567, "port": "x"})
    message = describe_errors(caught.value, Settings, lambda name: "set in the environment")
    assert "BOT_UI_TOKEN" in message and "1234567" not in message
    assert "got 'x'" in message


def test_the_dotenv_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    dotenv = tmp_path / ".env"
    dotenv.mkdir()  # a directory where the file should be
    (dotenv / "x").write_text("")
    with pytest.raises(SettingsError, match=r"\.env cannot be read"):
        load_settings({}, dotenv)


# --- Docker and compose secrets ----------------------------------------------------------


def test_a_file_in_the_secrets_dir_gives_that_setting(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "bot_webhook_secret").write_text("old-secret-1,new-secret-2\n")
    (secrets / "BOT_APP_ID").write_text("42\n")
    (secrets / "db_password").write_text("not ours")
    settings = load_settings({"BOT_SECRETS_DIR": str(secrets)}, None)
    assert settings.webhook_secrets == [b"old-secret-1", b"new-secret-2"]
    assert settings.app_id == 42


def test_the_environment_and_dotenv_win_over_the_secrets_dir(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "bot_model").write_text("from-secret")
    (secrets / "bot_app_slug").write_text("from-secret")
    (secrets / "bot_port").write_text("9100")
    dotenv = write_env(tmp_path, "BOT_APP_SLUG=from-file\n")
    settings = load_settings({"BOT_SECRETS_DIR": str(secrets), "BOT_MODEL": "from-env"}, dotenv)
    assert (settings.model, settings.app_slug, settings.port) == ("from-env", "from-file", 9100)


def test_the_secrets_dir_may_be_named_in_dotenv(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "bot_ui_token").write_text("a-long-operator-token\n")
    settings = load_settings({}, write_env(tmp_path, f"BOT_SECRETS_DIR={secrets}\n"))
    assert settings.ui_token is not None
    assert settings.ui_token.get_secret_value() == "a-long-operator-token"


def test_a_missing_secrets_dir_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"BOT_SECRETS_DIR=.*nope is not a directory"):
        load_settings({"BOT_SECRETS_DIR": str(tmp_path / "nope")}, None)


def test_an_unreadable_secret_file_is_named(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "bot_llm_api_key").write_bytes(b"\xff\xfe")
    with pytest.raises(SettingsError, match=r"bot_llm_api_key cannot be read"):
        load_settings({"BOT_SECRETS_DIR": str(secrets)}, None)


def test_a_bad_value_in_a_secret_file_names_the_file(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "bot_app_id").write_text("forty-two")
    with pytest.raises(SettingsError) as caught:
        load_settings({"BOT_SECRETS_DIR": str(secrets)}, None)
    assert "BOT_APP_ID: must be an integer" in str(caught.value)
    assert str(secrets / "bot_app_id") in str(caught.value)


# --- settings other parts read -----------------------------------------------------------


def test_worker_port_and_db_pool_max() -> None:
    defaults = load_settings({}, None)
    assert defaults.worker_port is None and defaults.db_pool_max == 4
    assert load_settings({"BOT_WORKER_PORT": ""}, None).worker_port is None
    chosen = load_settings({"BOT_WORKER_PORT": "8010", "BOT_DB_POOL_MAX": "16"}, None)
    assert chosen.worker_port == 8010 and chosen.db_pool_max == 16
    with pytest.raises(SettingsError, match=r"BOT_DB_POOL_MAX: must be at most 100"):
        load_settings({"BOT_DB_POOL_MAX": "101"}, None)


def test_the_default_secrets_dir_is_read_when_it_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot import settings_sources

    secrets = tmp_path / "run-secrets"
    secrets.mkdir()
    (secrets / "bot_webhook_secret").write_text("from-docker\n")
    monkeypatch.setattr(settings_sources, "DEFAULT_SECRETS_DIR", secrets)
    assert load_settings({}, None).webhook_secrets == [b"from-docker"]
    # Empty is unset, as for every other setting (and as .env.example shows it).
    assert load_settings({"BOT_SECRETS_DIR": ""}, None).webhook_secrets == [b"from-docker"]
    monkeypatch.setattr(settings_sources, "DEFAULT_SECRETS_DIR", tmp_path / "absent")
    assert load_settings({}, None).webhook_secrets == []


def test_a_dotenv_line_that_cannot_be_parsed_is_named_not_skipped(tmp_path: Path) -> None:
    dotenv = write_env(tmp_path, "BOT_MODEL=m\nBOT_WEBHOOK_SECRET='s3cret-value\nBOT_PORT=1\n")
    with pytest.raises(
        SettingsError, match=r"\.env line 2 \(BOT_WEBHOOK_SECRET\) cannot be parsed"
    ):
        load_settings({}, dotenv)
    with pytest.raises(SettingsError) as caught:
        load_settings({}, dotenv)
    assert "s3cret-value" not in str(caught.value)
