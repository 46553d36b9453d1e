"""Text as the operator's page shows it: redacted, escaped, and Markdown rendered safely.

Everything a model or a user wrote passes through the same redaction as what is posted to
GitHub (`bot.redact.Redactor`, with this deployment's secrets and BOT_UI_TOKEN) before it is
escaped (Jinja2 autoescape, or `markupsafe.escape` here). Markdown is rendered by
markdown-it-py with raw HTML off and images off (an image would fetch from its host), and a
link is kept only when it is http(s), mailto or relative.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from markdown_it import MarkdownIt
from markupsafe import Markup, escape

Redact = Callable[[str], str]
_SAFE_SCHEMES = ("http://", "https://", "mailto:")


def _link_ok(url: str) -> bool:
    compact = "".join(ch for ch in url if ch.isprintable() and not ch.isspace()).lower()
    if compact.startswith(_SAFE_SCHEMES):
        return True
    # Relative: no scheme before the first /, ? or #.
    head = compact.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    return ":" not in head


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False})
    md.disable("image")
    md.validateLink = _link_ok  # type: ignore[method-assign]

    def add_rel(state: Any) -> None:
        for block in state.tokens:
            for token in block.children or ():
                if token.type == "link_open":
                    token.attrSet("rel", "nofollow noopener noreferrer")

    md.core.ruler.push("ui_link_rel", add_rel)
    return md


_MD = _markdown()


def markdown(text: str, redact: Redact) -> Markup:
    """`text` (Markdown) as safe HTML, redacted before and after rendering: a secret written
    with Markdown escapes in it (`ghp\\_...`) only takes its shape once rendered. A
    replacement is plain words in brackets, so redacting the HTML cannot open a tag."""
    return Markup(redact(_MD.render(redact(text))))


def redact_values(value: Any, redact: Redact) -> Any:
    """`value` (JSON data) with every string in it redacted."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redact_values(v, redact) for v in value]
    if isinstance(value, dict):
        return {k: redact_values(v, redact) for k, v in value.items()}
    return value


def pretty_json(value: Any, redact: Redact, limit: int = 200_000) -> str:
    """`value` as indented JSON, redacted and capped at `limit` characters (escaped later)."""
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)
    if len(text) > limit:
        text = text[:limit] + f"\n… ({len(text) - limit} more characters not shown)"
    return redact(text)


def capped(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit} more characters not shown)"


def diff_html(patch: str, redact: Redact) -> Markup:
    """A unified diff with one span per line, classed by kind (added, removed, hunk, file)."""
    lines: list[str] = []
    for line in redact(patch).splitlines():
        if line.startswith(("+++", "---", "diff --git", "index ")):
            kind = "d-file"
        elif line.startswith("@@"):
            kind = "d-hunk"
        elif line.startswith("+"):
            kind = "d-add"
        elif line.startswith("-"):
            kind = "d-del"
        else:
            kind = "d-ctx"
        lines.append(f'<span class="{kind}">{escape(line)}</span>')
    return Markup("\n".join(lines))
