"""Structured log lines: bound fields, and secrets redacted in both formats."""

from __future__ import annotations

import io
import json
import logging
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
