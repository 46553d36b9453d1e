"""The comment command grammar: `@<app-slug> <command> [args]` and optional `/<command>`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from policies._markdown import Prose, normalize, prose

__all__ = [
    "COMMANDS",
    "HELP_TEXT",
    "UNKNOWN",
    "Command",
    "parse_command",
    "parse_forget",
    "render_help",
    "strip_non_prose",
]

COMMANDS: Mapping[str, str] = {
    "review": "review this pull request and comment on problems",
    "fix": "make the change this issue or pull request asks for, on a new branch",
    "ask": "answer a question about the code, e.g. `ask where are tokens refreshed?`",
    "decide": 'answer the question a run stopped on: `decide 2` for option 2, or `decide "..."`',
    "pause": "stop reviewing this pull request automatically on pushes",
    "resume": "review this pull request on pushes again",
    "stop": "stop the run going on here",
    "status": "show the state of the runs here",
    "help": "show this list",
    "learn": "keep a point for this repository's future reviews: `learn <text>`",
    "learnings": "list what the reviews of this repository have learned, with numbers",
    "forget": "remove a learning: `forget 3`",
}
"""Every command a comment can give, with a one-line description for the help reply."""

UNKNOWN = "unknown"
"""`Command.name` for a word after a mention that is not a command."""

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_SLASH = re.compile(r"^ {0,3}/(?=[A-Za-z])", re.MULTILINE)
_SEPARATOR = re.compile(r"[ \t]*[:,]?[ \t]*")
_FORGET = re.compile(r"^#?(\d{1,9})$")


@dataclass(frozen=True, slots=True)
class Command:
    """One command found in a comment.

    `name` is a key of COMMANDS or "unknown"; `args` is the text after the command word
    (for `ask`, the question; for `decide`, the answer); `raw` is the command word as written.
    """

    name: str
    args: str = ""
    raw: str = ""


def strip_non_prose(body: str) -> str:
    """The comment with everything GitHub does not show as its own prose blanked.

    Line ends are normalized to `\\n`; other offsets are unchanged. A mention in a block quote
    (lazy continuation lines included), code, raw HTML, an HTML comment, `<details>` or
    `<blockquote>` is not addressed to the app, so quoting an earlier command cannot repeat
    it. `policies/_markdown.py` says exactly what counts.
    """
    return prose(normalize(body)).text


def _slug_pattern(app_slug: str) -> re.Pattern[str]:
    """`@<app-slug>` alone, in any case."""
    return re.compile("@" + re.escape(app_slug.strip().lstrip("@")), re.IGNORECASE)


def _mention_pattern(app_slug: str) -> re.Pattern[str]:
    slug = _slug_pattern(app_slug).pattern
    return re.compile(rf"(?<![A-Za-z0-9-]){slug}(?:\[bot\])?(?![A-Za-z0-9-])", re.IGNORECASE)


def _args(
    body: str, text: Prose, start: int, block: int, *, paragraph: bool, in_parens: bool
) -> str:
    """The text from `start` to the end of its line, or for `paragraph` of its paragraph.

    `block` is an offset of prose in the same paragraph or heading as `start`.
    """
    end = text.block_end(block)
    if not paragraph:
        line_end = body.find("\n", start)
        end = end if line_end < 0 else min(end, line_end)
    # Offsets are shared, so slice the original: code quoted in a question is kept.
    # Hidden HTML comments are not: nobody reading the comment sees them.
    args = _HTML_COMMENT.sub("", body[start:end]).strip()
    if in_parens and args.endswith(")"):
        args = args[:-1].rstrip()
    return args if any(char.isalnum() for char in args) else ""


def _command_at(body: str, text: Prose, start: int, block: int, *, in_parens: bool) -> Command:
    """The command whose word is at `start`: help when there is no word, unknown when it is
    not a command."""
    word = _WORD.match(text.text, start)
    if word is None:
        return Command(name="help")
    raw = word.group(0)
    name = raw.lower()
    if name not in COMMANDS:
        return Command(name=UNKNOWN, raw=raw)
    paragraph = name in ("ask", "learn")
    args = _args(body, text, word.end(), block, paragraph=paragraph, in_parens=in_parens)
    return Command(name=name, args=args, raw=raw)


def parse_command(body: str, *, app_slug: str, slash_commands: bool) -> Command | None:
    """The first command a comment gives the app, or None when it is not addressed to it.

    `@<app-slug> <command> [args]` counts anywhere a mention can stand: the mention must not
    touch a letter, digit or hyphen on either side, case does not matter, and `[bot]` may
    follow the slug. With `slash_commands`, `/<command>` at the start of a line counts too,
    but only for known commands (other tools use slash words as well). A bare mention asks
    for help; a mention followed by another word gives Command(name="unknown", raw=word).
    """
    normalized = normalize(body)
    # Parsing is linear but not cheap: most comments mention neither the app nor a slash
    # command, and a mention in the prose is one in the source at the same offset.
    mentioned = _slug_pattern(app_slug).search(normalized)
    if not mentioned and not (slash_commands and _SLASH.search(normalized)):
        return None
    text = prose(normalized)
    found: list[tuple[int, Command]] = []
    mention = _mention_pattern(app_slug).search(text.text)
    if mention is not None:
        after = _SEPARATOR.match(text.text, mention.end())
        start = after.end() if after else mention.end()
        in_parens = mention.start() > 0 and text.text[mention.start() - 1] == "("
        command = _command_at(normalized, text, start, mention.start(), in_parens=in_parens)
        found.append((mention.start(), command))
    if slash_commands:
        # Only a slash that starts its source line counts: not one after a list marker.
        for slash in _SLASH.finditer(normalized):
            at = slash.end() - 1
            if text.text[at] != "/":
                continue
            command = _command_at(normalized, text, slash.end(), at, in_parens=False)
            # Other tools use slash words as well: only known commands count.
            if command.name != UNKNOWN:
                found.append((slash.start(), command))
                break
    if not found:
        return None
    return min(found, key=lambda item: item[0])[1]


def parse_forget(args: str) -> int | None:
    """The learning's number in `forget <n>` (`3` or `#3`), or None."""
    match = _FORGET.match(args.strip())
    return int(match.group(1)) if match else None


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
