"""Tests for bot/redact.py: token shapes, configured secrets, and the log hook."""

from __future__ import annotations

import io
import json
import logging

import pytest

from bot import log
from bot.redact import Redactor, install, redact
from bot.settings import Settings

GHP = "ghp_" + "A1b2C3d4E5" * 3 + "F6g7H8"  # 36 characters after the prefix
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "-----END RSA PRIVATE KEY-----"
)
JWT = "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiIxMjMifQ.c2lnbmF0dXJlLWJ5dGVz"


@pytest.mark.parametrize(
    ("secret", "kind"),
    [
        pytest.param(GHP, "github token", id="ghp"),
        pytest.param("gho_" + "x" * 36, "github token", id="gho"),
        pytest.param("ghs_" + "Ab1" * 12, "github token", id="ghs"),
        pytest.param("ghu_" + "Z" * 36, "github token", id="ghu"),
        pytest.param("ghr_" + "9" * 36, "github token", id="ghr"),
        pytest.param("github_pat_11ABCDEFG0_" + "q" * 59, "github token", id="github_pat"),
        pytest.param("sk-" + "a" * 48, "api key", id="sk"),
        pytest.param("sk-ant-api03-" + "B" * 40, "api key", id="sk-ant"),
        pytest.param("sk-proj-" + "c_d-" * 10, "api key", id="sk-proj"),
        pytest.param(JWT, "jwt", id="jwt"),
        pytest.param(PEM, "private key", id="pem"),
        pytest.param("AKIAIOSFODNN7EXAMPLE", "aws key", id="aws-key-id"),
    ],
)
def test_token_shapes_are_redacted(secret: str, kind: str) -> None:
    text = f"before {secret} after"
    out = redact(text)
    assert secret not in out
    assert out == f"before [redacted {kind}] after"


def test_aws_secret_assignment_keeps_the_name() -> None:
    value = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    out = redact(f"aws_secret_access_key = {value}\nnext")
    assert value not in out
    assert out == "aws_secret_access_key = [redacted aws secret]\nnext"


def test_aws_secret_assignment_in_upper_case_is_redacted() -> None:
    value = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    out = redact(f"AWS_SECRET_ACCESS_KEY={value}")
    assert out == "AWS_SECRET_ACCESS_KEY=[redacted aws secret]"


def test_near_misses_are_left_alone() -> None:
    text = "delivery for octo/hello#12: ghp_short, sk_not, eyJ alone, -----BEGIN nothing"
    assert redact(text) == text


def test_pem_cut_off_before_its_end_is_redacted_to_the_end() -> None:
    out = redact("key:\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC")
    assert out == "key:\n[redacted private key]"


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("ghp_short", id="short-gh-prefix"),
        pytest.param("the sk-learn package", id="sk-word"),
        pytest.param("eyJ alone", id="eyJ-word"),
        pytest.param("see https://github.com/o/r/pull/12", id="url"),
        pytest.param("a.b.c and 1.2.3", id="dotted"),
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) == text


def test_configured_secret_values_are_replaced_longest_first() -> None:
    redactor = Redactor(["hunter2-long-secret", "hunter2", "abc"])
    out = redactor("pw=hunter2-long-secret, short=hunter2, tiny=abc")
    assert out == "pw=[redacted secret], short=[redacted secret], tiny=abc"


def test_settings_secrets_and_webhook_rotation_list() -> None:
    settings = Settings(webhook_secret="first-secret,second-secret", llm_api_key="local-llm-key")
    redactor = Redactor(settings.secret_values())
    out = redactor("first-secret second-secret local-llm-key")
    assert out == "[redacted secret] [redacted secret] [redacted secret]"


def test_install_applies_to_log_lines() -> None:
    settings = Settings(webhook_secret="webhook-shh-123")
    install(settings)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(log.JsonFormatter())
    logger = logging.getLogger("test.redact")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("token %s and secret %s", GHP, "webhook-shh-123", extra={"tok": GHP})
    finally:
        logger.removeHandler(handler)
        log.set_redactor(Redactor())
    line = json.loads(stream.getvalue())
    assert GHP not in stream.getvalue()
    assert "webhook-shh-123" not in stream.getvalue()
    assert line["msg"] == "token [redacted github token] and secret [redacted secret]"
    assert line["tok"] == "[redacted github token]"
