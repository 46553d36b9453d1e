"""Tests for bot/redact.py: token shapes, configured secrets, and the log hook."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

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


def _key_pem() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()


def _body_lines(pem: str) -> list[str]:
    return [line for line in pem.strip().splitlines() if not line.startswith("-----")]


def test_the_key_read_from_bot_private_key_path_is_a_literal_secret(tmp_path: Path) -> None:
    pem = _key_pem()
    path = tmp_path / "app.pem"
    path.write_text(pem)
    redactor = install(Settings(private_key_path=path))
    log.set_redactor(Redactor())
    lines = _body_lines(pem)
    headless = "\n".join(lines)  # the PEM body without its BEGIN and END lines
    out = redactor(f"dump:\n{headless}\nend")
    assert all(line not in out for line in lines)
    assert out.startswith("dump:\n") and out.endswith("\nend")
    one = redactor(f"line {lines[3]} alone")
    assert lines[3] not in one


def test_the_key_given_in_bot_private_key_is_redacted_line_by_line() -> None:
    pem = _key_pem()
    redactor = Redactor(Settings(private_key=pem).secret_values())
    lines = _body_lines(pem)
    out = redactor(json.dumps({"key": "\n".join(lines[2:9])}))
    assert all(line not in out for line in lines)


@pytest.mark.parametrize(
    "disguise",
    [
        pytest.param(lambda t: "\u200b".join(t), id="zero-width-between-every-character"),
        pytest.param(lambda t: t[:10] + "\u2063" + t[10:25] + "\u00ad" + t[25:], id="invisible"),
        pytest.param(lambda t: t[:4].upper() + t[4:], id="upper-case-prefix"),
        pytest.param(lambda t: " ".join(t), id="spaced-out"),
        pytest.param(lambda t: t[:12] + "\n" + t[12:30] + "\n  " + t[30:], id="newlines"),
        pytest.param(lambda t: json.dumps(t[:15] + "\n" + t[15:]), id="json-escaped-newline"),
        pytest.param(lambda t: json.dumps("\u200d".join(t)), id="json-escaped-zero-width"),
    ],
)
def test_a_disguised_github_token_is_redacted(disguise: Callable[[str], str]) -> None:
    token = "ghs_" + "Q7rX2mK9pL4vN8wB3zT6yH1cF5dJ0sGa"[:32] + "e1R4"
    out = redact(f"before {disguise(token)} after")
    flat = "".join(c for c in re.sub(r"\\u[0-9a-f]{4}|\\n", "", out) if c.isalnum())
    assert token[4:] not in flat
    assert all(token[i : i + 8] not in flat for i in range(4, len(token) - 8))
    assert out.startswith("before ") and out.endswith(" after")


def test_webhook_secrets_are_redacted_however_they_are_split() -> None:
    settings = Settings(webhook_secret=" first-secret-value , second-secret-value ")
    redactor = Redactor(settings.secret_values())
    out = redactor("a first-secret-\nvalue b s e c o n d - s e c r e t - v a l u e c")
    assert "first" not in out and "s e c o n d" not in out
    assert out.startswith("a ") and out.endswith(" c")


def test_a_url_encoded_pem_is_redacted() -> None:
    pem = _key_pem()
    out = redact("key=" + quote(pem, safe="") + "&next=1")
    assert "MII" not in out
    assert out.startswith("key=[redacted private key]") and out.endswith("&next=1")


def test_invisible_characters_outside_secrets_are_kept() -> None:
    text = "ping @\u200bocto about the 👨\u200d👩\u200d👧 emoji"
    assert redact(text) == text


def test_every_format_character_counts_as_invisible() -> None:
    import sys
    import unicodedata

    from bot.redact import _INVISIBLE_CHAR

    missing = [
        hex(code)
        for code in range(sys.maxunicode + 1)
        if unicodedata.category(chr(code)) in ("Cf", "Cc")
        and not chr(code).isspace()
        and _INVISIBLE_CHAR.match(chr(code)) is None
    ]
    assert missing == []


def test_a_token_behind_markdown_backslash_escapes_is_redacted() -> None:
    # GitHub shows `ghp\_...` as `ghp_...`: the escape hides nothing from a reader.
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    escaped = token.replace("_", "\\_")
    out = redact(f"key {escaped} and more")
    assert "A1b2C3d4" not in out and out == "key [redacted github token] and more"
    pat = "github_pat_" + "A" * 22 + "_" + "b" * 59
    assert "AAAA" not in redact("x " + pat.replace("_", "\\_") + " y")


def test_a_model_summary_with_raw_html_cannot_smuggle_a_token_through_the_comment() -> None:
    from bot.publish.render import render_outcome
    from policies.outcome_json import outcome_from_json

    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    outcome = outcome_from_json(
        {
            "run_id": "wf_000000000001",
            "workflow": "triage",
            "status": "succeeded",
            "summary": f"<script>alert(1)</script> key {token}",
        }
    )
    assert "A1b2C3d4" not in redact(render_outcome(outcome))
