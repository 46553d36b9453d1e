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
    with pytest.raises(SettingsError, match="BOT_LLM_PROVIDER must be one of openai, anthropic"):
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


def test_the_redelivery_interval_is_off_unless_set() -> None:
    assert load_settings({}, None).redeliver_interval is None
    assert load_settings({"BOT_REDELIVER_INTERVAL": ""}, None).redeliver_interval is None
    assert load_settings({"BOT_REDELIVER_INTERVAL": "300"}, None).redeliver_interval == 300.0
    with pytest.raises(SettingsError, match="redeliver_interval"):
        load_settings({"BOT_REDELIVER_INTERVAL": "0"}, None)
