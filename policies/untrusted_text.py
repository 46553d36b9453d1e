"""Text the app did not write, made safe to show on GitHub: the one path every renderer uses.

Paths, titles, branch names, commands, people's answers and everything a model returns are
data. Before any of it is rendered it passes through here:

- `code_span(text)` for names shown as code (paths, branches, commands): a CommonMark code
  span that holds exactly `text` (line ends read as spaces, as CommonMark reads them inside a
  span) whatever backticks or spaces it starts, ends or is made of, so nothing in the name
  can close the span and be read as Markdown;
- `untrusted(text)` for prose: every code fence in it made plain (no info string), so a
  ```` ```suggestion ```` block can only come from the app's own prover, then `defuse`;
- `defuse(text)` (also applied inside every code span): `<!--` can no longer open an HTML
  comment (which could hide the app's text, or imitate its markers), `@name` and
  `@org/team` notify nobody, and closing keywords (`Closes #3`, `fixes owner/repo#4`,
  `resolved https://...`) close nothing.

Defusing inserts a zero-width space (U+200B): a reader sees the text unchanged, GitHub no
longer matches it. It is applied without regard to Markdown structure on purpose: a piece
that looks like code on its own may not be code once it stands next to other text, so every
match is defused, in code too. Doing it twice changes nothing.

The app's own mentions (the reporter it addresses, commands it suggests) and its own `Fixes
#n` line are written around these pieces, never through them.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["ZWSP", "code_span", "defuse", "plain_fences", "untrusted"]

ZWSP = "\u200b"

# Character references that render as `@`: GitHub reads the rendered text. (One that renders
# as `#` after a keyword is caught by `_KEYWORD`, which accepts any `&` there.)
_AT_ENTITY = re.compile(r"&(?:#0*64|#[xX]0*40|commat);")
_COMMENT = re.compile(r"<!--")
# `@name` or `@org/team` wherever GitHub could link it: after anything but a letter, digit or
# underscore (after those it is part of an e-mail address or a word).
_MENTION = re.compile(r"(?<![A-Za-z0-9_])@(?=[A-Za-z0-9])")
# A closing keyword followed, after a few characters that are not letters or digits (spaces,
# a colon, an escape, emphasis), by an issue reference: `#n`, `owner/repo#n` or an address.
_KEYWORD = re.compile(
    r"(?<![A-Za-z0-9_])(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)(?![A-Za-z0-9_])"
    r"(?=[\W_]{0,16}?(?:[#&]|[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+#|https?:|www\.|github\.))",
    re.IGNORECASE,
)
# A line that could open a code fence inside any container: quote markers, list markers and
# indentation, then three or more backticks or tildes and the info string.
_FENCE = re.compile(
    r"^(?P<lead>[ \t>]*(?:(?:[-+*]|\d{1,9}[.)])[ \t]+[ \t>]*)*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$",
    re.MULTILINE,
)
_LINE_END = re.compile(r"\r\n|\r|\n")
_BACKTICKS = re.compile(r"`+")


def defuse(text: str) -> str:
    """`text` without hidden-comment openers, live mentions or closing keywords (see module)."""
    text = _AT_ENTITY.sub("@", text)
    text = _COMMENT.sub(f"<{ZWSP}!--", text)
    text = _MENTION.sub(f"@{ZWSP}", text)
    return _KEYWORD.sub(lambda m: f"{m.group()[0]}{ZWSP}{m.group()[1:]}", text)


def plain_fences(text: str) -> str:
    """`text` with the info string of every line that could open a code fence removed.

    A line of backticks whose info string holds a backtick opens no fence (it is inline
    code) and is left alone. Lines inside code blocks that look like fences lose their info
    too: cheaper than being wrong about where a block ends once the text is embedded."""

    def plain(match: re.Match[str]) -> str:
        fence, info = match.group("fence"), match.group("info")
        if not info.strip() or (fence[0] == "`" and "`" in info):
            return match.group()
        return f"{match.group('lead')}{fence}"

    return _FENCE.sub(plain, text)


def untrusted(text: str) -> str:
    """Prose the app did not write, ready to be rendered: plain fences, then `defuse`."""
    return defuse(plain_fences(text))


def _shown(char: str) -> str:
    """A character as a code span can hold it: controls (bar the tab) become `?`."""
    if char == "\t" or unicodedata.category(char) != "Cc":
        return char
    return "?"


def code_span(text: str) -> str:
    """`text` as one inline code span, defused, whatever backticks and spaces it holds.

    Line ends become spaces (CommonMark reads them so inside a span, and a line end could
    let the next line start a block). The fence is one backtick longer than the longest run
    inside; a space pads both ends when the text starts or ends with a backtick or a space,
    because CommonMark strips one space from each end when both ends have one. Text of
    spaces only is never stripped, so it goes unpadded; empty text is shown as one space."""
    flat = defuse("".join(_shown(c) for c in _LINE_END.sub(" ", text))) or " "
    longest = max((len(run) for run in _BACKTICKS.findall(flat)), default=0)
    ticks = "`" * (longest + 1)
    edges = flat[0] + flat[-1]
    pad = " " if flat.strip(" ") and ("`" in edges or " " in edges) else ""
    return f"{ticks}{pad}{flat}{pad}{ticks}"
