"""What the operator's settings lack or get wrong, said at start-up and by `bot doctor`.

- An unknown BOT_* variable (environment, .env or secrets directory) is named with the
  setting it resembles ("did you mean BOT_MODEL?"); the app's own variables read outside
  Settings (`bot.settings.OUTSIDE_SETTINGS`) are not unknown.
- No model the runtime can use (bot/agents/runtime.py: BOT_MODEL, and BOT_LLM_BASE_URL for
  an OpenAI-compatible endpoint or a key for Anthropic) and no GitHub App credentials are each
  one gap, with what is missing and the fix.

`bot serve` and `bot worker` log these as warnings when they start (`log_startup_warnings`);
`bot doctor` fails on an unknown name in `.env` or the secrets directory and warns on one in
the environment (`check_unknown_settings`).
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from bot.github.setup import missing_credentials
from bot.ops.checks import CheckResult, DoctorContext
from bot.settings import ENVIRONMENT_ONLY, OUTSIDE_SETTINGS, Settings, read_variables
from bot.settings_sources import ENVIRONMENT, SettingsError
from bot.wiring import has_model

# Endpoints that refuse a request without a key (a local server usually needs none).
KEYED_HOSTS = frozenset({"api.openai.com"})


def setting_names() -> list[str]:
    """Every variable Settings reads, as the operator writes it."""
    return [f"BOT_{name.upper()}" for name in Settings.model_fields]


@dataclass(frozen=True, slots=True)
class UnknownSetting:
    """A BOT_* variable nothing reads where it was set."""

    name: str
    where: str  # "set in the environment", "set in /srv/bot/.env", ...
    suggestion: str | None = None  # the setting it most resembles
    environment_only: bool = False  # an app variable, but read from the environment only

    @property
    def message(self) -> str:
        if self.environment_only:
            return (
                f"{self.name} ({self.where}) is read from the environment only and is ignored "
                "there; export it instead"
            )
        text = f"{self.name} ({self.where}) is not a setting and is ignored"
        if self.suggestion:
            return f"{text}; did you mean {self.suggestion}?"
        return f"{text}; the settings are listed in README.md (Settings)"


def unknown_settings(variables: Mapping[str, str]) -> list[UnknownSetting]:
    """The unknown names among `variables` (BOT_NAME -> where it is set)."""
    known = setting_names()
    out: list[UnknownSetting] = []
    for name, where in sorted(variables.items()):
        if name in known:
            continue
        if name in OUTSIDE_SETTINGS:
            if name in ENVIRONMENT_ONLY and where != ENVIRONMENT:
                out.append(UnknownSetting(name, where, environment_only=True))
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
        out.append(UnknownSetting(name, where, close[0] if close else None))
    return out


@dataclass(frozen=True, slots=True)
class Gap:
    """Settings the app needs for one part of its work, and how to provide them."""

    what: str
    missing: tuple[str, ...]
    fix: str

    @property
    def message(self) -> str:
        return f"{self.what} ({', '.join(self.missing)} missing); {self.fix}"


def model_gap(settings: Settings) -> Gap | None:
    """What the agents lack to reach a model. Without BOT_MODEL or the default provider's
    endpoint (`bot.wiring.has_model`, which the worker goes by), deliveries that need a model
    are skipped `not_configured`; without a key the endpoint requires, every call is refused."""
    anthropic = settings.llm_provider == "anthropic"
    if not has_model(settings):
        missing = ["BOT_MODEL"] if not settings.model else []
        if not anthropic and not settings.llm_base_url:
            missing.append("BOT_LLM_BASE_URL")
        if anthropic and _needs_key(settings):
            missing.append("BOT_ANTHROPIC_API_KEY")
        fix = "set BOT_MODEL and " + ("BOT_ANTHROPIC_API_KEY" if anthropic else "BOT_LLM_BASE_URL")
        return Gap(
            "no model configured: deliveries that need one are skipped (not_configured)",
            tuple(missing),
            fix,
        )
    if _needs_key(settings):
        key = "BOT_ANTHROPIC_API_KEY" if anthropic else "BOT_LLM_API_KEY"
        endpoint = settings.llm_base_url or "the Anthropic API"
        return Gap(f"{endpoint} needs a key: every agent call fails", (key,), f"set {key}")
    return None


def _needs_key(settings: Settings) -> bool:
    """Whether the default provider's endpoint refuses requests without a key, and none is
    set (a local OpenAI-compatible server, or an Anthropic proxy of one's own, needs none)."""
    if settings.llm_provider == "anthropic":
        no_key = settings.anthropic_api_key is None and settings.llm_api_key is None
        return no_key and not settings.llm_base_url
    if settings.llm_provider == "azure":  # Azure OpenAI refuses every call without `api-key`
        return settings.llm_api_key is None
    host = (urlsplit(settings.llm_base_url or "").hostname or "").lower()
    return settings.llm_api_key is None and host in KEYED_HOSTS


def credentials_gap(settings: Settings) -> Gap | None:
    """What the app lacks to read from and post to GitHub."""
    missing = missing_credentials(settings)
    if not missing:
        return None
    return Gap(
        "no GitHub App credentials: nothing is read from or posted to GitHub",
        tuple(missing),
        "run `bot setup` to register the App and write BOT_APP_ID, BOT_PRIVATE_KEY_PATH and "
        "BOT_WEBHOOK_SECRET to .env",
    )


def log_startup_warnings(
    log: logging.Logger,
    settings: Settings,
    *,
    environ: Mapping[str, str] | None = None,
    dotenv: Path | None = Path(".env"),
) -> None:
    """One warning per unknown variable and per gap (the sources are those `load_settings`
    read: os.environ when `environ` is None, and `dotenv`)."""
    try:
        variables = read_variables(environ, dotenv)
    except SettingsError:  # unreachable once the settings loaded from the same sources
        variables = {}
    for unknown in unknown_settings(variables):
        log.warning(
            unknown.message,
            extra={
                "variable": unknown.name,
                "source": unknown.where,
                "did_you_mean": unknown.suggestion,
            },
        )
    for gap in (model_gap(settings), credentials_gap(settings)):
        if gap is not None:
            log.warning(gap.message, extra={"missing": list(gap.missing)})


async def check_unknown_settings(ctx: DoctorContext) -> CheckResult:
    """`bot doctor`: fail on an unknown name in .env or the secrets directory (written for
    this app, so a mistake); warn on one in the environment, which other programs share."""
    found = unknown_settings(ctx.variables)
    if not found:
        return CheckResult("unknown settings", "ok", "none")
    detail = "; ".join(u.message for u in found)
    renames = [f"{u.name} to {u.suggestion}" for u in found if u.suggestion]
    fix = f"rename {', '.join(renames)}" if renames else "remove them"
    if any(u.where != ENVIRONMENT for u in found):
        return CheckResult("unknown settings", "fail", detail, fix)
    return CheckResult("unknown settings", "warn", detail, fix)
