"""Strip terminal control sequences and invisible format characters from model-authored text."""

from __future__ import annotations

import re
import unicodedata

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), DCS/PM/APC/SOS strings, other 2-byte escapes.
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[ -/]*[0-~]?"
    r"|\x9b[0-?]*[ -/]*[@-~]"
)
_ASCII_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_DROP_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})


def strip_terminal(text: str) -> str:
    """Remove what could repaint a terminal or hide text; keep newlines and tabs.

    Escape sequences (CSI, OSC, DCS, ...) go whole; carriage returns and line/paragraph
    separators become newlines; other control characters and invisible format characters
    (Unicode Cc, Cf such as zero-width and bidi overrides, surrogates, private use,
    unassigned) are dropped.
    """
    if not text:
        return text
    text = _ESCAPES.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    if text.isascii():
        return _ASCII_CONTROLS.sub("", text)
    out: list[str] = []
    for ch in text:
        if ch.isascii():
            if ch in "\n\t" or not _ASCII_CONTROLS.match(ch):
                out.append(ch)
            continue
        if ch in "\u2028\u2029":
            out.append("\n")
            continue
        if unicodedata.category(ch) in _DROP_CATEGORIES:
            continue
        out.append(ch)
    return "".join(out)
