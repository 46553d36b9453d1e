"""Markdown parsed as GitHub parses it, with each construct's place in the source text.

markdown-it-py (CommonMark with raw HTML on, plus GFM tables and strikethrough) gives the tokens.
It does not say where an inline construct sits in the text, so the inline rules are wrapped to
record their spans (`Span`, in the coordinates of the block's inline content), and each
paragraph's, heading's and table cell's content is mapped back, character by character, to
offsets in the source (`InlineBlock.offsets`). Link reference definitions leave no token at all;
their lines are recorded as they are consumed.

Every link is parsed whatever its scheme (markdown-it would otherwise drop `javascript:` links
that another renderer shows), and `ParsedSource.complete` is False when the parser gave up on
part of the text (nesting deeper than `MAX_NESTING`) or a block's content could not be mapped
back to the source: a caller must then treat the text as unparsed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common.utils import MD_TRIM_CHARS
from markdown_it.helpers import parseLinkLabel
from markdown_it.rules_block import StateBlock
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token

from policies._markdown_spans import InlineRule, wrap_inline_rules

MAX_NESTING = 100
_SPANS = "bot_inline_spans"
_STARTS = "bot_line_starts"
_REFS = "bot_reference_lines"
_GAVE_UP = "bot_gave_up"

BlockRule = Callable[[StateBlock, int, int, bool], bool]


@dataclass
class Span:
    """One inline rule's match: `[start, end)` in the block's inline content."""

    rule: str
    start: int
    end: int
    tokens: list[Token] = field(default_factory=list)
    children: list[Span] = field(default_factory=list)
    label: tuple[int, int] | None = None  # a link's or image's `[...]` contents


@dataclass
class InlineBlock:
    """The inline content of a paragraph, heading or table cell, mapped to the source."""

    content: str
    offsets: list[int]  # source offset of each content character, plus one past the end
    spans: list[Span]
    in_table: bool


@dataclass
class HtmlBlock:
    """A raw HTML block: its content lines and where each sits in the source."""

    lines: list[str]
    ranges: list[tuple[int, int]]


@dataclass
class ParsedSource:
    src: str  # the text as parsed: line endings normalized, NUL replaced
    tokens: list[Token]
    inlines: list[InlineBlock]
    html_blocks: list[HtmlBlock]
    references: list[tuple[int, int]]  # source ranges of link reference definitions
    open_fence: str | None  # the marker of a top-level code fence the text never closes
    complete: bool


class _Recorder:
    """Collects the spans of one inline parse (the block's own state, not an image's alt)."""

    def __init__(self) -> None:
        self.state: StateInline | None = None
        self.root = Span("root", 0, 0)
        self.stack: list[Span] = [self.root]

    def owns(self, state: StateInline) -> bool:
        if self.state is None:
            self.state = state
        return self.state is state


def _recording(name: str, rule: InlineRule) -> InlineRule:
    def wrapped(state: StateInline, silent: bool) -> bool:
        recorder = state.env.get(_SPANS)
        if silent or not isinstance(recorder, _Recorder) or not recorder.owns(state):
            return rule(state, silent)
        start, before = state.pos, len(state.tokens)
        span = Span(name, start, start)
        recorder.stack.append(span)
        try:
            matched = rule(state, silent)
        finally:
            recorder.stack.pop()
        if matched:
            span.end = state.pos
            span.tokens = state.tokens[before:]
            if name in ("link", "image"):
                opener = start + (1 if name == "image" else 0)
                pos = state.pos
                end = parseLinkLabel(state, opener, name == "link")
                state.pos = pos
                if end >= 0:
                    span.label = (opener + 1, end)
            recorder.stack[-1].children.append(span)
        return matched

    return wrapped


def _line_starts(name: str, rule: BlockRule) -> BlockRule:
    """Note where each consumed line's content starts (after container markers and indent)."""

    def wrapped(state: StateBlock, start: int, end: int, silent: bool) -> bool:
        matched = rule(state, start, end, silent)
        if matched and not silent:
            starts: dict[int, int] = state.env.setdefault(_STARTS, {})
            for line in range(start, state.line):
                starts.setdefault(line, state.bMarks[line] + state.tShift[line])
            if name == "reference":
                lines = [
                    (state.bMarks[n] + state.tShift[n], state.eMarks[n])
                    for n in range(start, state.line)
                ]
                state.env.setdefault(_REFS, []).extend(lines)
        return matched

    return wrapped


def _build() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": True, "maxNesting": MAX_NESTING})
    md.enable(["table", "strikethrough"])
    md.disable("inline")  # the core rule; inline content is parsed below, span by span
    md.validateLink = lambda url: True  # type: ignore[method-assign]
    wrap_inline_rules(md, _recording)
    for name in ("heading", "table", "reference"):
        block_rule = md.block.ruler.__rules__[md.block.ruler.__find__(name)]
        md.block.ruler.at(name, _line_starts(name, block_rule.fn), {"alt": block_rule.alt})

    block_tokenize = md.block.tokenize
    inline_tokenize = md.inline.tokenize
    inline_skip = md.inline.skipToken

    def tokenize_blocks(state: StateBlock, start: int, end: int) -> None:
        if state.level >= MAX_NESTING and start < end:
            state.env[_GAVE_UP] = True
        block_tokenize(state, start, end)

    def tokenize_inline(state: StateInline) -> None:
        if state.level >= MAX_NESTING and state.pos < state.posMax:
            state.env[_GAVE_UP] = True
        inline_tokenize(state)

    def skip_token(state: StateInline) -> None:
        if state.level >= MAX_NESTING:
            state.env[_GAVE_UP] = True
        inline_skip(state)

    md.block.tokenize = tokenize_blocks  # type: ignore[method-assign,assignment]
    md.inline.tokenize = tokenize_inline  # type: ignore[method-assign]
    md.inline.skipToken = skip_token  # type: ignore[method-assign]
    return md


_MD = _build()


def normalize(text: str) -> str:
    """The text as the parser sees it (its own first step), so offsets line up."""
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\0", "\ufffd")


class _Lines:
    def __init__(self, src: str) -> None:
        self.src = src
        self.starts = [0]
        self.ends: list[int] = []
        at = src.find("\n")
        while at >= 0:
            self.ends.append(at)
            self.starts.append(at + 1)
            at = src.find("\n", at + 1)
        self.ends.append(len(src))
        # markdown-it counts no empty line after a final newline
        self.count = len(self.ends) - (1 if src.endswith("\n") else 0)

    def text(self, line: int) -> str:
        return self.src[self.starts[line] : self.ends[line]]


def _map_lines(lines: _Lines, first: int, content: str, *, trimmed: bool) -> list[int] | None:
    """Offsets of `content`, made of the consecutive lines from `first` (each a line's tail)."""
    parts = content.split("\n")
    offsets: list[int] = []
    for index, part in enumerate(parts):
        line = first + index
        if line >= len(lines.ends):
            return None
        end = lines.ends[line]
        if trimmed and index == len(parts) - 1:
            text = lines.text(line)
            end -= len(text) - len(text.rstrip(MD_TRIM_CHARS))
        begin = end - len(part)
        if begin < lines.starts[line] or lines.src[begin:end] != part:
            return None
        offsets.extend(range(begin, end))
        if index < len(parts) - 1:
            offsets.append(lines.ends[line])  # the newline itself
    offsets.append(offsets[-1] + 1 if offsets else lines.starts[first])
    return offsets


def _map_heading(lines: _Lines, start: int | None, content: str) -> list[int] | None:
    if start is None:
        return None
    src = lines.src
    pos = start
    while pos < len(src) and src[pos] == "#":
        pos += 1
    while pos < len(src) and src[pos] in MD_TRIM_CHARS and src[pos] != "\n":
        pos += 1
    if src[pos : pos + len(content)] != content:
        return None
    return [*range(pos, pos + len(content)), pos + len(content)]


def _row_cells(src: str, start: int, end: int) -> list[list[int]]:
    """The source offsets of each cell's content in a table row (GFM's escaped-pipe split)."""
    while start < end and src[start] in MD_TRIM_CHARS:
        start += 1
    while end > start and src[end - 1] in MD_TRIM_CHARS:
        end -= 1
    cells: list[list[int]] = []
    current: list[int] = []
    escaped = False
    for pos in range(start, end):
        char = src[pos]
        if char == "|" and not escaped:
            cells.append(current)
            current = []
        elif char == "|":
            current[-1] = pos  # the backslash before an escaped pipe is not content
        else:
            current.append(pos)
        escaped = char == "\\"
    cells.append(current)
    if cells and not cells[0]:
        cells.pop(0)
    if cells and not cells[-1]:
        cells.pop()
    trimmed = []
    for cell in cells:
        while cell and src[cell[0]] in MD_TRIM_CHARS:
            cell = cell[1:]
        while cell and src[cell[-1]] in MD_TRIM_CHARS:
            cell = cell[:-1]
        trimmed.append(cell)
    return trimmed


def _closes(line: str, marker: str) -> bool:
    stripped = line.lstrip(" ")
    if len(line) - len(stripped) > 3:
        return False
    run = len(stripped) - len(stripped.lstrip(marker[0]))
    return run >= len(marker) and not stripped[run:].strip(" \t")


def _open_fence(tokens: Sequence[Token], lines: _Lines) -> str | None:
    for token in tokens:
        if token.type == "fence" and token.level == 0 and token.map is not None:
            first, after = token.map
            last = after - 1
            if after >= lines.count and (
                last == first or not _closes(lines.text(last), token.markup)
            ):
                return token.markup
    return None


def parse_source(text: str) -> ParsedSource:
    """Parse `text` (normalized first) and locate its inline constructs in the source."""
    src = normalize(text)
    env: dict[str, Any] = {}
    tokens = _MD.parse(src, env)
    lines = _Lines(src)
    starts: dict[int, int] = env.get(_STARTS, {})
    inlines: list[InlineBlock] = []
    html_blocks: list[HtmlBlock] = []
    complete = True
    previous: Token | None = None
    row: list[list[int]] = []
    cell = 0
    for token in tokens:
        if token.type == "tr_open" and token.map is not None:
            line = token.map[0]
            row = _row_cells(src, starts.get(line, lines.starts[line]), lines.ends[line])
            cell = 0
        elif token.type == "html_block" and token.map is not None:
            parts = token.content.split("\n")
            if parts and parts[-1] == "":
                parts.pop()
            mapped = _map_lines(lines, token.map[0], "\n".join(parts), trimmed=False)
            if mapped is None:
                complete = False
            else:
                ranges = []
                at = 0
                for part in parts:
                    begin = mapped[at]
                    ranges.append((begin, begin + len(part)) if part else (begin, begin))
                    at += len(part) + 1
                html_blocks.append(HtmlBlock(parts, ranges))
        elif token.type == "inline" and token.map is not None:
            offsets: list[int] | None
            in_table = previous is not None and previous.type in ("th_open", "td_open")
            if in_table:
                positions = row[cell] if cell < len(row) else []
                cell += 1
                if "".join(src[p] for p in positions) != token.content:
                    offsets = None
                else:
                    offsets = [*positions, (positions[-1] + 1) if positions else 0]
            elif (
                previous is not None
                and previous.type == "heading_open"
                and previous.markup.startswith("#")
            ):
                offsets = _map_heading(lines, starts.get(token.map[0]), token.content)
            else:
                offsets = _map_lines(lines, token.map[0], token.content, trimmed=True)
            recorder = _Recorder()
            env[_SPANS] = recorder
            token.children = []
            _MD.inline.parse(token.content, _MD, env, token.children)
            env.pop(_SPANS, None)
            if offsets is None:
                complete = False
            else:
                inlines.append(
                    InlineBlock(token.content, offsets, recorder.root.children, in_table)
                )
        previous = token
    references = [(begin, end) for begin, end in env.get(_REFS, []) if begin < end]
    return ParsedSource(
        src=src,
        tokens=tokens,
        inlines=inlines,
        html_blocks=html_blocks,
        references=references,
        open_fence=_open_fence(tokens, lines),
        complete=complete and not env.get(_GAVE_UP, False),
    )
