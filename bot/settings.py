"""Deployment settings: BOT_* variables from the environment, `.env` and the secrets directory.

`load_settings()` reads the three (bot/settings_sources.py says how, and in which order) into
`Settings`; `Settings(...)` itself holds exactly what it is given, nothing read from outside.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict
from pydantic_settings import SettingsError as SourceError

from bot.settings_sources import SettingsError as SettingsError  # callers import it from here
from bot.settings_sources import describe_errors, read_sources
from policies.ui_allow import parse_allow, public_origin

LLM_PROVIDERS = ("openai", "anthropic", "azure")
LLM_APIS = ("chat", "responses")
DEFAULT_REDELIVER_INTERVAL = 900.0
"""BOT_REDELIVER_INTERVAL unless set: the redelivery sweep runs every 15 minutes."""

# BOT_* variables the app reads itself, outside Settings, and where: never reported as unknown.
OUTSIDE_SETTINGS: Mapping[str, str] = {
    "BOT_SECRETS_DIR": "bot/settings_sources.py: where the secret files are",
    "BOT_GIT_NAME": "bot/git/hostgit.py: the author of agents' commits",
    "BOT_GIT_EMAIL": "bot/git/hostgit.py: the author of agents' commits",
    "BOT_TEST_DATABASE_URL": "tests/conftest.py: the Postgres server the tests use",
    "BOT_TEST_POSTGRES_DIR": "scripts/postgres: the test server's folder",
    "BOT_SETUP_BENCH": "scripts/setup: install the benchmarks' extras too",
    "BOT_SETUP_SYSTEM": "scripts/setup: 0 leaves the system packages alone",
}
# Of those, the ones read from the process environment only (a .env line or file is ignored).
ENVIRONMENT_ONLY = frozenset(OUTSIDE_SETTINGS) - {"BOT_SECRETS_DIR"}


class Settings(BaseSettings):
    """Every BOT_* setting, with its default. Secrets are SecretStr so they never print."""

    model_config = SettingsConfigDict(
        frozen=True,
        extra="ignore",
        env_prefix="BOT_",
        case_sensitive=False,
        # JSON-valued settings are parsed by `_json_object`, which names the variable.
        enable_decoding=False,
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Only the values given: the deployment's sources are read by `load_settings`."""
        return (init_settings,)

    app_id: int | None = None
    private_key: SecretStr | None = None
    private_key_path: Path | None = None
    webhook_secret: SecretStr | None = None
    app_slug: str | None = None
    github_api_url: str = "https://api.github.com"
    github_web_url: str = "https://github.com"
    data_dir: Path = Path(".bot")
    # A Postgres DSN may carry a password: kept secret, and its password is redacted.
    database_url: SecretStr | None = None
    model: str | None = None
    llm_base_url: str | None = None
    llm_api_key: SecretStr | None = None
    anthropic_api_key: SecretStr | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    # `bot worker`'s own port for /healthz, /readyz and /metrics; unset: no HTTP at all.
    worker_port: int | None = Field(default=None, ge=1, le=65535)
    # Postgres connections each process's pool holds at most (bot/store/postgres/connection.py).
    db_pool_max: int = Field(default=4, ge=1, le=100)
    workers: int = Field(default=2, ge=1, le=64)
    # How long a worker holds a claimed job without a heartbeat: a job whose worker died is
    # claimed again after this (and its run resumed from the journal).
    job_lease_seconds: float = Field(default=60.0, ge=3, le=3600)
    log_level: str = "INFO"
    insecure_no_signature: bool = False
    github_write_interval: float = Field(default=1.0, ge=0, le=60)
    # Seconds between passes that ask GitHub again for missed deliveries (bot/ops/redeliver.py),
    # where the App's credentials are set; unset or empty: every 15 minutes; 0: never (`bot
    # redeliver` by hand).
    redeliver_interval: float | None = Field(default=DEFAULT_REDELIVER_INTERVAL, ge=0)
    # Request bodies held at once by the webhook route (bot/intake/budget.py); at least 34 so
    # that three quarters of it still holds one 25 MB delivery.
    intake_buffer_mb: int = Field(default=64, ge=34, le=65536)
    # What a 202 promises (bot/intake/delivery_writer.py): "normal" survives a crash of the process,
    # "fsync" also a power loss.
    durability: Literal["normal", "fsync"] = "normal"
    # Agent runtime (bot/agents): provider, streaming, limits, per-role models, types, prices.
    llm_provider: str = "openai"
    llm_stream: bool = True
    llm_reasoning_effort: bool = False
    llm_api_version: str = "2024-10-21"
    llm_api: str = "chat"
    first_response_timeout: float = Field(default=45.0, gt=0)
    tool_timeout: float = Field(default=180.0, gt=0)
    max_turns: int = Field(default=50, ge=1, le=500)
    # Per-command sandbox limits (bot/agents/sandbox_limits.py); 0 turns one off.
    sandbox_memory_mb: int = Field(default=2048, ge=0)
    sandbox_pids: int = Field(default=256, ge=0)
    sandbox_file_mb: int = Field(default=256, ge=0)
    sandbox_cpu_seconds: int = Field(default=120, ge=0)
    sandbox_tmp_mb: int = Field(default=256, ge=0)
    sandbox_grow_mb: int = Field(default=512, ge=0)
    role_models: dict[str, str] = Field(default_factory=dict)
    agent_types: dict[str, dict[str, Any]] = Field(default_factory=dict)
    repo_agent_tools: str | None = None
    model_prices: dict[str, dict[str, float]] = Field(default_factory=dict)
    # Run budgets (policies/budget.py): caps on every repository's `budget`, and per
    # installation per UTC day; unset: no cap.
    max_run_tokens: int | None = Field(default=None, gt=0)
    max_run_cost_usd: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    daily_tokens: int | None = Field(default=None, gt=0)
    # The operator's page under /ui/ (bot/ui): off unless a sign-in token is set.
    ui_token: SecretStr | None = None
    # Signing in to it with GitHub (bot/ui/oauth.py): the App's OAuth client, who may sign
    # in (policies/ui_allow.py), the page's public address and how often access is checked.
    oauth_client_id: str | None = None
    oauth_client_secret: SecretStr | None = None
    ui_allow: str | None = None
    ui_url: str | None = None
    ui_recheck_seconds: float = Field(default=60.0, ge=0, le=3600)
    # The key that signs the review memory mirrored on pull requests (see
    # bot.workflows.review.memory.review_state_key); derived from the App key when unset.
    state_key: SecretStr | None = None

    @field_validator(
        "webhook_secret",
        "private_key",
        "llm_api_key",
        "anthropic_api_key",
        "database_url",
        "redeliver_interval",
        "ui_token",
        "worker_port",
        "oauth_client_id",
        "oauth_client_secret",
        "ui_allow",
        "ui_url",
        "state_key",
        mode="before",
    )
    @classmethod
    def _empty_is_none(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("state_key", mode="after")
    @classmethod
    def _long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value().strip()) < 16:
            raise ValueError(
                "must be at least 16 characters (a random secret: `openssl rand -hex 32`)"
            )
        return value

    @field_validator("redeliver_interval", mode="after")
    @classmethod
    def _unset_is_the_default(cls, value: float | None) -> float:
        return DEFAULT_REDELIVER_INTERVAL if value is None else value

    @field_validator("private_key", mode="before")
    @classmethod
    def _literal_newlines(cls, value: object) -> object:
        """A PEM on one line with literal `\\n`s (as an environment variable must carry it)."""
        return value.replace("\\n", "\n") if isinstance(value, str) else value

    @field_validator("llm_provider")
    @classmethod
    def _known_provider(cls, value: str) -> str:
        name = value.strip().lower()
        if name not in LLM_PROVIDERS:
            raise ValueError(f"must be one of {', '.join(LLM_PROVIDERS)}")
        return name

    @field_validator("llm_api")
    @classmethod
    def _known_api(cls, value: str) -> str:
        name = value.strip().lower()
        if name not in LLM_APIS:
            raise ValueError(f"must be one of {', '.join(LLM_APIS)}")
        return name

    @field_validator("ui_allow")
    @classmethod
    def _allow_rules(cls, value: str | None) -> str | None:
        if value is not None:
            parse_allow(value)  # a ValueError names the entry that is no rule
        return value

    @field_validator("ui_url")
    @classmethod
    def _public_origin(cls, value: str | None) -> str | None:
        return None if value is None else public_origin(value)

    @field_validator("role_models", "agent_types", "model_prices", mode="before")
    @classmethod
    def _json_object(cls, value: object) -> object:
        if isinstance(value, str):
            if not value.strip():
                return {}
            try:
                return json.loads(value)
            except ValueError as exc:
                raise ValueError(f"must be a JSON object ({exc})") from exc
        return value

    @property
    def github_sign_in(self) -> bool:
        """Whether the operator's page offers signing in with GitHub: the App's OAuth client,
        BOT_UI_ALLOW and BOT_UI_URL are all set (`sign_in_problem` names what is missing)."""
        return self.sign_in_problem() is None and self.oauth_client_id is not None

    def sign_in_problem(self) -> str | None:
        """What keeps a half-configured GitHub sign-in from working; None when it is off or
        complete."""
        parts = {
            "BOT_OAUTH_CLIENT_ID": self.oauth_client_id,
            "BOT_OAUTH_CLIENT_SECRET": self.oauth_client_secret,
            "BOT_UI_ALLOW": self.ui_allow,
            "BOT_UI_URL": self.ui_url,
        }
        missing = [name for name, value in parts.items() if value is None]
        if not missing or len(missing) == len(parts):
            return None
        return (
            "signing in to the operator's page with GitHub needs "
            + ", ".join(missing)
            + " too (`bot setup` writes the OAuth client; see the README's operator's page)"
        )

    @property
    def webhook_secrets(self) -> list[bytes]:
        """All accepted webhook secrets (comma-separated for rotation), as bytes."""
        if self.webhook_secret is None:
            return []
        raw = self.webhook_secret.get_secret_value()
        return [part.strip().encode() for part in raw.split(",") if part.strip()]

    @property
    def sqlite_path(self) -> Path:
        url = self.database_dsn
        if url and url.startswith("sqlite:///"):
            return Path(url.removeprefix("sqlite:///"))
        return self.data_dir / "bot.sqlite3"

    @property
    def database_dsn(self) -> str | None:
        """BOT_DATABASE_URL's value; never log it (see `bot.store.postgres.connection.display_dsn`)."""
        return None if self.database_url is None else self.database_url.get_secret_value()

    @property
    def uses_postgres(self) -> bool:
        return bool(
            self.database_dsn and self.database_dsn.startswith(("postgres://", "postgresql://"))
        )

    def private_key_pem(self) -> str | None:
        if self.private_key is not None:
            return self.private_key.get_secret_value()
        if self.private_key_path is not None:
            try:
                return self.private_key_path.read_text(encoding="utf-8")
            except OSError as exc:
                raise SettingsError(
                    f"BOT_PRIVATE_KEY_PATH={self.private_key_path} cannot be read ({exc.strerror}); "
                    "point it at the .pem file GitHub gave you, or run `bot setup`."
                ) from exc
        return None

    def secret_values(self) -> list[str]:
        """The configured secrets' plain values, for redaction."""
        out: list[str] = []
        for secret in (
            self.webhook_secret,
            self.llm_api_key,
            self.anthropic_api_key,
            self.ui_token,
            self.oauth_client_secret,
            self.state_key,
        ):
            if secret is not None:
                parts = (v.strip() for v in secret.get_secret_value().split(","))
                out.extend(v for v in parts if len(v) >= 6)
        password = _dsn_password(self.database_dsn) if self.uses_postgres else None
        if password and len(password) >= 6:
            out.append(password)
        try:
            pem = self.private_key_pem()  # from BOT_PRIVATE_KEY or the file at its path
        except SettingsError:
            pem = None  # unreadable: nothing to redact, and the app reports it where it needs it
        if pem and pem.strip():
            out.append(pem)
        return out


def _dsn_password(dsn: str | None) -> str | None:
    """The password in a libpq DSN (URL or key=value form), if it has one."""
    if not dsn:
        return None
    try:
        import psycopg  # only a Postgres deployment pays for the import
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:  # no postgres extra: the store refuses to open (bot.store.backend)
        return _url_password(dsn)
    try:
        value = conninfo_to_dict(dsn).get("password")
    except psycopg.Error:  # malformed: connecting reports it
        return None
    return None if value is None else str(value)


def _url_password(dsn: str) -> str | None:
    """The password in a postgresql:// URL (the only form `uses_postgres` accepts), read
    without psycopg: its `password=` parameter, else the one after the user name."""
    parts = urlsplit(dsn)
    given = [
        unquote(value)  # as libpq decodes: %XX only, a `+` stays
        for key, _, value in (pair.partition("=") for pair in parts.query.split("&"))
        if unquote(key) == "password"
    ]
    if given:
        return given[-1]
    return None if parts.password is None else unquote(parts.password)


def load_settings(
    environ: Mapping[str, str] | None = None, dotenv: Path | None = Path(".env")
) -> Settings:
    """Settings from the environment (os.environ when None), over `.env` at `dotenv` (None:
    no file), over the secrets directory. Raises SettingsError naming what is wrong and where."""
    sources = read_sources(environ, dotenv)
    values: dict[str, Any] = {}
    try:
        for source in sources.pydantic_sources(Settings):
            values.update(source())
        return Settings(**values)
    except ValidationError as exc:
        raise SettingsError(describe_errors(exc, Settings, sources.where)) from exc
    except SourceError as exc:
        raise SettingsError(f"the BOT_* settings cannot be read: {exc}") from exc


def read_variables(
    environ: Mapping[str, str] | None = None, dotenv: Path | None = Path(".env")
) -> dict[str, str]:
    """Every BOT_* variable the sources hold (upper case) and where it is set; unknown
    names included, nothing checked. Raises SettingsError when a source cannot be read."""
    return read_sources(environ, dotenv).variables()
