"""Untrusted Markdown without the text GitHub does not show: image alt text, titles, attributes.

A reader on GitHub sees an image, not its alt text; a link's text, not its title (a tooltip at
most); an HTML tag's effect, not its attributes. Text hidden there is where instructions aimed
at a model hide, so it goes before the model reads the Markdown:

- `![alt](url "title")`, `![alt][ref]`, `![alt][]` and `![alt]` (a defined reference) become
  `[image]`; HTML media tags (`<img alt=...>`, `<picture>`, `<video>`, ...) become `[image]`;
- `[text](url "title")` keeps its text and url and loses the title; a reference definition
  `[ref]: url "title"` keeps its url and loses the title; `<a ...>` and `</a>` go, their text
  stays; every other HTML tag keeps only its name;
- code (fenced, indented, inline spans) is shown as written on GitHub, so it is kept as is.

The document is parsed with a CommonMark parser (markdown-it-py), which says where code,
images, links, tags and definitions are; the edits are made on the source at those places, so
everything else keeps its form. The result is parsed again: if any image, title or hiding
attribute is left (a form the edits missed), the text is rebuilt from the parse instead, as the
plain text a reader sees (`plain_text`), which cannot carry them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, MutableMapping, Sequence
from dataclasses import dataclass
from itertools import takewhile
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common.utils import isStrSpace
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token

from policies._markdown_spans import recording, wrap_inline_rules

IMAGE = "[image]"
_SPANS = "hidden_text_spans"
_MEDIA = frozenset({"img", "picture", "source", "video", "audio", "iframe", "object", "embed"})
_TAG = re.compile(
    r"""<(/?)([A-Za-z][A-Za-z0-9-]*)"""
    r"""((?:\s+[^\s"'<>/=]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'=<>`]+))?)*)\s*(/?)>"""
)
_HIDING = re.compile(
    r"<(?:" + "|".join(sorted(_MEDIA)) + r")\b|<[A-Za-z][^<>]*?\s(?:alt|title|aria-[\w-]+)\s*=",
    re.IGNORECASE,
)
_DEFINITION = re.compile(
    r"""^(?P<keep>(?:[ \t>]|[-+*][ \t]|\d{1,9}[.)][ \t])*"""
    r"""\[(?P<label>(?:[^\[\]\\]|\\.){1,999})\]:[ \t]*\n?[ \t>]*(?:<(?:[^<>\n\\]|\\.)*>|[^\s<]\S*))"""
    r"""(?P<title>[ \t]*\n?[ \t>]*(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\((?:[^()\\]|\\.)*\)))"""
    r"""[ \t]*$""",
    re.MULTILINE,
)
_PLAIN_ESCAPES = re.compile(r"([\\\[\]<`])")
_LEAVES = frozenset({"inline", "fence", "code_block", "html_block", "hr"})


@dataclass(frozen=True, slots=True)
class _Span:
    """A place in an inline source to rewrite: an image, a titled inline link or an HTML tag."""

    kind: str
    start: int
    end: int
    label: tuple[int, int] = (0, 0)
    dest: tuple[int, int] = (0, 0)

    def holds(self, other: _Span) -> bool:
        """Whether `other` (starting at or after this span) lies in this link's text."""
        return other.start < self.label[1]


def _clean_tag(match: re.Match[str]) -> str:
    closing, name, _, self_closing = match.groups()
    if name.lower() in _MEDIA:
        return "" if closing else IMAGE
    if name.lower() == "a":
        return ""
    return f"<{closing}{name}{self_closing}>"


def clean_tags(html: str) -> str:
    """HTML with media tags as `[image]`, `<a>` tags gone and other tags without attributes."""
    return _TAG.sub(_clean_tag, html)


def _spans(state: StateInline) -> list[_Span] | None:
    found = state.env.get(_SPANS)
    return found if isinstance(found, list) else None


def _inline_dest(state: StateInline, start: int) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """The label and destination ranges of the inline link at `start`, or None (a reference)."""
    src, maximum = state.src, state.posMax
    label_end = state.md.helpers.parseLinkLabel(state, start, True)
    pos = label_end + 1
    if label_end < 0 or pos >= maximum or src[pos] != "(":
        return None
    pos += 1
    while pos < maximum and (isStrSpace(src[pos]) or src[pos] == "\n"):
        pos += 1
    found = state.md.helpers.parseLinkDestination(src, pos, maximum)
    if not found.ok:
        return None
    return (start + 1, label_end), (pos, found.pos)


def _note(state: StateInline, kind: str, start: int, first_token: int) -> None:
    """Where an image, a titled inline link or an HTML tag matched, for the rewrite."""
    spans = _spans(state)
    if spans is None:
        return
    end = state.pos
    if kind != "link":
        spans.append(_Span(kind, start, end))
        return
    # The rule may flush pending text first: its link_open is the first one it pushed.
    pushed = state.tokens[first_token:]
    opened = next((t for t in pushed if t.type == "link_open"), None)
    if opened is not None and opened.attrGet("title"):
        ranges = _inline_dest(state, start)
        if ranges is not None:
            spans.append(_Span(kind, start, end, *ranges))


def _inline_parser() -> MarkdownIt:
    return wrap_inline_rules(
        MarkdownIt("commonmark"),
        lambda name, rule: recording(name, rule, _note),
        ("image", "link", "html_inline"),
    )


_BLOCK = MarkdownIt("commonmark")
_BLOCKS_ONLY = MarkdownIt("commonmark").disable(["inline", "text_join"])
"""Leaf blocks with their lines, and reference definitions: all the rewrite needs of a parse."""
_INLINE = _inline_parser()


def _render(src: str, spans: Sequence[_Span], lo: int, hi: int) -> str:
    out: list[str] = []
    pos = lo
    for index, span in enumerate(spans):
        if span.start < pos or span.end > hi:
            continue  # inside a span already rewritten, or past this range
        out.append(src[pos : span.start])
        if span.kind == "image":
            out.append(IMAGE)
        elif span.kind == "html_inline":
            out.append(clean_tags(src[span.start : span.end]))
        else:
            inner = list(takewhile(span.holds, spans[index + 1 :]))
            text = _render(src, inner, *span.label)
            out.append(f"[{text}]({src[span.dest[0] : span.dest[1]]})")
        pos = span.end
    out.append(src[pos:hi])
    return "".join(out)


def _clean_inline(source: str, references: MutableMapping[str, Any]) -> str:
    spans: list[_Span] = []
    _INLINE.parseInline(source, {"references": references, _SPANS: spans})
    if not spans:
        return source
    spans.sort(key=lambda s: (s.start, -s.end))
    return _render(source, spans, 0, len(source))


def _drop_definition_titles(source: str) -> str:
    """Lines that no leaf block holds are definitions (or blank, or container marks only)."""
    return _DEFINITION.sub(r"\g<keep>", source)


def _leaves(tokens: Sequence[Token]) -> list[Token]:
    return [t for t in tokens if t.type in _LEAVES and t.map is not None]


def _cut(text: str, limit: int) -> str:
    """At most `limit` characters of `text`, ending before the block the cut falls in when
    that block is a paragraph or HTML (cut there, an image's alt text or a title would
    lose its closing bracket or quote and read as plain text)."""
    head = text[:limit]
    lines = head.split("\n")
    leaves = _leaves(_BLOCKS_ONLY.parse(head, {}))
    last = leaves[-1] if leaves else None
    if (
        last is not None
        and last.map is not None
        and last.map[1] >= len(lines)
        and last.type in ("inline", "html_block")
    ):
        lines = lines[: last.map[0]]
    kept = "\n".join(lines).rstrip("\n")
    return f"{kept}\n[… cut: the first {len(kept):,} of {len(text):,} characters read]"


def _gaps(covered: Sequence[bool]) -> list[tuple[int, int]]:
    """The runs of lines that no leaf block holds, as (first, end) pairs."""
    runs: list[tuple[int, int]] = []
    start: int | None = None
    for index, held in enumerate([*covered, True]):
        if not held and start is None:
            start = index
        elif held and start is not None:
            runs.append((start, index))
            start = None
    return runs


def _rewrite(text: str) -> str:
    env: dict[str, Any] = {}
    tokens = _BLOCKS_ONLY.parse(text, env)
    references: MutableMapping[str, Any] = env.get("references") or {}
    lines = text.split("\n")
    covered = [False] * len(lines)
    edits: list[tuple[int, int, str]] = []
    for token in _leaves(tokens):
        first, end = token.map or (0, 0)
        covered[first:end] = [True] * (end - first)
        if token.type in ("inline", "html_block"):
            # Markdown inside an HTML block is shown raw, but it would come alive once the
            # block's first tag is rewritten: the block gets the inline edits too.
            edits.append((first, end, _clean_inline("\n".join(lines[first:end]), references)))
    for first, end in _gaps(covered):
        edits.append((first, end, _drop_definition_titles("\n".join(lines[first:end]))))
    for first, end, replacement in sorted(edits, reverse=True):
        lines[first:end] = [replacement]
    return "\n".join(lines)


def hidden_leftovers(text: str) -> list[str]:
    """What in `text` a CommonMark reader would not see: images, titles, hiding attributes."""
    env: dict[str, Any] = {}
    tokens = _BLOCK.parse(text, env)
    found = [
        f"title of reference [{label}]"
        for label, ref in (env.get("references") or {}).items()
        if isinstance(ref, dict) and ref.get("title")
    ]
    for token in tokens:
        if token.type == "html_block" and _HIDING.search(token.content):
            found.append("HTML attributes or media")
        for child in token.children or ():
            if child.type == "image":
                found.append("image")
            elif child.type == "link_open" and child.attrGet("title"):
                found.append("link title")
            elif child.type == "html_inline" and _HIDING.search(child.content):
                found.append("HTML attributes or media")
    return found


def drop_hidden_text(text: str, *, limit: int | None = None) -> str:
    """`text` without image alt text, link titles and HTML attributes (see the module doc).

    With `limit`, a longer text is first cut to at most that many characters, at a block
    boundary, with a marker saying so: callers keep less than that anyway, and the parser's
    cost grows with the text (measured here: 0.07 s for 50,000 characters of ordinary
    Markdown, but about 0.1 ms a character for bracket-heavy text: 1.1 s for 10,000).
    """
    if "[" not in text and "<" not in text:
        return text  # no image, link, definition or tag can be written without one of these
    if limit is not None and len(text) > limit:
        text = _cut(text, limit)
    rewritten = _rewrite(text)
    if not hidden_leftovers(rewritten):
        return rewritten
    plain = plain_text(text)
    if not hidden_leftovers(plain):
        return plain
    return _PLAIN_ESCAPES.sub(r"\\\1", plain)  # nothing escaped can open a link or a tag


def _code_span(token: Token) -> str:
    pad = " " if "`" in token.content or token.content.startswith(" ") else ""
    return f"{token.markup}{pad}{token.content}{pad}{token.markup}"


def _plain_inline(children: Iterable[Token]) -> str:
    out: list[str] = []
    hrefs: list[str] = []
    for child in children:
        if child.type == "text":
            out.append(_PLAIN_ESCAPES.sub(r"\\\1", child.content))
        elif child.type == "code_inline":
            out.append(_code_span(child))
        elif child.type in ("softbreak", "hardbreak"):
            out.append("\n")
        elif child.type == "image":
            out.append(IMAGE)
        elif child.type == "link_open":
            hrefs.append(str(child.attrGet("href") or ""))
            out.append("[")
        elif child.type == "link_close":
            out.append(f"]({hrefs.pop() if hrefs else ''})")
        elif child.type == "html_inline":
            tag = clean_tags(child.content)
            out.append("" if _HIDING.search(tag) else tag)
        else:
            out.append(child.markup)  # emphasis and the like
    return "".join(out)


def plain_text(text: str) -> str:
    """The Markdown rebuilt from its parse as a reader sees it: code as written, images as
    `[image]`, links as `[text](url)`, tags without attributes, no titles."""
    blocks: list[str] = []
    quote = 0
    marker = ""
    heading = ""
    tight = False
    env: dict[str, Any] = {}
    tokens = _BLOCK.parse(text, env)
    references: MutableMapping[str, Any] = env.get("references") or {}
    for token in tokens:
        kind = token.type
        if kind == "blockquote_open":
            quote += 1
        elif kind == "blockquote_close":
            quote -= 1
        elif kind == "list_item_open":
            marker = f"{token.info}{token.markup} " if token.info else f"{token.markup} "
        elif kind == "heading_open":
            heading = "#" * int(token.tag[1]) + " "
        elif kind == "paragraph_open":
            tight = token.hidden
        elif kind in _LEAVES:
            if kind == "inline":
                body = heading + _plain_inline(token.children or ())
            elif kind == "fence":
                body = f"{token.markup}{token.info}\n{token.content}{token.markup}"
            elif kind == "code_block":
                body = "\n".join("    " + line for line in token.content.rstrip("\n").split("\n"))
            elif kind == "html_block":
                body = _clean_inline(token.content.rstrip("\n"), references)
                body = "" if _HIDING.search(body) else body
            else:
                body = "---"
            lines = body.split("\n")
            lines = [marker + lines[0]] + [" " * len(marker) + line for line in lines[1:]]
            prefix = "> " * quote
            joined = "\n".join(prefix + line for line in lines)
            if blocks:
                blocks.append("\n" if tight and kind == "inline" else "\n\n")
            blocks.append(joined)
            marker = heading = ""
    return "".join(blocks)
