"""Secret redaction for everything the app posts to GitHub or writes to its logs.

Two kinds of secret are removed:

- well-known token shapes, whoever they belong to: GitHub tokens (`ghp_`, `gho_`, `ghs_`, `ghu_`,
  `ghr_`, `github_pat_`, in any letter case), `sk-` style model API keys (`sk-`, `sk-ant-`,
  `sk-proj-`), JSON Web Tokens (three base64url segments starting `eyJ`), PEM blocks (also a
  BEGIN line whose END was cut off), AWS access key ids and `aws_secret_access_key` assignments;
- the literal values of this deployment's configured secrets (`Settings.secret_values()`: the
  webhook secrets, each one of a rotation list, the model API keys, and the App's private key
  however it was loaded). A private key also counts line by line: each line of its base64 body
  (eight characters or more) and the whole body joined, so a PEM without its BEGIN line, or a
  few lines of it, is caught.

Each match becomes `[redacted <kind>]`, so a reader still sees that something was there.

Disguises. The configured values, PEM blocks, GitHub tokens of their documented lengths (36
characters after a `gh?_` prefix, 76 after `ghr_`, 22 + 59 after `github_pat_`) and AWS key ids
are also found when the text hides them: split by line breaks or spaces (down to one character
at a time), with invisible characters in between (zero-width, bidi controls, soft hyphens, other
format and control characters), inside JSON strings (escaped `\\n`, `\\t`, `\\uXXXX`), with
Markdown's backslash escapes (`ghp\\_...`, which GitHub shows as `ghp_...`), or URL-encoded
(`%0A`, `%2B`...). Matching runs on a view of the text without those; the span of
the original text that the match came from is replaced whole, and the invisible characters
elsewhere stay as they were (a zero-width space that defuses a mention is one of them). What is
out of scope: a secret encoded as a whole (base64 of a token, hex, rot13), reversed, reordered
or cut into pieces spread apart; `sk-` keys and JWTs of other parties in disguise (they have no
fixed length to stop at); and a token body shorter than 20 characters.

Cost. Nearly every log line is clean, so a cheap gate runs first: the text without whitespace,
lowercased, is searched once for the prefixes above, and the configured values (the joined key
body aside: its lines stand for it) are looked up in it with `in`. Only a hit pays for the
patterns, and only a configured value or a shape of fixed length pays for the view.

`install(settings)` puts one `Redactor` into the log formatter at start-up.
"""

from __future__ import annotations

import codecs
import re
import urllib.parse
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
    ("github token", re.compile(r"(?<![A-Za-z0-9])(?i:github_pat_)[A-Za-z0-9_]{20,}")),
    ("github token", re.compile(r"(?<![A-Za-z0-9])(?i:gh[pousr]_)[A-Za-z0-9]{20,}")),
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

# The shapes that have a fixed length, as they look in the view (no whitespace, nothing hidden).
_VIEW_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private key",
        re.compile(
            r"(?i)-----BEGIN[A-Z0-9]{0,40}-----.*?(?:-----END[A-Z0-9]{0,40}-----|\Z)", re.DOTALL
        ),
    ),
    ("github token", re.compile(r"(?i:github_pat_)[A-Za-z0-9]{22}_[A-Za-z0-9]{59}")),
    ("github token", re.compile(r"(?i:ghr_)[A-Za-z0-9]{76}|(?i:gh[pousr]_)[A-Za-z0-9]{36}")),
    ("aws key", re.compile(r"(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|AIPA)[A-Z0-9]{16}")),
)

# Something every match contains, lowercased and without whitespace: of the view's patterns (or a
# configured value) and of the other patterns, which look at the text as it is.
_VIEW_GATE = re.compile(
    r"-----begin|github_pat_|gh[pousr]_|(?:akia|asia|agpa|aida|aroa|anpa|aipa)[a-z0-9]{16}"
)
_GATE = re.compile(f"{_VIEW_GATE.pattern}|sk-|eyj|aws_secret_access_key")

# Invisible characters: Unicode format characters (Cf), control characters, variation selectors
# and the few letters that render as nothing (fillers, the combining grapheme joiner).
_INVISIBLE = (
    "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u034f\u061c\u0600-\u0605\u06dd\u070f"
    "\u0890\u0891\u08e2\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f\U000e0100-\U000e01ef"
)
_INVISIBLE_CHAR = re.compile(f"[{_INVISIBLE}]")
_INVISIBLE_RUN = re.compile(f"[{_INVISIBLE}]+")
# What the view leaves out or decodes, after URL decoding: whitespace, invisible characters and
# JSON escapes.
_PERCENT = re.compile(r"(?:%[0-9A-Fa-f]{2})+")
_VIEW_UNIT = re.compile(rf"[\s{_INVISIBLE}]+|\\[nrt]|\\[\\/\"_-]|\\u[0-9A-Fa-f]{{4}}")

MIN_SECRET_LENGTH = 6
MIN_KEY_LINE = 8


def _key_literals(pem: str) -> list[str]:
    """A PEM's whole text, each base64 body line, and the body joined."""
    lines = [line.strip() for line in re.split(r"\r?\n|\\n", pem)]
    body = [line for line in lines if line and not line.startswith("-----") and ":" not in line]
    return [pem.strip(), *(line for line in body if len(line) >= MIN_KEY_LINE), "".join(body)]


def _expand(secrets: Iterable[str]) -> set[str]:
    values: set[str] = set()
    for secret in secrets:
        if "-----BEGIN" in secret:
            values.update(_key_literals(secret))
        elif len(secret.strip()) >= MIN_SECRET_LENGTH:
            values.add(secret)
    return {v for v in values if len(v.strip()) >= MIN_SECRET_LENGTH}


def _unescaped(unit: str) -> str:
    """What a whitespace, invisible or JSON-escape unit leaves in the view."""
    if unit[:1] == "\\" and unit[1:] in ("/", "\\", '"', "_", "-"):
        return unit[1:]
    if unit.startswith("\\u"):
        char = chr(int(unit[2:], 16))
        return "" if char.isspace() or _INVISIBLE_CHAR.match(char) else unit
    return ""


class _View:
    """`text` URL-decoded, without whitespace, invisible characters and JSON escapes; each
    character of it knows the span of `text` it came from."""

    def __init__(self, text: str) -> None:
        decoded, begins, ends = self._decode(text)
        chars: list[str] = []
        self.begins: list[int] = []
        self.ends: list[int] = []
        at = 0
        for unit in _VIEW_UNIT.finditer(decoded):
            self._copy(decoded[at : unit.start()], at, begins, ends, chars)
            kept = _unescaped(unit.group())
            if kept:
                chars.append(kept)
                # an escape kept as it is, or `\/`: one view character per unit character
                for offset in range(len(kept)):
                    index = unit.start() + (offset if len(kept) > 1 else 0)
                    self.begins.append(begins[index])
                    self.ends.append(ends[unit.end() - 1] if len(kept) == 1 else ends[index])
            at = unit.end()
        self._copy(decoded[at:], at, begins, ends, chars)
        self.value = "".join(chars)

    def _copy(
        self, piece: str, at: int, begins: list[int], ends: list[int], chars: list[str]
    ) -> None:
        chars.append(piece)
        self.begins.extend(begins[at : at + len(piece)])
        self.ends.extend(ends[at : at + len(piece)])

    @staticmethod
    def _decode(text: str) -> tuple[str, list[int], list[int]]:
        """`text` with its %XX runs decoded (UTF-8), and each character's span in `text`."""
        if "%" not in text:
            return text, list(range(len(text))), list(range(1, len(text) + 1))
        chars: list[str] = []
        begins: list[int] = []
        ends: list[int] = []
        at = 0
        for run in _PERCENT.finditer(text):
            chars.append(text[at : run.start()])
            begins.extend(range(at, run.start()))
            ends.extend(range(at + 1, run.start() + 1))
            decoder = codecs.getincrementaldecoder("utf-8")("replace")
            start = run.start()
            for index in range(run.start(), run.end(), 3):
                for char in decoder.decode(bytes([int(text[index + 1 : index + 3], 16)])):
                    chars.append(char)
                    begins.append(start)
                    ends.append(index + 3)
                    start = index + 3
            for char in decoder.decode(b"", final=True):
                chars.append(char)
                begins.append(start)
                ends.append(run.end())
            at = run.end()
        chars.append(text[at:])
        begins.extend(range(at, len(text)))
        ends.extend(range(at + 1, len(text) + 1))
        return "".join(chars), begins, ends

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The text's span from which the view's `[start, end)` came."""
        return self.begins[start], self.ends[end - 1]


def _compact(text: str) -> str:
    """The view's text, without the spans (cheaper)."""
    if "%" not in text and "\\" not in text:
        if not text.isascii():
            text = _INVISIBLE_RUN.sub("", text)
        return "".join(text.split())
    if "%" in text:
        text = urllib.parse.unquote(text, errors="replace")
    return _VIEW_UNIT.sub(lambda unit: _unescaped(unit.group()), text)


class Redactor:
    """A str -> str function removing token shapes and the given literal secret values."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        values = _expand(secrets)
        # Longest first, so a secret that contains another is replaced whole.
        # As the view shows them: whitespace gone, and the view's reading of any backslash in
        # them (a secret written as it is) or not (a secret inside a JSON string, decoded).
        variants = {"".join(v.split()) for v in values} | {_compact(v) for v in values}
        ordered = sorted(variants, key=len, reverse=True)
        self._literal = re.compile("|".join(map(re.escape, ordered))) if ordered else None
        # For the gate: the joined key body is redundant with its lines.
        self._probes = [v for v in ordered if len(v) <= 1024]

    def __call__(self, text: str) -> str:
        if not text:
            return text
        compact = _compact(text)
        lower = compact.lower()
        in_view = any(map(compact.__contains__, self._probes))
        if not in_view:
            if _GATE.search(lower) is None:
                return text  # the common case: clean
            in_view = _VIEW_GATE.search(lower) is not None
        if in_view:
            # The view first: a token cut by a line break must go whole, not its first line.
            text = self._in_view(text)
        for kind, pattern in _PATTERNS:
            if kind == "aws secret":
                text = pattern.sub(r"\1[redacted aws secret]", text)
            else:
                text = pattern.sub(f"[redacted {kind}]", text)
        return text

    def _in_view(self, text: str) -> str:
        """Replace what the view of `text` shows: disguised secrets (see the module)."""
        view = _View(text)
        found: list[tuple[int, int, str]] = []
        if self._literal is not None:
            found += [(m.start(), m.end(), "secret") for m in self._literal.finditer(view.value)]
        for kind, pattern in _VIEW_PATTERNS:
            found += [(m.start(), m.end(), kind) for m in pattern.finditer(view.value)]
        if not found:
            return text
        spans: list[tuple[int, int, str]] = []
        for start, end, kind in sorted(found):
            if start == end:
                continue
            begin, stop = view.span(start, end)
            if kind == "github token":  # as greedy as the plain pattern when it goes on unbroken
                while stop < len(text) and text[stop].isascii() and text[stop].isalnum():
                    stop += 1
            if spans and begin < spans[-1][1]:
                last = spans[-1]
                spans[-1] = (last[0], max(last[1], stop), last[2])
            else:
                spans.append((begin, stop, kind))
        out = []
        at = 0
        for begin, stop, kind in spans:
            out.append(text[at:begin])
            out.append(f"[redacted {kind}]")
            at = stop
        out.append(text[at:])
        return "".join(out)


_DEFAULT = Redactor()


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """Redact well-known token shapes and, if given, these literal secret values."""
    return (Redactor(secrets) if secrets else _DEFAULT)(text)


def install(settings: Settings) -> Redactor:
    """Build the deployment's redactor and apply it to every log line from now on."""
    redactor = Redactor(settings.secret_values())
    log.set_redactor(redactor)
    return redactor
