"""Structured log lines: bound fields, and secrets redacted in both formats."""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Iterator

import pytest

from bot import log
from bot.redact import Redactor

# Webhook secrets are free text: quotes, backslashes and newlines are all possible.
SECRET = 'sh"h\\top-secret\nvalue'


@pytest.fixture
def capture() -> Iterator[tuple[logging.Logger, io.StringIO, logging.Handler]]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(log._ContextFilter())
    logger = logging.getLogger("test.log")
    logger.addHandler(handler)
    logger.propagate = False
    log.set_redactor(Redactor([SECRET]))
    try:
        yield logger, stream, handler
    finally:
        logger.removeHandler(handler)
        log.set_redactor(Redactor())


def test_json_lines_redact_secrets_that_json_would_escape(
    capture: tuple[logging.Logger, io.StringIO, logging.Handler],
) -> None:
    logger, stream, handler = capture
    handler.setFormatter(log.JsonFormatter())
    with log.bound(run_id="wf_0123456789ab"):
        logger.warning("secret is %s", SECRET, extra={"detail": {"nested": [SECRET]}})
    line = json.loads(stream.getvalue())
    assert SECRET not in json.dumps(line)
    assert line["msg"] == "secret is [redacted secret]"
    assert line["detail"] == {"nested": ["[redacted secret]"]}
    assert line["run_id"] == "wf_0123456789ab"


def test_text_lines_redact_secrets(
    capture: tuple[logging.Logger, io.StringIO, logging.Handler],
) -> None:
    logger, stream, handler = capture
    handler.setFormatter(log.TextFormatter())
    logger.warning("secret is %s", SECRET, extra={"where": SECRET})
    assert SECRET not in stream.getvalue()
    assert "secret is [redacted secret]" in stream.getvalue()


@pytest.fixture
def batching() -> Iterator[tuple[logging.Logger, io.StringIO, log.BatchingStreamHandler]]:
    stream = io.StringIO()
    handler = log.BatchingStreamHandler(stream, delay=0.05)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger = logging.getLogger("test.log.batching")
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    try:
        yield logger, stream, handler
    finally:
        logger.removeHandler(handler)
        handler.close()


def test_info_lines_are_batched_and_a_warning_writes_them_in_order(
    batching: tuple[logging.Logger, io.StringIO, log.BatchingStreamHandler],
) -> None:
    logger, stream, handler = batching
    handler.delay = 60.0  # the timer must not be what writes them here
    logger.info("one")
    logger.debug("two")
    assert stream.getvalue() == ""
    logger.warning("three")
    assert stream.getvalue() == "INFO one\nDEBUG two\nWARNING three\n"


def test_batched_lines_are_written_within_the_delay(
    batching: tuple[logging.Logger, io.StringIO, log.BatchingStreamHandler],
) -> None:
    logger, stream, _ = batching
    logger.info("soon")
    deadline = time.monotonic() + 10
    while stream.getvalue() == "" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert stream.getvalue() == "INFO soon\n"


def test_a_full_buffer_and_close_write_everything(
    batching: tuple[logging.Logger, io.StringIO, log.BatchingStreamHandler],
) -> None:
    logger, stream, handler = batching
    handler.delay, handler.limit = 60.0, 20
    logger.info("0123456789")
    assert stream.getvalue() == ""
    logger.info("abcdefghij")  # past the limit: both go out
    assert stream.getvalue() == "INFO 0123456789\nINFO abcdefghij\n"
    logger.info("last")
    handler.close()
    assert stream.getvalue().endswith("INFO last\n")


class _Writes(io.StringIO):
    """A stream that keeps each write apart, as the system calls under it would be."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return super().write(text)


def test_a_batch_goes_out_in_writes_of_whole_lines_no_larger_than_pipe_buf() -> None:
    """Receivers share one stderr: a write of at most PIPE_BUF bytes to a pipe is never
    interleaved with another process's, so no line is ever cut by someone else's."""
    stream = _Writes()
    handler = log.BatchingStreamHandler(stream, delay=60.0)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("test.log.pipe_buf")
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    try:
        for n in range(200):
            logger.info("é" * (n % 50) + "x" * 60)  # two bytes per é: bytes, not characters
        logger.warning("flush")
    finally:
        logger.removeHandler(handler)
        handler.close()
    writes = [w for w in stream.writes if w]
    assert len(writes) > 1
    for chunk in writes:
        assert len(chunk.encode()) <= 4096
        assert chunk.endswith("\n")
    assert "".join(writes).count("\n") == 201


def _raw_json_line(stream: io.StringIO) -> str:
    (raw,) = stream.getvalue().splitlines()
    assert "\x1b" not in raw and "\\u001b" not in raw, raw
    return raw


def test_json_lines_drop_uvicorns_color_message(
    capture: tuple[logging.Logger, io.StringIO, logging.Handler],
) -> None:
    logger, stream, handler = capture
    handler.setFormatter(log.JsonFormatter())
    # As uvicorn.server logs its start: the same message again, coloured, as an extra.
    colored = "Started server process [\x1b[36m%d\x1b[0m]"
    logger.setLevel(logging.INFO)
    try:
        logger.info("Started server process [%d]", 4242, extra={"color_message": colored})
    finally:
        logger.setLevel(logging.NOTSET)
    line = json.loads(_raw_json_line(stream))
    assert "color_message" not in line
    assert line["msg"] == "Started server process [4242]"


def test_json_lines_strip_ansi_escapes_everywhere(
    capture: tuple[logging.Logger, io.StringIO, logging.Handler],
) -> None:
    logger, stream, handler = capture
    handler.setFormatter(log.JsonFormatter())

    class Shown:
        def __str__(self) -> str:
            return "\x1b[1mbold\x1b[22m object"

    link = "\x1b]8;;https://example.com/\x1b\\a link\x1b]8;;\x1b\\"
    try:
        raise RuntimeError("\x1b[31mred\x1b[0m failure")
    except RuntimeError:
        logger.exception(
            "\x1b[32mgreen\x1b[0m %s",
            link,
            extra={"detail": {"nested": ["\x1b[2K\x1b[1Gcleared"]}, "obj": Shown()},
        )
    line = json.loads(_raw_json_line(stream))
    assert line["msg"] == "green a link"
    assert line["detail"] == {"nested": ["cleared"]}
    assert line["obj"] == "bold object"
    assert "RuntimeError: red failure" in line["exc"]


def test_a_secret_split_by_ansi_escapes_is_still_redacted(
    capture: tuple[logging.Logger, io.StringIO, logging.Handler],
) -> None:
    logger, stream, handler = capture
    handler.setFormatter(log.JsonFormatter())
    split = SECRET[:4] + "\x1b[0m" + SECRET[4:]
    logger.warning("value %s", split, extra={"where": split})
    line = json.loads(_raw_json_line(stream))
    assert line["msg"] == "value [redacted secret]"
    assert line["where"] == "[redacted secret]"
