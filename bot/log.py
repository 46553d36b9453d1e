"""Structured logging: JSON lines off a terminal, with delivery and run ids bound per task."""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import IO

_EMPTY: Mapping[str, object] = MappingProxyType({})
_FIELDS: contextvars.ContextVar[Mapping[str, object]] = contextvars.ContextVar(
    "bot_log_fields", default=_EMPTY
)
_REDACTOR: list[Callable[[str], str]] = []  # set by bot.redact when secrets are known
_PIPE_BUF = 4096  # bytes; Linux's, and the least POSIX allows is 512
# ANSI (ECMA-48) escape sequences: CSI (colours, cursor moves), OSC (titles, hyperlinks) ended by
# BEL or ST, and the two-character escapes; then any ESC left over.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])|\x1b")
# Extras that only repeat the message for a terminal: uvicorn's coloured copy of it.
_DROPPED = frozenset({"color_message"})


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


def strip_ansi(text: str) -> str:
    """`text` without terminal escape sequences (colours, cursor moves, hyperlinks)."""
    return _ANSI.sub("", text) if "\x1b" in text else text


def _clean_values(value: object) -> object:
    """Strings inside `value` without ANSI escapes, then redacted, before JSON encoding, which
    would escape a secret's quotes, backslashes or newlines so that it no longer matches
    literally. Escapes go first: one inside a secret would keep it from matching too. Values
    JSON cannot encode become their `str()`, cleaned the same way."""
    if isinstance(value, str):
        return _redact(strip_ansi(value))
    if isinstance(value, dict):
        return {k: _clean_values(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean_values(v) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return _clean_values(str(value))


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
    return {
        k: v
        for k, v in vars(record).items()
        if k not in _STANDARD and k not in _DROPPED and not k.startswith("_")
    }


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "pid": record.process,  # `bot serve --receivers N` runs several processes
            "msg": record.getMessage(),
        }
        line.update(_extras(record))
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        # Strip terminal escapes and redact the strings before encoding (JSON escapes quotes,
        # backslashes, newlines and ESC, so an encoded secret would no longer match), but look
        # at all of them in one pass first: nearly every line has nothing to change.
        flat = "\n".join(v for v in line.values() if isinstance(v, str))
        plain = all(isinstance(v, str | int | float | bool) for v in line.values())
        if not plain or "\x1b" in flat or _redact(flat) != flat:
            line = {k: _clean_values(v) for k, v in line.items()}
        return _redact(json.dumps(line, default=str, ensure_ascii=False))


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        extras = " ".join(f"{k}={v}" for k, v in _extras(record).items())
        base = f"{record.levelname.lower():7} {record.name}: {record.getMessage()}"
        text = f"{base}  {extras}" if extras else base
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return _redact(text)


class BatchingStreamHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler that writes info and debug lines in batches, at most `delay` seconds
    late; a warning or an error, or a full buffer, writes everything at once.

    One write per batch instead of one per line: on the webhook route a write per delivery
    hands the GIL to the store's writer thread and back every time, which was measured to cost
    about a third of the receiver's throughput. What is lost to a `kill -9` is at most
    `delay` seconds of info lines; deliveries themselves are in the store before their 202.
    """

    def __init__(self, stream: IO[str], *, delay: float = 0.2, limit: int = 64 * 1024) -> None:
        super().__init__(stream)
        self.delay = delay
        self.limit = limit
        self._pending: list[str] = []
        self._size = 0
        self._timer: threading.Timer | None = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + self.terminator
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)
            return
        # Handler.handle holds self.lock around emit.
        self._pending.append(line)
        self._size += len(line)
        if record.levelno >= logging.WARNING or self._size >= self.limit:
            self._write_pending()
        elif self._timer is None:
            self._timer = threading.Timer(self.delay, self.flush)
            self._timer.daemon = True
            self._timer.start()

    def _write_pending(self) -> None:
        if self._pending:
            try:
                # Several processes may share the stream (`bot serve --receivers N`); a write
                # of at most PIPE_BUF bytes to a pipe is never interleaved with another's, so
                # the lines go in writes of whole lines up to that size.
                chunk: list[str] = []
                size = 0
                for line in self._pending:
                    n = len(line.encode())
                    if chunk and size + n > _PIPE_BUF:
                        self.stream.write("".join(chunk))
                        self.stream.flush()
                        chunk, size = [], 0
                    chunk.append(line)
                    size += n
                self.stream.write("".join(chunk))
                self.stream.flush()
            except Exception:  # a closed or broken stream must not break the caller
                pass
            self._pending.clear()
            self._size = 0

    def flush(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            self._timer = None
            self._write_pending()

    def close(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            if self._timer is not None:
                self._timer.cancel()
        self.flush()
        super().close()


def configure(level: str = "INFO", *, json_lines: bool | None = None) -> None:
    """Install one handler on the root logger; JSON lines unless stderr is a terminal.

    Off a terminal, info lines are written in batches (`BatchingStreamHandler`).
    """
    on_terminal = sys.stderr.isatty()
    use_json = (not on_terminal) if json_lines is None else json_lines
    handler: logging.Handler = (
        logging.StreamHandler(sys.stderr) if on_terminal else BatchingStreamHandler(sys.stderr)
    )
    handler.setFormatter(JsonFormatter() if use_json else TextFormatter())
    handler.addFilter(_ContextFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("httpx", "httpcore", "uvicorn.access", "openai", "hishel"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # Python's warnings are written as log lines too, so that every line is one JSON object.
    logging.captureWarnings(True)


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(name)
