"""Where BOT_* values come from, and what to tell the operator when one is wrong.

Three sources, the first that has a value wins: the environment (names case-insensitive),
`.env` (read by python-dotenv: comments, quotes, `export`, multi-line quoted values, `${VAR}`
expanded outside single quotes), and the secrets directory (Docker and compose secrets:
`BOT_SECRETS_DIR`, else `/run/secrets` when it exists), where the file named after the
variable, `bot_webhook_secret` or `BOT_WEBHOOK_SECRET`, gives that setting (pydantic-settings
names a secret file by the prefix and the field name, in any case; its text is stripped).

A source that cannot be read (a `.env` that is not UTF-8 text, a secret file that is not a
readable file) raises `SettingsError` naming it, and so does a bad value: `describe_errors`
turns pydantic's errors into one line per variable, with where it was set and the fix, and
never shows the value of a secret.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from dotenv import dotenv_values
from dotenv.parser import parse_stream
from pydantic import SecretStr, ValidationError
from pydantic_core import PydanticUndefined
from pydantic_settings import EnvSettingsSource, SecretsSettingsSource

if TYPE_CHECKING:
    from pydantic import BaseModel
    from pydantic_core import ErrorDetails
    from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

PREFIX = "BOT_"
SECRETS_DIR_VARIABLE = "BOT_SECRETS_DIR"
DEFAULT_SECRETS_DIR = Path("/run/secrets")
ENVIRONMENT = "set in the environment"


class SettingsError(ValueError):
    """A setting is missing or malformed; the message says which and how to fix it."""


@dataclass(frozen=True, slots=True)
class Sources:
    """What the operator wrote, source by source, before any value is checked."""

    environ: Mapping[str, str]
    dotenv_path: Path | None = None
    dotenv: Mapping[str, str | None] = field(default_factory=dict)
    secrets_dir: Path | None = None
    secret_files: Mapping[str, Path] = field(default_factory=dict)  # BOT_NAME -> its file

    def where(self, name: str) -> str:
        """Where BOT_* variable `name` (any case) gets its value, for messages."""
        name = name.upper()
        if any(key.upper() == name for key in self.environ):
            return ENVIRONMENT
        if any(key.upper() == name for key in self.dotenv):
            return f"set in {self.dotenv_path}"
        if name in self.secret_files:
            return f"set by the file {self.secret_files[name]}"
        return "not set"

    def variables(self) -> dict[str, str]:
        """Every BOT_* name the sources hold (upper case) and where its value comes from."""
        names = [*self.secret_files, *self.dotenv, *self.environ]
        return {n.upper(): self.where(n) for n in names if n.upper().startswith(PREFIX)}

    def pydantic_sources(self, cls: type[BaseSettings]) -> list[PydanticBaseSettingsSource]:
        """pydantic-settings sources over these values, the one that wins last."""
        out: list[PydanticBaseSettingsSource] = []
        if self.secrets_dir is not None:
            out.append(SecretsSettingsSource(cls, secrets_dir=self.secrets_dir))
        out.append(_MappingSource(cls, self.dotenv))
        out.append(_MappingSource(cls, self.environ))
        return out


class _MappingSource(EnvSettingsSource):
    """pydantic-settings' environment source over a given mapping instead of `os.environ`."""

    def __init__(self, cls: type[BaseSettings], values: Mapping[str, str | None]) -> None:
        self._values = values  # read by _load_env_vars, which the base __init__ calls
        super().__init__(cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        # Lower case, as the base class keys them when names are case-insensitive (ours are).
        return {key.lower(): value for key, value in self._values.items()}


def read_sources(environ: Mapping[str, str] | None, dotenv: Path | None) -> Sources:
    """The environment (os.environ when None), the .env at `dotenv` and the secrets dir."""
    given = os.environ if environ is None else environ
    env = {k: v for k, v in given.items() if k.upper().startswith(PREFIX)}
    values = _read_dotenv(dotenv) if dotenv is not None else {}
    secrets_dir = _secrets_dir(env, values)
    files = _secret_files(secrets_dir) if secrets_dir is not None else {}
    return Sources(env, dotenv, values, secrets_dir, files)


def _read_dotenv(path: Path) -> dict[str, str | None]:
    """The .env at `path` as python-dotenv reads it; a line it cannot parse (which it would
    skip with a warning) is an error here, so that no setting is lost unnoticed."""
    if not path.exists():
        return {}
    if not path.is_file():
        raise SettingsError(f"{path} cannot be read (not a file); fix or remove it")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else str(exc)
        raise SettingsError(f"{path} cannot be read ({reason}); fix or remove it") from exc
    for binding in parse_stream(io.StringIO(text)):
        if binding.error:  # named by its key only: the value may be a secret
            key = binding.original.string.partition("=")[0].strip()[:60]
            raise SettingsError(
                f"{path} line {binding.original.line} ({key}) cannot be parsed; write it as "
                "KEY=value, with a closing quote if the value opens one"
            )
    return dict(dotenv_values(stream=io.StringIO(text)))


def _secrets_dir(environ: Mapping[str, str], dotenv: Mapping[str, str | None]) -> Path | None:
    """BOT_SECRETS_DIR from the environment, else from .env; unset or empty: /run/secrets
    if it exists."""
    named = next((v for k, v in environ.items() if k.upper() == SECRETS_DIR_VARIABLE), None)
    if named is None:
        named = next((v for k, v in dotenv.items() if k.upper() == SECRETS_DIR_VARIABLE), None)
    if named is None or not named.strip():
        return DEFAULT_SECRETS_DIR if DEFAULT_SECRETS_DIR.is_dir() else None
    path = Path(named).expanduser()
    if not path.is_dir():
        raise SettingsError(
            f"{SECRETS_DIR_VARIABLE}={named} is not a directory; point it at the folder of "
            "secret files (Docker mounts them at /run/secrets) or unset it"
        )
    return path


def _secret_files(folder: Path) -> dict[str, Path]:
    """The files in `folder` named like a BOT_* variable, each checked to be readable text
    (so a bad one is named here, not met half-way through loading)."""
    try:
        entries = sorted(folder.iterdir())
    except OSError as exc:
        reason = exc.strerror
        raise SettingsError(f"the secrets directory {folder} cannot be read ({reason})") from exc
    files: dict[str, Path] = {}
    for path in entries:
        if not path.name.upper().startswith(PREFIX):
            continue  # other programs' secrets share the folder
        try:
            if not path.is_file():  # pydantic-settings would skip it with a warning
                raise SettingsError(f"the secret file {path} is not a file; remove it")
            path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise SettingsError(
                f"the secret file {path} cannot be read ({reason}); fix or remove it"
            ) from exc
        files[path.name.upper()] = path
    return files


_PROBLEMS: dict[str, str] = {
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "int_type": "must be an integer",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "dict_type": "must be a JSON object",
    "string_type": "must be text",
    "greater_than_equal": "must be at least {ge}",
    "greater_than": "must be more than {gt}",
    "less_than_equal": "must be at most {le}",
    "less_than": "must be less than {lt}",
    "literal_error": "must be {expected}",
}


def _problem(error: ErrorDetails) -> str:
    template = _PROBLEMS.get(error["type"])
    if template is not None:
        return template.format(**error.get("ctx", {}))
    message = error["msg"].removeprefix("Value error, ")
    return message[:1].lower() + message[1:]


def _is_secret(annotation: Any) -> bool:
    return annotation is SecretStr or SecretStr in get_args(annotation)


def describe_errors(
    exc: ValidationError, model: type[BaseModel], where: Callable[[str], str]
) -> str:
    """One line per bad variable: its name, what is wrong, the value (never a secret's),
    where it was set (`where(BOT_NAME)`) and the fix."""
    lines: list[str] = []
    for error in exc.errors():
        field_name = str(error["loc"][0]) if error["loc"] else ""
        info = model.model_fields.get(field_name)
        name = PREFIX + field_name.upper()
        inner = ".".join(str(part) for part in error["loc"][1:])
        text = f"{name}: " + (f"at {inner}: " if inner else "") + _problem(error)
        shown = info is not None and not _is_secret(info.annotation)
        if shown and isinstance(error.get("input"), str | int | float):
            text += f", got {error['input']!r}"
        origin = where(name)
        fix = {ENVIRONMENT: "fix it or unset it"}.get(origin, "fix it or remove it")
        default = None if info is None else info.get_default(call_default_factory=True)
        if default not in (None, PydanticUndefined):
            fix += f" for the default, {default}"
        lines.append(f"{text} ({origin}: {fix})")
    kind = "setting" if len(lines) == 1 else "settings"
    return f"invalid BOT_* {kind}: " + "; ".join(lines)
