"""The comment command grammar: `@<app-slug> <command> [args]` and optional `/<command>`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "COMMANDS",
    "HELP_TEXT",
    "UNKNOWN",
    "Command",
    "parse_command",
    "render_help",
    "strip_non_prose",
]

COMMANDS: Mapping[str, str] = {
    "review": "review this pull request and comment on problems",
    "fix": "make the change this issue or pull request asks for, on a new branch",
    "ask": "answer a question about the code, e.g. `ask where are tokens refreshed?`",
    "stop": "stop the run going on here",
    "status": "show the state of the runs here",
    "help": "show this list",
}
"""Every command a comment can give, with a one-line description for the help reply."""

UNKNOWN = "unknown"
"""`Command.name` for a word after a mention that is not a command."""

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_QUOTE = re.compile(r"^ {0,3}>")
_INDENTED = re.compile(r"^(?: {4}| {0,3}\t)")
_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_SLASH = re.compile(r"^ {0,3}/(?=[A-Za-z])", re.MULTILINE)
_SEPARATOR = re.compile(r"[ \t]*[:,]?[ \t]*")


@dataclass(frozen=True, slots=True)
class Command:
    """One command found in a comment.

    `name` is a key of COMMANDS or "unknown"; `args` is the text after the command word
    (for `ask`, the question); `raw` is the command word as written.
    """

    name: str
    args: str = ""
    raw: str = ""


def _blank(text: str) -> str:
    """Spaces in place of every character but newlines, so offsets stay put."""
    return re.sub(r"[^\n]", " ", text)


def _strip_blocks(body: str) -> str:
    """Blank out fenced and indented code blocks and quoted lines, line by line."""
    out: list[str] = []
    fence: str | None = None
    after_blank = True  # an indented code block starts only after a blank line
    in_indented = False
    for line in body.split("\n"):
        if fence is not None:
            stripped = line.strip()
            if stripped.startswith(fence) and set(stripped) == {fence[0]}:
                fence = None
            out.append(_blank(line))
            continue
        blank = not line.strip()
        opened = _FENCE.match(line)
        in_indented = not blank and bool(_INDENTED.match(line)) and (after_blank or in_indented)
        if opened:
            fence = opened.group(1)
        if opened or in_indented or _QUOTE.match(line):
            out.append(_blank(line))
        else:
            out.append(line)
        after_blank = blank
    return "\n".join(out)


def _strip_inline_code(text: str) -> str:
    """Blank out inline code spans: a run of N backticks up to the next run of exactly N."""
    pieces: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        start = text.find("`", i)
        if start < 0:
            pieces.append(text[i:])
            break
        pieces.append(text[i:start])
        end_run = start
        while end_run < n and text[end_run] == "`":
            end_run += 1
        ticks = text[start:end_run]
        close = _find_run(text, ticks, end_run)
        if close < 0:
            pieces.append(ticks)
            i = end_run
            continue
        pieces.append(_blank(text[start : close + len(ticks)]))
        i = close + len(ticks)
    return "".join(pieces)


def _find_run(text: str, ticks: str, start: int) -> int:
    """Offset of the next backtick run of exactly len(ticks) from `start`, or -1."""
    i = start
    while True:
        found = text.find(ticks, i)
        if found < 0:
            return -1
        end = found + len(ticks)
        if end < len(text) and text[end] == "`":
            while end < len(text) and text[end] == "`":
                end += 1
            i = end
            continue
        return found


def strip_non_prose(body: str) -> str:
    """The comment with code, quotes and HTML comments blanked, offsets unchanged.

    A mention inside a fenced or indented code block, an inline code span, a quoted line
    (`> `) or an HTML comment is not addressed to the app, so quoting an earlier command
    cannot repeat it.
    """
    text = body.replace("\r\n", "\n").replace("\r", "\n")
    text = _HTML_COMMENT.sub(lambda m: _blank(m.group(0)), text)
    return _strip_inline_code(_strip_blocks(text))


def _mention_pattern(app_slug: str) -> re.Pattern[str]:
    slug = re.escape(app_slug.strip().lstrip("@"))
    return re.compile(rf"(?<![A-Za-z0-9-])@{slug}(?:\[bot\])?(?![A-Za-z0-9-])", re.IGNORECASE)


def _line_end(text: str, start: int) -> int:
    end = text.find("\n", start)
    return len(text) if end < 0 else end


def _paragraph_end(prose: str, start: int) -> int:
    """Where the paragraph holding `start` ends: before a blank, code or quoted line."""
    end = _line_end(prose, start)
    while end < len(prose):
        following = _line_end(prose, end + 1)
        if not prose[end + 1 : following].strip():
            break
        end = following
    return end


def _args(body: str, prose: str, start: int, *, paragraph: bool, in_parens: bool) -> str:
    end = _paragraph_end(prose, start) if paragraph else _line_end(prose, start)
    # Offsets are shared, so slice the original: code quoted in a question is kept.
    # Hidden HTML comments are not: nobody reading the comment sees them.
    text = _HTML_COMMENT.sub("", body[start:end]).strip()
    if in_parens and text.endswith(")"):
        text = text[:-1].rstrip()
    return text if any(char.isalnum() for char in text) else ""


def _command_at(
    body: str, prose: str, start: int, *, slash: bool, in_parens: bool
) -> Command | None:
    word = _WORD.match(prose, start)
    if word is None:
        return None if slash else Command(name="help")
    raw = word.group(0)
    name = raw.lower()
    if name not in COMMANDS:
        return None if slash else Command(name=UNKNOWN, raw=raw)
    args = _args(body, prose, word.end(), paragraph=name == "ask", in_parens=in_parens)
    return Command(name=name, args=args, raw=raw)


def parse_command(body: str, *, app_slug: str, slash_commands: bool) -> Command | None:
    """The first command a comment gives the app, or None when it is not addressed to it.

    `@<app-slug> <command> [args]` counts anywhere a mention can stand: the mention must not
    touch a letter, digit or hyphen on either side, case does not matter, and `[bot]` may
    follow the slug. With `slash_commands`, `/<command>` at the start of a line counts too,
    but only for known commands (other tools use slash words as well). A bare mention asks
    for help; a mention followed by another word gives Command(name="unknown", raw=word).
    """
    normalized = body.replace("\r\n", "\n").replace("\r", "\n")
    prose = strip_non_prose(normalized)
    found: list[tuple[int, Command]] = []
    for mention in _mention_pattern(app_slug).finditer(prose):
        after = _SEPARATOR.match(prose, mention.end())
        start = after.end() if after else mention.end()
        in_parens = mention.start() > 0 and prose[mention.start() - 1] == "("
        command = _command_at(normalized, prose, start, slash=False, in_parens=in_parens)
        if command is not None:
            found.append((mention.start(), command))
            break
    if slash_commands:
        for slash in _SLASH.finditer(prose):
            command = _command_at(normalized, prose, slash.end(), slash=True, in_parens=False)
            if command is not None:
                found.append((slash.start(), command))
                break
    if not found:
        return None
    return min(found, key=lambda item: item[0])[1]


def render_help(app_slug: str, *, slash_commands: bool = False) -> str:
    """The help reply: every command with what it does, for this app's name."""
    lines = [f"Mention @{app_slug} with one of these commands:", ""]
    lines += [f"- `@{app_slug} {name}`: {text}" for name, text in COMMANDS.items()]
    if slash_commands:
        lines += ["", "This repository also accepts `/<command>` at the start of a line."]
    lines += ["", "Only people with write access to the repository can give commands."]
    return "\n".join(lines)


HELP_TEXT = render_help("<app>")
"""The help reply with a placeholder app name; use render_help for the real one."""
