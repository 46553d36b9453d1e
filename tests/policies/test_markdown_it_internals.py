"""What this project reaches for inside markdown-it-py beyond its documented API, pinned by test.

The code wraps parser rules in place (`policies/_markdown_spans.py`, `bot/publish/_markdown_source.py`)
through a ruler's private `__rules__` (records with `name`, `enabled`, `fn` and `alt`) and
`__find__`, replaces the block and inline parsers' `tokenize` and `skipToken` on an instance
(`_markdown_source`), assigns `validateLink`, and reads the block and inline states' fields in
its wrappers. None of that is promised by markdown-it-py's releases (`pyproject.toml` bounds it
below 5). An upgrade that moves any of it fails here, by name, and in the code paths that
depend on it, instead of in production, where a wrapper that is silently no longer called lets
hidden text or a deep nesting through.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
from markdown_it import MarkdownIt
from markdown_it.common.utils import MD_TRIM_CHARS, isStrSpace
from markdown_it.helpers import parseLinkDestination, parseLinkLabel
from markdown_it.ruler import Rule, Ruler
from markdown_it.rules_block import StateBlock
from markdown_it.rules_inline import StateInline

from bot.publish._markdown_source import MAX_NESTING, parse_source
from bot.publish.hidden_text import drop_hidden_text
from bot.ui.text import markdown
from policies._markdown import normalize, prose
from policies._markdown_spans import recording, wrap_inline_rules

# The rules the code looks up by name, in each of the parsers it builds.
INLINE_RULES = ("backticks", "html_inline", "image", "link")  # hidden text, comment prose
BLOCK_RULES = ("heading", "table", "reference")  # _markdown_source's line starts
CORE_RULES = ("inline", "text_join")  # disabled: inline content is parsed block by block


def parser() -> MarkdownIt:
    """A parser as `_markdown_source` builds its own: tables and strikethrough on."""
    return MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def rulers(md: MarkdownIt) -> dict[str, Ruler[Any]]:
    return {"core": md.core.ruler, "block": md.block.ruler, "inline": md.inline.ruler}


# The private shapes themselves.


@pytest.mark.parametrize("which", ["core", "block", "inline"])
def test_a_ruler_keeps_its_rules_as_records_in___rules__(which: str) -> None:
    ruler = rulers(parser())[which]
    assert isinstance(ruler.__rules__, list) and ruler.__rules__
    for rule in ruler.__rules__:
        assert isinstance(rule, Rule)
        assert isinstance(rule.name, str) and isinstance(rule.enabled, bool)
        assert callable(rule.fn)
        assert isinstance(rule.alt, list) and all(isinstance(alt, str) for alt in rule.alt)
    assert ruler.get_all_rules() == [rule.name for rule in ruler.__rules__]


@pytest.mark.parametrize(
    ("which", "names"),
    [
        pytest.param("core", CORE_RULES, id="core"),
        pytest.param("block", BLOCK_RULES, id="block"),
        pytest.param("inline", INLINE_RULES, id="inline"),
    ],
)
def test___find___gives_the_index_of_each_rule_the_code_names(
    which: str, names: tuple[str, ...]
) -> None:
    ruler = rulers(parser())[which]
    for name in names:
        index = ruler.__find__(name)
        assert index >= 0, f"markdown-it-py has no {which} rule {name!r}"
        assert ruler.__rules__[index].name == name
    # Not found is -1, which indexes the last rule: the code must look before it leaps.
    assert ruler.__find__("no-such-rule") == -1


def test_at_replaces_a_rules_function_in_place_and_the_next_parse_calls_it() -> None:
    md = parser()
    ruler = md.inline.ruler
    before = [(r.name, r.enabled) for r in ruler.__rules__]
    md.parse("`warm the rule cache`")
    record = ruler.__rules__[ruler.__find__("backticks")]
    rule, alt = record.fn, list(record.alt)  # read before `at`, which changes the record
    calls: list[str] = []

    def counted(state: StateInline, silent: bool) -> bool:
        calls.append(state.src[state.pos :])
        return bool(rule(state, silent))

    ruler.at("backticks", counted, {"alt": alt})
    assert [(r.name, r.enabled) for r in ruler.__rules__] == before  # same place, same state
    assert ruler.__rules__[ruler.__find__("backticks")].fn is counted
    assert record.alt == alt
    tokens = md.parse("a `b`")
    assert calls and any(t.type == "code_inline" for t in tokens[1].children or [])


def arity(fn: Callable[..., Any]) -> int:
    return len(inspect.signature(fn).parameters)


def test_rule_functions_take_the_arguments_the_wrappers_pass() -> None:
    md = parser()
    for rule in md.inline.ruler.__rules__:
        assert arity(rule.fn) == 2, rule.name  # (state, silent)
    for rule in md.block.ruler.__rules__:
        assert arity(rule.fn) == 4, rule.name  # (state, startLine, endLine, silent)


def test_the_parsers_call_tokenize_and_skipToken_through_the_instance() -> None:
    """`_markdown_source` replaces them on its parser to notice when nesting gave up: markdown-it
    must reach them as attributes of the parser, nested calls included."""
    md = parser()
    calls = {"block": 0, "inline": 0, "skip": 0}
    block_tokenize, inline_tokenize, skip = (
        md.block.tokenize,
        md.inline.tokenize,
        md.inline.skipToken,
    )

    def blocks(state: StateBlock, start: int, end: int) -> None:
        calls["block"] += 1
        block_tokenize(state, start, end)

    def inline(state: StateInline) -> None:
        calls["inline"] += 1
        inline_tokenize(state)

    def skip_token(state: StateInline) -> None:
        calls["skip"] += 1
        skip(state)

    md.block.tokenize = blocks  # type: ignore[method-assign,assignment]
    md.inline.tokenize = inline  # type: ignore[method-assign]
    md.inline.skipToken = skip_token  # type: ignore[method-assign]
    md.parse("> > quoted [a [link]](https://x.test)\n")
    assert calls["block"] >= 3  # the document and each quote
    assert calls["inline"] >= 2  # the paragraph and the link's text
    assert calls["skip"] >= 1  # the link label, scanned
    assert inspect.signature(block_tokenize).parameters.keys() == {"state", "startLine", "endLine"}


def test_an_assigned_validateLink_decides_which_links_are_links() -> None:
    md = parser()
    assert not any(t.type == "link_open" for t in md.parseInline("[x](javascript:y)")[0].children)
    md.validateLink = lambda url: True  # type: ignore[method-assign]
    assert any(t.type == "link_open" for t in md.parseInline("[x](javascript:y)")[0].children)


def test_the_states_have_the_fields_the_wrappers_read() -> None:
    md = parser()
    seen: dict[str, Any] = {}

    def block_probe(name: str, rule: Callable[..., bool]) -> Callable[..., bool]:
        def wrapped(state: StateBlock, start: int, end: int, silent: bool) -> bool:
            matched = rule(state, start, end, silent)
            if matched and not silent:
                seen["block"] = state
                seen["block_line"] = state.line
            return matched

        return wrapped

    def inline_note(state: StateInline, name: str, start: int, first_token: int) -> None:
        seen["inline"], seen["start"], seen["first_token"] = state, start, first_token
        seen["pos"] = state.pos

    heading = md.block.ruler.__rules__[md.block.ruler.__find__("heading")]
    md.block.ruler.at("heading", block_probe("heading", heading.fn), {"alt": heading.alt})
    wrap_inline_rules(md, lambda name, rule: recording(name, rule, inline_note), ["link"])
    md.parse("# title\n\nsee [text](https://x.test)\n", {})

    block: StateBlock = seen["block"]
    for name in ("bMarks", "eMarks", "tShift"):
        marks = getattr(block, name)
        assert isinstance(marks, list) and all(isinstance(m, int) for m in marks), name
    assert seen["block_line"] == 1 and isinstance(block.env, dict) and isinstance(block.level, int)

    state: StateInline = seen["inline"]
    assert state.src[seen["start"] : seen["pos"]] == "[text](https://x.test)"
    pushed = state.tokens[seen["first_token"] :]  # the pending text, flushed, then the link
    assert isinstance(state.tokens, list) and "link_open" in [t.type for t in pushed]
    assert isinstance(state.posMax, int) and isinstance(state.level, int)
    assert isinstance(state.env, dict) and state.md is md
    assert state.md.helpers.parseLinkLabel is parseLinkLabel
    assert state.md.helpers.parseLinkDestination is parseLinkDestination


def test_the_helpers_and_constants_the_code_imports() -> None:
    md = parser()
    state = StateInline("[label](dest) x", md, {}, [])
    assert parseLinkLabel(state, 0, True) == 6 and state.pos == 0
    found = parseLinkDestination("(dest) x", 1, 8)
    assert found.ok and found.pos == 5 and found.str == "dest"
    assert isinstance(MD_TRIM_CHARS, str) and " " in MD_TRIM_CHARS and "\n" in MD_TRIM_CHARS
    assert isStrSpace(" ") and isStrSpace("\t") and not isStrSpace("x")
    assert md.options["maxNesting"] > 0  # what tokenize and skipToken compare the level with


# The code paths that stand on them.


def test_source_spans_and_offsets_come_from_the_wrapped_rules() -> None:
    text = (
        "# Head *em* [l](javascript:x)\n\n"
        "| a | `b` |\n|---|---|\n| c | [d](e) |\n\n"
        '[ref]: http://y "t"\n'
    )
    parsed = parse_source(text)
    assert parsed.complete
    heading, *cells = parsed.inlines
    assert [s.rule for s in heading.spans][-1] == "link"  # a javascript: link is still a link
    link = heading.spans[-1]
    assert heading.content[link.start : link.end] == "[l](javascript:x)" and link.label == (11, 12)
    for block in parsed.inlines:  # every character maps back to the same one in the source
        assert "".join(parsed.src[o] for o in block.offsets[:-1]) == block.content
    assert [c.content for c in cells] == ["a", "`b`", "c", "[d](e)"]
    assert all(c.in_table for c in cells) and cells[1].spans[0].rule == "backticks"
    assert [parsed.src[a:b] for a, b in parsed.references] == ['[ref]: http://y "t"']


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(">" * (MAX_NESTING + 50) + " x", id="blocks"),
        pytest.param("[" * (MAX_NESTING + 50) + "x](y)", id="link-labels"),
    ],
)
def test_nesting_the_parser_gives_up_on_is_noticed(text: str) -> None:
    assert not parse_source(text).complete


def test_comment_prose_blanks_what_github_hides() -> None:
    body = normalize(
        "@bot review please\n\n"
        '![@bot fix](x.png) [t](https://u.test "@bot fix") `@bot fix` <span title="@bot fix">x</span>\n'
    )
    shown = prose(body).text
    assert shown.startswith("@bot review please\n")
    assert shown.count("@bot") == 1


def test_hidden_text_is_dropped_from_untrusted_markdown() -> None:
    out = drop_hidden_text(
        'See ![do this](x.png "and this") and [the docs](https://d.test "secret title") '
        '<b title="hide">bold</b>.\n\n[ref]: https://r.test "ref title"\n'
    )
    assert (
        out == "See [image] and [the docs](https://d.test) <b>bold</b>.\n\n[ref]: https://r.test\n"
    )


def test_the_operator_page_renders_safe_links_only() -> None:
    html = markdown("[x](javascript:alert(1)) [y](https://ok.test)", lambda text: text)
    assert '<a href="https://ok.test" rel="nofollow noopener noreferrer">y</a>' in html
    assert "javascript:" not in html.split("<a ", 1)[-1]
