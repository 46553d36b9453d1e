"""Secret redaction for everything the app posts to GitHub or writes to its logs.

Two kinds of secret are removed:

- well-known token shapes, whoever they belong to: GitHub tokens (`ghp_`, `gho_`, `ghs_`, `ghu_`,
  `ghr_`, `github_pat_`), `sk-` style model API keys (`sk-`, `sk-ant-`, `sk-proj-`), JSON Web
  Tokens (three base64url segments starting `eyJ`), PEM blocks (also a BEGIN line whose END was
  cut off), AWS access key ids and `aws_secret_access_key` assignments;
- the literal values of this deployment's configured secrets (`Settings.secret_values()`).

Each match becomes `[redacted <kind>]`, so a reader still sees that something was there.
`install(settings)` puts one `Redactor` into the log formatter at start-up.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from bot import log

if TYPE_CHECKING:
    from bot.settings import Settings

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]{0,40}-----.*?(?:-----END [A-Z0-9 ]{0,40}-----|\Z)", re.DOTALL
        ),
    ),
    ("github token", re.compile(r"(?<![A-Za-z0-9])github_pat_[A-Za-z0-9_]{20,}")),
    ("github token", re.compile(r"(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{20,}")),
    ("api key", re.compile(r"(?<![A-Za-z0-9])sk-(?:ant-|proj-)?[A-Za-z0-9][A-Za-z0-9_-]{19,}")),
    (
        "jwt",
        re.compile(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"),
    ),
    (
        "aws key",
        re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|AIPA)[A-Z0-9]{16}(?![A-Z0-9])"),
    ),
    (
        "aws secret",
        re.compile(
            r"(?i)(aws_secret_access_key\s*[:=]\s*[\"']?)[A-Za-z0-9/+=]{40}(?![A-Za-z0-9/+=])"
        ),
    ),
)

# Something every match of `_PATTERNS` contains: one search for these decides whether the
# patterns need to run at all, which keeps redaction cheap on the common, clean text (every
# log line passes through here).
_SHAPE_HINTS = (
    r"-----BEGIN |github_pat_|gh[pousr]_[A-Za-z0-9]{20}|sk-|eyJ"
    r"|(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|AIPA)[A-Z0-9]{16}|(?i:aws_secret_access_key)"
)

MIN_SECRET_LENGTH = 6


class Redactor:
    """A str -> str function removing token shapes and the given literal secret values."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        values = {s for s in secrets if len(s.strip()) >= MIN_SECRET_LENGTH}
        # Longest first, so a secret that contains another is replaced whole.
        ordered = sorted(values, key=len, reverse=True)
        literals = "|".join(re.escape(v) for v in ordered)
        self._literal = re.compile(literals) if ordered else None
        self._hint = re.compile(f"{literals}|{_SHAPE_HINTS}" if ordered else _SHAPE_HINTS)

    def __call__(self, text: str) -> str:
        if not text or self._hint.search(text) is None:
            return text
        if self._literal is not None:
            text = self._literal.sub("[redacted secret]", text)
        for kind, pattern in _PATTERNS:
            if kind == "aws secret":
                text = pattern.sub(r"\1[redacted aws secret]", text)
            else:
                text = pattern.sub(f"[redacted {kind}]", text)
        return text


_DEFAULT = Redactor()


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """Redact well-known token shapes and, if given, these literal secret values."""
    return (Redactor(secrets) if secrets else _DEFAULT)(text)


def install(settings: Settings) -> Redactor:
    """Build the deployment's redactor and apply it to every log line from now on."""
    redactor = Redactor(settings.secret_values())
    log.set_redactor(redactor)
    return redactor
