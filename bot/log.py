"""Structured logging: JSON lines off a terminal, with delivery and run ids bound per task."""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType

_EMPTY: Mapping[str, object] = MappingProxyType({})
_FIELDS: contextvars.ContextVar[Mapping[str, object]] = contextvars.ContextVar(
    "bot_log_fields", default=_EMPTY
)
_REDACTOR: list[Callable[[str], str]] = []  # set by bot.redact when secrets are known


@contextmanager
def bound(**fields: object) -> Iterator[None]:
    """Attach fields (delivery_id, run_id, repo, ...) to every log line in this context."""
    token = _FIELDS.set({**_FIELDS.get(), **{k: v for k, v in fields.items() if v is not None}})
    try:
        yield
    finally:
        _FIELDS.reset(token)


def current_fields() -> Mapping[str, object]:
    return _FIELDS.get()


def _redact(text: str) -> str:
    for redactor in _REDACTOR:
        text = redactor(text)
    return text


def _redact_values(value: object) -> object:
    """Strings inside `value` redacted before JSON encoding, which would escape a secret's
    quotes, backslashes or newlines so that it no longer matches literally."""
    if isinstance(value, str):
        return _redact(value)
    if isinstance(value, dict):
        return {k: _redact_values(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_values(v) for v in value]
    return value


def set_redactor(fn: Callable[[str], str]) -> None:
    """Install a str -> str function applied to every formatted line."""
    _REDACTOR.clear()
    _REDACTOR.append(fn)


class _ContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in _FIELDS.get().items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


_STANDARD = set(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime", "taskName"}


def _extras(record: logging.LogRecord) -> dict[str, object]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        line.update(_extras(record))
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        line = {k: _redact_values(v) for k, v in line.items()}
        return _redact(json.dumps(line, default=str, ensure_ascii=False))


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        extras = " ".join(f"{k}={v}" for k, v in _extras(record).items())
        base = f"{record.levelname.lower():7} {record.name}: {record.getMessage()}"
        text = f"{base}  {extras}" if extras else base
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return _redact(text)


def configure(level: str = "INFO", *, json_lines: bool | None = None) -> None:
    """Install one handler on the root logger; JSON lines unless stderr is a terminal."""
    use_json = (not sys.stderr.isatty()) if json_lines is None else json_lines
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if use_json else TextFormatter())
    handler.addFilter(_ContextFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("httpx", "httpcore", "uvicorn.access", "openai", "hishel"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(name)
