"""Property test for bot/redact.py: a secret in disguise, in any surrounding text, does not survive.

The secrets: GitHub tokens of every kind (`ghp_`, `gho_`, `ghu_`, `ghs_` with 36 characters
after the prefix, `ghr_` with 76, `github_pat_` with 22 + 59), the deployment's webhook secrets
(a rotation list of two), its model API key, and its App private key (a real 2048-bit RSA key,
made once). Each is disguised by a chain of optional steps, in this order: the prefix in upper
case (tokens); the PEM without its BEGIN and END lines (the key); split by line breaks (with
indentation), by invisible characters, or spaced out one character at a time; then wrapped in
a code fence, a JSON string (with or without `\\uXXXX` escapes) and URL encoding, each optional.
The result sits between two random texts.

"Nothing recognizable survives", precisely: undo every disguise the redactor claims to see
through (URL-decode, decode JSON escapes, drop whitespace and invisible characters) on the
redacted text; the result holds no 8 consecutive characters of the secret's body (a token after
its prefix, a webhook secret or API key whole, the key's base64 body with its lines joined).
Redacting more than the secret is not a failure. Out of scope, as bot/redact.py says: a secret
encoded or reversed as a whole.
"""

from __future__ import annotations

import json
import random
import re
import string
import unicodedata
from dataclasses import dataclass
from urllib.parse import quote, unquote

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.redact import Redactor
from bot.settings import Settings

_KEY = (
    rsa.generate_private_key(public_exponent=65537, key_size=2048)
    .private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    .decode()
)
_KEY_BODY = "".join(line for line in _KEY.splitlines() if not line.startswith("-----"))
_ALNUM = string.ascii_letters + string.digits
_INVISIBLE = "\u200b\u200c\u200d\u200e\u200f\u202a\u202e\u2060\u2062\u2063\ufeff\u00ad\u2066"
_AROUND = string.ascii_letters + string.digits + " \n\t.,:;!?-_/()[]{}'\"`#*<>=+@%\\éü€✓🙂"


@dataclass(frozen=True)
class Secret:
    text: str  # as written
    body: str  # what must not survive
    token: bool  # a GitHub token (has a prefix that may be upper-cased)
    key: bool


def _random(seed: int, alphabet: str, size: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(size))


@st.composite
def deployment(draw: st.DrawFn) -> tuple[Redactor, list[Secret]]:
    """A redactor built from settings like an operator's, and the secrets it must know."""
    seed = draw(st.integers(0, 2**32))
    webhook = [_random(seed + n, _ALNUM + "-", draw(st.integers(16, 40))) for n in (1, 2)]
    api_key = "sk-local-" + _random(seed + 3, _ALNUM, 32)
    configured = Settings(
        webhook_secret=f" {webhook[0]} ,{webhook[1]}", llm_api_key=api_key, private_key=_KEY
    )
    secrets = [Secret(w, w, False, False) for w in webhook]
    secrets += [Secret(api_key, api_key, False, False), Secret(_KEY, _KEY_BODY, False, True)]
    for prefix, size in (("ghp_", 36), ("gho_", 36), ("ghu_", 36), ("ghs_", 36), ("ghr_", 76)):
        body = _random(seed + size + ord(prefix[2]), _ALNUM, size)
        secrets.append(Secret(prefix + body, body, True, False))
    pat = _random(seed + 7, _ALNUM, 22) + "_" + _random(seed + 8, _ALNUM, 59)
    secrets.append(Secret("github_pat_" + pat, pat, True, False))
    return Redactor(configured.secret_values()), secrets


@st.composite
def disguised(draw: st.DrawFn, secret: Secret) -> str:
    text = secret.text
    if secret.token and draw(st.booleans()):
        prefix = text.index("_", 3 if text.startswith("gh") else 0) + 1
        text = text[:prefix].upper() + text[prefix:]
    if secret.key and draw(st.booleans()):
        text = "\n".join(line for line in text.strip().splitlines() if "-----" not in line)
    split = draw(st.sampled_from(["none", "newlines", "invisible", "spaced"]))
    if split == "spaced":
        text = " ".join(text)
    elif split != "none":
        cuts = sorted(draw(st.lists(st.integers(1, len(text) - 1), min_size=1, max_size=12)))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        if split == "newlines":
            joints = [
                "\n" + " " * draw(st.integers(0, 4)) for _ in range(len(pieces) - 1)
            ]  # a wrapped line, perhaps indented
        else:
            joints = [
                "".join(draw(st.lists(st.sampled_from(_INVISIBLE), min_size=1, max_size=3)))
                for _ in range(len(pieces) - 1)
            ]
        text = pieces[0] + "".join(j + p for j, p in zip(joints, pieces[1:], strict=True))
    if draw(st.booleans()):
        text = f"```\n{text}\n```"
    if draw(st.booleans()):
        text = json.dumps({"value": text}, ensure_ascii=draw(st.booleans()))
    if draw(st.booleans()):
        text = quote(text, safe="")
    return text


def _undone(text: str) -> str:
    """The redacted text with every disguise the redactor sees through undone."""
    text = unquote(text)
    text = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)
    text = re.sub(r"\\[nrt]", " ", text).replace("\\/", "/")
    return "".join(
        c for c in text if not c.isspace() and unicodedata.category(c) not in ("Cf", "Cc")
    )


def _survivors(body: str, text: str) -> list[str]:
    return [body[i : i + 8] for i in range(len(body) - 7) if body[i : i + 8] in text]


@settings(max_examples=300, deadline=None)
@given(data=st.data(), setup=deployment())
def test_no_disguised_secret_survives(
    data: st.DataObject, setup: tuple[Redactor, list[Secret]]
) -> None:
    redactor, secrets = setup
    secret = data.draw(st.sampled_from(secrets), label="secret")
    before = data.draw(st.text(_AROUND, max_size=40), label="before")
    after = data.draw(st.text(_AROUND, max_size=40), label="after")
    text = before + data.draw(disguised(secret), label="disguised") + after
    out = redactor(text)
    assert _survivors(secret.body, _undone(out)) == []


@settings(max_examples=100, deadline=None)
@given(setup=deployment(), data=st.data())
def test_several_secrets_in_one_text_all_go(
    setup: tuple[Redactor, list[Secret]], data: st.DataObject
) -> None:
    redactor, secrets = setup
    chosen = data.draw(st.lists(st.sampled_from(secrets), min_size=2, max_size=4), label="secrets")
    parts = [data.draw(disguised(s), label="disguised") for s in chosen]
    out = _undone(redactor(" and ".join(parts)))
    for secret in chosen:
        assert _survivors(secret.body, out) == []
