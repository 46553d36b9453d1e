"""Model-written Markdown made safe to post: no raw HTML, images, hidden comments or odd links.

`clean_model_markdown(text)` rewrites only what it must and leaves the rest of the text as it
was written:

- raw HTML (inline or block) loses its tags; the text between them stays, escaped, and an
  `<img>` becomes `[image: alt]`. HTML comments are dropped whole, so a comment that imitates
  the app's own `<!-- bot:... -->` markers never reaches GitHub;
- an image `![alt](url)` becomes the plain text `[image: alt]`; nothing is loaded;
- a link keeps its visible text; it stays clickable only when it points at an absolute
  `https://` address, and then without its (invisible) title and in inline form. Every other
  scheme (`http:`, `javascript:`, `data:`, `mailto:`, relative addresses) leaves the text only.
  Autolinks (`<http://...>`) and the bare addresses GitHub links by itself (`http://...`,
  `www....`, e-mail addresses) that are not `https` are put in a code span, where nothing links;
- link reference definitions, invisible on GitHub, are removed;
- every `<` left in running text is escaped, so no other renderer can read a tag into it;
- a code fence the text opens and never closes is closed, so whatever the app renders after the
  text stays outside it.

Code spans and code blocks keep their literal content: nothing inside them renders.

The app's own HTML stays out of this function's input (markers and footers are added around
its output), with one exception for text that mixes the app's structure with model-written
parts: a collapsed section, written as the lines `collapsible(title)` and `END_COLLAPSIBLE`,
comes out as `<details><summary>title</summary>` and `</details>`, each a block of its own
with blank lines around it, and every section left open is closed.

The text is parsed with markdown-it-py as CommonMark plus GFM tables (`_markdown_source`), the
rewrite applied, and the result parsed again until nothing is left to rewrite. Text the parser
gives up on (nesting beyond its limit) or that still needs rewriting after a few rounds is posted
whole as a code block instead. Mentions, closing keywords and fences are not this module's
business: each piece of text the app did not write went through `policies.untrusted_text`
before it was put into the document, and `code_span` here is that module's.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from typing import NamedTuple

from bot.publish._markdown_source import (
    InlineBlock,
    ParsedSource,
    Span,
    normalize,
    parse_source,
)
from policies.untrusted_text import code_span

__all__ = [
    "END_COLLAPSIBLE",
    "as_code_block",
    "clean_model_markdown",
    "clean_within",
    "code_span",
    "collapsible",
    "literal",
]

_ROUNDS = 6

# The app's own collapsed sections, in text that also holds model-written parts: a line opening
# one and a line closing it, marked with private-use characters. Model-written text never holds
# those (`strip_terminal` removes them first, and the cleaner drops any it finds elsewhere); a
# forged mark could only ever open or close a collapsed section, nothing else.
_OWN_OPEN = "\ue000details\ue001"
_OWN_CLOSE = "\ue000/details\ue001"
_STRAY_MARK = re.compile("[\ue000\ue001]")

# Everything the rewrite could change needs one of these; text without them is returned as is.
_MAYBE = re.compile(r"[<\[@]|:\\?/|www\\?\.|```|~~~|\b(?:mailto|xmpp)\\?:", re.IGNORECASE)

# The addresses GitHub links without being asked (its "extended autolinks"), matched loosely:
# the start of each match goes into a code span, which is what stops the link.
_BARE_ADDRESS = re.compile(
    r"(?:https?|ftp)://[^\s<]*"
    r"|(?<![A-Za-z0-9])www\.[A-Za-z0-9-][^\s<]*"
    r"|\b(?:mailto|xmpp):[^\s<]+"
    r"|[A-Za-z0-9.+_-]+@[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)+",
    re.IGNORECASE,
)
_TRAILING = "?!.,:;*_~'\""
# ASCII punctuation but `|`, which only means something in a table (escaped there, see below).
_PUNCTUATION = re.compile(r"[!-/:-@\[-`{}~]")
_PROTECTED = frozenset({"backticks", "escape", "entity"})


class Edit(NamedTuple):
    start: int
    end: int
    text: str


def is_https(href: str) -> bool:
    return href[:8].lower() == "https://" and len(href) > 8


def _trim(address: str) -> str:
    while address and address[-1] in _TRAILING:
        address = address[:-1]
    while address.endswith(")") and address.count(")") > address.count("("):
        address = address[:-1]
    return address


def _unsafe_addresses(text: str) -> list[tuple[int, int]]:
    """Where `text` holds an address GitHub would link that is not `https://`."""
    found = []
    for match in _BARE_ADDRESS.finditer(text):
        address = _trim(match.group())
        if address and not is_https(address):
            found.append((match.start(), match.start() + len(address)))
    return found


def literal(text: str) -> str:
    """Plain text as Markdown that renders exactly that text: nothing links or formats."""
    out = []
    at = 0
    for start, end in _unsafe_addresses(text):
        out.append(_PUNCTUATION.sub(r"\\\g<0>", text[at:start]))
        out.append(code_span(text[start:end]))
        at = end
    out.append(_PUNCTUATION.sub(r"\\\g<0>", text[at:]))
    return "".join(out)


def image_text(alt: str) -> str:
    alt = " ".join(alt.split())
    return literal(f"[image: {alt}]" if alt else "[image]")


class _HtmlText(HTMLParser):
    """The visible text of an HTML fragment, with images as `[image: alt]`, as Markdown."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(literal(data))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "img":
            self.parts.append(image_text(dict(attrs).get("alt") or ""))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)


def html_text(fragment: str) -> str:
    parser = _HtmlText()
    try:
        parser.feed(fragment)
        parser.close()
    except Exception:  # a malformed fragment: show it all, escaped
        return literal(fragment)
    return "".join(parser.parts)


def _href(span: Span) -> tuple[str, bool]:
    """A link span's target and whether it carries a title."""
    for token in span.tokens:
        if token.type == "link_open":
            return str(token.attrs.get("href", "")), bool(token.attrs.get("title"))
    return "", False


def _alt(span: Span) -> str:
    for token in span.tokens:
        if token.type == "image":
            return "".join(
                t.content for t in token.children or () if t.type in ("text", "code_inline")
            )
    return ""


def _apply(text: str, start: int, end: int, edits: list[Edit]) -> str:
    out = []
    at = start
    for edit in sorted(edits):
        out.append(text[at : edit.start])
        out.append(edit.text)
        at = edit.end
    out.append(text[at:end])
    return "".join(out)


def _scan(content: str, spans: list[Span], start: int, end: int, edits: list[Edit]) -> None:
    """The edits that `content[start:end]`, holding `spans`, needs."""
    masked = list(content[start:end])
    escaped: set[int] = set()
    for span in spans:
        replacement: str | None = None
        if span.rule == "html_inline":
            replacement = html_text(content[span.start : span.end])
        elif span.rule == "image":
            replacement = image_text(_alt(span))
        elif span.rule == "autolink":
            href, _ = _href(span)
            if not is_https(href):
                replacement = code_span(content[span.start + 1 : span.end - 1])
        elif span.rule == "link":
            href, titled = _href(span)
            label = span.label or (span.start + 1, span.start + 1)
            inner = _rendered(content, span.children, *label)
            if not is_https(href):
                replacement = inner
            elif titled or content[label[1] + 1 : label[1] + 2] != "(":
                replacement = f"[{inner}](<{href}>)"
            else:
                _scan(content, span.children, label[0], label[1], edits)
        elif span.rule not in _PROTECTED:
            continue  # text, emphasis, line breaks: scanned below as running text
        if replacement is not None:
            edits.append(Edit(span.start, span.end, " ".join(replacement.split("\n"))))
        if span.rule == "escape" and span.end - span.start == 2:
            # GitHub finds bare addresses after escapes are undone (`a\@evil.test` links):
            # the escaped character stays in the running text, its backslash drops out.
            masked[span.start - start] = ""
            escaped.add(span.start + 1)
            continue
        for index in range(span.start, span.end):
            masked[index - start] = " "
    # Running text without dropped backslashes, and where each of its characters came from.
    where = [start + i for i, piece in enumerate(masked) if piece != ""]
    running = "".join(masked)
    for begin, stop in _unsafe_addresses(running):
        first, last = where[begin], where[stop - 1] + 1
        edits.append(Edit(first, last, code_span(content[first:last])))
    for index, char in enumerate(running):
        if char == "<" and where[index] not in escaped:
            edits.append(Edit(where[index], where[index], "\\"))


def _rendered(content: str, spans: list[Span], start: int, end: int) -> str:
    edits: list[Edit] = []
    _scan(content, spans, start, end, edits)
    return _apply(content, start, end, edits)


def _inline_edits(block: InlineBlock) -> list[Edit]:
    edits: list[Edit] = []
    _scan(block.content, block.spans, 0, len(block.content), edits)
    out = []
    for edit in edits:
        text = edit.text.replace("|", "\\|") if block.in_table else edit.text
        begin = block.offsets[edit.start]
        end = block.offsets[edit.end - 1] + 1 if edit.end > edit.start else begin
        out.append(Edit(begin, end, text))
    return out


def _edits(parsed: ParsedSource) -> list[Edit]:
    edits = [Edit(start, end, "") for start, end in parsed.references]
    for block in parsed.html_blocks:
        lines = html_text("\n".join(block.lines)).split("\n")
        for index, (start, end) in enumerate(block.ranges):
            text = lines[index].lstrip() if index < len(lines) else ""
            if index == len(block.ranges) - 1 and len(lines) > len(block.ranges):
                text = " ".join([text, *(line.strip() for line in lines[index + 1 :])])
            if text != parsed.src[start:end]:
                edits.append(Edit(start, end, text))
    for inline in parsed.inlines:
        edits += _inline_edits(inline)
    if parsed.open_fence is not None:
        end = len(parsed.src)
        joint = "" if parsed.src.endswith("\n") else "\n"
        edits.append(Edit(end, end, f"{joint}{parsed.open_fence}"))
    return edits


def as_code_block(text: str) -> str:
    """The whole text as a fenced code block: shown as written, nothing rendered."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}text\n{text}\n{ticks}"


def _clean_document(text: str) -> str:
    if not _MAYBE.search(text):
        return text
    current = text
    for _ in range(_ROUNDS):
        try:
            parsed = parse_source(current)
        except RecursionError:
            break
        if not parsed.complete:
            break
        edits = _edits(parsed)
        if not edits:
            return current
        current = _apply(parsed.src, 0, len(parsed.src), edits)
    return as_code_block(text)


def collapsible(title: str) -> str:
    """The line that opens a collapsed section with this plain-text title (see the module)."""
    return f"{_OWN_OPEN}{' '.join(title.split())}"


END_COLLAPSIBLE = _OWN_CLOSE
"""The line that closes the section `collapsible` opened."""


def clean_model_markdown(text: str) -> str:
    """`text` without raw HTML, images, hidden comments or non-`https` links (see the module)."""
    lines = normalize(text).split("\n")
    out: list[str] = []
    segment: list[str] = []
    depth = 0

    def flush() -> None:
        cleaned = _clean_document(_STRAY_MARK.sub("", "\n".join(segment)))
        segment.clear()
        if cleaned.strip():
            out.append(cleaned.strip("\n"))

    for line in lines:
        if line.startswith(_OWN_OPEN) or line == _OWN_CLOSE:
            flush()
            if line == _OWN_CLOSE:
                if depth:
                    depth -= 1
                    out.append("</details>")
                continue
            title = _STRAY_MARK.sub("", line[len(_OWN_OPEN) :]).strip()
            depth += 1
            out.append(
                f"<details><summary>{html.escape(title)}</summary>" if title else "<details>"
            )
        else:
            segment.append(line)
    flush()
    out += ["</details>"] * depth
    return "\n\n".join(out)


def clean_within(text: str, limit: int) -> str:
    """`clean_model_markdown(text)`, cut first (with a note) so that the result fits `limit`.

    The cut comes before the cleaning: cutting clean text could open a code span and let what
    was inside it render."""
    budget = limit
    while budget > 0:
        cut = text
        if len(text) > budget:
            keep = max(0, budget - 80)
            cut = text[:keep] + f"\n\n… [truncated: {len(text) - keep:,} characters cut]"
        cleaned = clean_model_markdown(cut)
        if len(cleaned) <= limit:
            return cleaned
        budget -= len(cleaned) - limit + 80
    return ""
