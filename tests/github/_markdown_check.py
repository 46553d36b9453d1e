"""What a posted body would show on GitHub that it should not: an independent reading for tests.

Parses like GitHub (CommonMark with raw HTML, GFM tables) with a plain markdown-it instance,
accepting every link scheme, and lists each raw HTML piece, image, link that is not plain
`https://`, and bare non-`https` address outside code (GitHub links those by itself: `www.`
after a space or `*_~(`, an `http://` or `ftp://` anywhere, an e-mail address).
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markdown_it.token import Token

_MD = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
_MD.validateLink = lambda url: True  # type: ignore[method-assign]

_BARE = re.compile(
    r"(?:http|ftp)://|(?:^|(?<=[\s*_~(]))www\.[A-Za-z0-9]|\b(?:mailto|xmpp):"
    r"|[A-Za-z0-9._+-]+@[A-Za-z0-9_-]+\.[A-Za-z0-9]",
    re.IGNORECASE,
)


def _walk(tokens: list[Token]) -> list[Token]:
    out: list[Token] = []
    for token in tokens:
        out.append(token)
        if token.children:
            out += _walk(token.children)
    return out


def problems(body: str, *, allowed_html: tuple[str, ...] = ()) -> list[str]:
    """Everything in `body` that renders as HTML, an image, an odd link or a bare address.

    `allowed_html` lists HTML pieces the app writes itself (exact strings).
    """
    found = []
    tokens = _walk(_MD.parse(body))
    text_runs: list[str] = []
    run = ""
    for token in tokens:
        if token.type in ("html_block", "html_inline"):
            if token.content.strip() not in allowed_html:
                found.append(f"html: {token.content.strip()!r}")
        elif token.type == "image":
            found.append(f"image: {token.attrs.get('src')!r}")
        elif token.type == "link_open":
            href = str(token.attrs.get("href", ""))
            if not href.lower().startswith("https://"):
                found.append(f"link: {href!r}")
            if token.attrs.get("title"):
                found.append(f"link title: {token.attrs['title']!r}")
        if token.type == "text":
            run += token.content
        elif token.type not in ("text_special",):
            text_runs.append(run)
            run = ""
    text_runs.append(run)
    for text in text_runs:
        # an https address GitHub links runs to the next space, whatever it holds
        text = re.sub(r"https://[^\s<]*", " ", text, flags=re.IGNORECASE)
        for match in _BARE.finditer(text):
            found.append(f"bare address: {text[match.start() : match.start() + 40]!r}")
    return found


def hidden_comments(body: str) -> list[str]:
    """The HTML comments GitHub would hide in `body`."""
    return [
        t.content.strip()
        for t in _walk(_MD.parse(body))
        if t.type in ("html_block", "html_inline") and t.content.lstrip().startswith("<!--")
    ]
