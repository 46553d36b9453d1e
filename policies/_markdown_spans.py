"""Where markdown-it-py's inline rules matched in their source: the one way this project records it.

markdown-it-py's tokens say which line a block came from, not where an inline construct sits in
its block's text. `wrap_inline_rules` puts a wrapper around each named inline rule of a parser
(keeping the rule's options), and `recording` is the usual wrapper: it runs the rule and, after
each match in a parse that is not silent, calls `note(state, name, start, first_token)` with the
position the rule started at (the match is `state.src[start:state.pos]`) and the index of the
first token it may have pushed. Pure: it reads strings and returns tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline

InlineRule = Callable[[StateInline, bool], bool]
Note = Callable[[StateInline, str, int, int], None]


def recording(name: str, rule: InlineRule, note: Note) -> InlineRule:
    """`rule`, calling `note(state, name, start, first_token)` after each match that is not silent."""

    def wrapped(state: StateInline, silent: bool) -> bool:
        start, first_token = state.pos, len(state.tokens)
        if not rule(state, silent):
            return False
        if not silent:
            note(state, name, start, first_token)
        return True

    return wrapped


def wrap_inline_rules(
    md: MarkdownIt,
    wrap: Callable[[str, InlineRule], InlineRule],
    names: Iterable[str] | None = None,
) -> MarkdownIt:
    """Replace each inline rule of `md` named in `names` (every one when None) by
    `wrap(name, rule)`, its options kept; returns `md`."""
    ruler = md.inline.ruler
    for name in ruler.get_all_rules() if names is None else names:
        rule = ruler.__rules__[ruler.__find__(name)]
        ruler.at(name, wrap(name, rule.fn), {"alt": rule.alt})
    return md
