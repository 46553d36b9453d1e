"""Which characters of a comment GitHub shows as prose, found with a CommonMark parser.

A command counts only where a reader sees it as the comment's own words. So everything in a
block quote (lazy continuation lines included), code (fenced, indented, inline spans), raw
HTML, image alt text, a link's destination and title, and any text inside an HTML comment or
one of the elements in `HIDING_ELEMENTS` is blanked. Raw HTML is tracked across blocks, the
way a browser reads the rendered page: `<details>` on one line and `</details>` three
paragraphs later hide the paragraphs between them; an element opened inside a quote or a list
item ends with it, and a closing tag there does not close an element opened outside. Two
choices fail closed: text written inside an HTML block never counts, though GitHub shows some
of it, and `<details open>` hides like any other `<details>`.

Everything here is linear in the size of the comment; the parser's own inline rules bail out
early on unterminated openers.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token

from policies._markdown_spans import Note, recording, wrap_inline_rules

__all__ = ["HIDING_ELEMENTS", "Prose", "normalize", "prose"]

HIDING_ELEMENTS = frozenset(
    {
        # quoted or collapsed
        "blockquote",
        "q",
        "details",
        # code
        "pre",
        "code",
        "tt",
        "kbd",
        "samp",
        "var",
        # never shown
        "script",
        "style",
        "template",
        "textarea",
    }
)
"""HTML elements whose content is not the comment's own prose."""

_MARKUP = re.compile(r"<!--(-?>)?|<(/?)([A-Za-z][A-Za-z0-9-]*)(?=[\s/>]|\Z)")
"""A comment opener (group 1 when it closes at once, `<!-->`) or the start of a tag."""
_COMMENT_END = re.compile(r"--!?>")
_SPANS = "commands.hidden_spans"
"""The key in the inline parser's env under which the recording rules keep what they hid."""


def normalize(body: str) -> str:
    """Line ends as `\\n` and NUL as U+FFFD, as the parser reads them; the length only shrinks
    by one per `\\r\\n`."""
    return body.replace("\r\n", "\n").replace("\r", "\n").replace("\0", "\ufffd")


class _Html:
    """What the raw HTML seen so far leaves open: an HTML comment, hiding elements."""

    def __init__(self) -> None:
        self.comment = False
        self.open: dict[str, int] = {}

    @property
    def hidden(self) -> bool:
        return self.comment or any(self.open.values())

    def feed(self, raw: str) -> None:
        pos = 0
        while True:
            if self.comment:
                end = _COMMENT_END.search(raw, pos)
                if end is None:
                    return
                self.comment = False
                pos = end.end()
            found = _MARKUP.search(raw, pos)
            if found is None:
                return
            pos = found.end()
            closing, name = found.group(2, 3)
            if name is None:
                self.comment = found.group(1) is None
            elif name.lower() in HIDING_ELEMENTS:
                depth = self.open.get(name.lower(), 0)
                self.open[name.lower()] = max(0, depth - 1) if closing else depth + 1


@dataclass(slots=True)
class _Spans:
    """Where, in one inline token's content, the recording rules found hidden markup."""

    src: str
    found: list[tuple[int, int, str]] = field(default_factory=list)
    """(start, end, raw HTML or "") for each hidden stretch."""


def _hidden(*, html: bool = False) -> Note:
    """A note of what a rule matched as hidden (for raw HTML, with its text)."""

    def note(state: StateInline, name: str, start: int, first_token: int) -> None:
        spans: _Spans = state.env[_SPANS]
        # An image's alt text is parsed as a string of its own: the whole image is hidden.
        if state.src is spans.src:
            raw = state.src[start : state.pos] if html else ""
            spans.found.append((start, state.pos, raw))

    return note


def _link_target(state: StateInline, name: str, start: int, first_token: int) -> None:
    """A link's destination and title (everything after the text), noted as hidden."""
    spans: _Spans = state.env[_SPANS]
    if state.src is spans.src:
        label_end = state.md.helpers.parseLinkLabel(state, start, True)
        spans.found.append((label_end, state.pos, ""))


_NOTES: dict[str, Note] = {
    "backticks": _hidden(),
    "html_inline": _hidden(html=True),
    "image": _hidden(),
    "link": _link_target,
}


def _parser() -> MarkdownIt:
    parser = MarkdownIt("commonmark")
    # Block structure first; inline parsing only for the blocks that can be prose.
    parser.disable("inline")
    return wrap_inline_rules(parser, lambda name, rule: recording(name, rule, _NOTES[name]), _NOTES)


_PARSER = _parser()


@dataclass(frozen=True, slots=True)
class Prose:
    """A normalized comment with everything but prose blanked, offsets unchanged."""

    text: str
    """The comment with spaces in place of every character that is not prose."""
    starts: tuple[int, ...]
    """Where each paragraph or heading outside a quote starts, in order."""
    ends: tuple[int, ...]
    """Where each of them ends."""

    def block_end(self, offset: int) -> int:
        """The end of the paragraph or heading holding the prose character at `offset`."""
        return self.ends[bisect_right(self.starts, offset) - 1]


class _Reader:
    """Walks the block tokens of one comment, revealing prose in `chars`."""

    def __init__(self, body: str) -> None:
        self.body = body
        self.chars = ["\n" if char == "\n" else " " for char in body]
        self.line_starts = [0]
        self.line_starts += [match.end() for match in re.finditer("\n", body)]
        self.html = _Html()
        self.starts: list[int] = []
        self.ends: list[int] = []

    def line(self, index: int) -> str:
        start = self.line_starts[index]
        end = self.line_starts[index + 1] - 1 if index + 1 < len(self.line_starts) else None
        return self.body[start:end]

    def read(self, tokens: list[Token], references: object) -> None:
        scopes: list[dict[str, int]] = []
        quotes = 0
        for token in tokens:
            if token.type in ("blockquote_open", "list_item_open"):
                scopes.append(dict(self.html.open))
                quotes += token.type == "blockquote_open"
            elif token.type in ("blockquote_close", "list_item_close"):
                # The end of a quote or list item closes what was opened inside it, and a
                # closing tag inside it could not close what was opened outside.
                self.html.open = scopes.pop()
                quotes -= token.type == "blockquote_close"
            elif token.type == "html_block":
                self.html.feed(token.content)
            elif token.type == "inline" and not quotes and token.content and token.map:
                self.inline(token.content, token.map[0], references)

    def inline(self, content: str, first_line: int, references: object) -> None:
        """Reveal the prose of one paragraph or heading whose text is `content`."""
        to_source = self.locate(content, first_line)
        spans = _Spans(content)
        _PARSER.inline.parse(content, _PARSER, {"references": references, _SPANS: spans}, [])
        pos = 0
        for start, end, raw in sorted(spans.found):
            if not self.html.hidden:
                self.reveal(to_source, pos, start)
            if raw:
                self.html.feed(raw)
            pos = max(pos, end)
        if not self.html.hidden:
            self.reveal(to_source, pos, len(content))
        mapped = [offset for offset in to_source if offset >= 0]
        self.starts.append(mapped[0])
        self.ends.append(mapped[-1] + 1)

    def locate(self, content: str, first_line: int) -> list[int]:
        """The source offset of each non-blank character of `content`, -1 for the others.

        Each line of a block's content is the end of its source line, after the container's
        markers and indentation, trimmed; whole blank lines may be trimmed off the front.
        """
        to_source = [-1] * len(content)
        line = first_line
        while not self.line(line).strip():
            line += 1
        at = 0
        for text in content.split("\n"):
            core = text.strip()
            if core:
                source = self.line_starts[line] + self.line(line).rfind(core)
                lead = at + len(text) - len(text.lstrip())
                to_source[lead : lead + len(core)] = range(source, source + len(core))
            at += len(text) + 1
            line += 1
        return to_source

    def reveal(self, to_source: list[int], start: int, end: int) -> None:
        for offset in to_source[start:end]:
            if offset >= 0:
                self.chars[offset] = self.body[offset]


def prose(body: str) -> Prose:
    """The prose of a comment already passed through `normalize`, as GitHub shows it."""
    env: dict[str, object] = {}
    tokens = _PARSER.parse(body, env)
    reader = _Reader(body)
    reader.read(tokens, env.get("references", {}))
    return Prose("".join(reader.chars), tuple(reader.starts), tuple(reader.ends))
