"""Learnings a repository keeps: what maintainers taught the review, and where it applies.

A learning is a short text a person with write permission gave the app, kept per
repository: the reason they wrote when they dismissed one of the app's findings (a reply in
its thread: "intentional: we support Python 3.8 here"), or the words of `@app learn <text>`.
It keeps its author, where it came from (the comment's address) and, for a dismissal, the
finding's category, title and path, which is how a later finding is known to be covered by
it (`covers`). Readers and bots never teach: the caller passes the writers in.

Future reviews get the repository's learnings newest first, at most `PROMPT_COUNT` of them
and `PROMPT_CHARS` characters in all (`for_prompt`); the rest are named as left out, oldest
first. They reach the model as maintainer-written data, fenced below the interaction policy:
a learning that tries to instruct the model is kept as the text it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from policies.review_plan import glob_match
from policies.review_state import normalize_title
from policies.untrusted_text import code_span, untrusted

__all__ = [
    "MAX_TEXT",
    "PROMPT_CHARS",
    "PROMPT_COUNT",
    "TITLE_OVERLAP",
    "Learning",
    "clean_text",
    "covering",
    "covers",
    "for_prompt",
    "number_ranges",
    "reason_reply",
    "render_forgot",
    "render_learned",
    "render_list",
]

MAX_TEXT = 500
"""The most characters of one learning kept; the rest is cut."""
MIN_WORDS = 3
"""A reply of fewer words ("won't fix") gives no reason to learn from."""
PROMPT_COUNT = 30
PROMPT_CHARS = 8_000
TITLE_OVERLAP = 0.5

_WORDS = re.compile(r"\S+")
_FIXED = re.compile(r"^\W*(?:fixed|done|addressed|resolved)\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Learning:
    """One learning of a repository; `number` is its number there, shown and forgotten by."""

    repo: str
    number: int
    text: str
    author: str
    source: str
    """The address of the comment it came from."""
    category: str = ""
    """The dismissed finding's category; empty for `@app learn`."""
    title: str = ""
    """The dismissed finding's title; empty for `@app learn`."""
    paths: tuple[str, ...] = ()
    """The dismissed finding's path (globs allowed); empty for `@app learn`."""
    created_at: float = 0.0


def clean_text(text: str) -> str:
    """A learning's text: one line of single spaces, at most `MAX_TEXT` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_TEXT else flat[: MAX_TEXT - 1].rstrip() + "…"


def reason_reply(
    replies: Sequence[tuple[str, str]],
    *,
    writers: Collection[str],
    is_person: Callable[[str], bool],
    app_slug: str,
) -> int | None:
    """The index of the reply in a dismissed finding's thread that gives the reason, or None.

    It is the first reply by a person with write permission (`writers`, lower-case logins;
    `is_person` is False for bots and the app) that is a reason: at least `MIN_WORDS` words,
    not a command to the app, not a "fixed" note. Nobody else's words are learned."""
    mention = re.compile(rf"(?<![\w-])@{re.escape(app_slug)}(?:\[bot\])?(?![\w-])", re.I)
    for n, (author, body) in enumerate(replies):
        if not author or not is_person(author) or author.lower() not in writers:
            continue
        text = body.strip()
        if mention.search(text) or _FIXED.match(text):
            continue
        if len(_WORDS.findall(text)) >= MIN_WORDS:
            return n
    return None


def _overlap(a: str, b: str) -> float:
    wa, wb = set(normalize_title(a).split()), set(normalize_title(b).split())
    if not wa or not wb:
        return 0.0
    return len(wa & wb) / len(wa | wb)


def covers(learning: Learning, *, path: str, category: str, title: str) -> bool:
    """Whether a finding is one the learning's dismissal already answered: the same category,
    a path the learning names, and mostly the same title words. A learning from `@app learn`
    names no finding: only the verifier can judge what it covers."""
    if not learning.category or not learning.paths:
        return False
    if learning.category != category.strip().lower():
        return False
    if path not in learning.paths and not glob_match(path, learning.paths):
        return False
    return _overlap(learning.title, title) >= TITLE_OVERLAP


def covering(
    learnings: Sequence[Learning], *, path: str, category: str, title: str
) -> Learning | None:
    """The newest learning that covers the finding, or None."""
    for learning in sorted(learnings, key=lambda x: -x.number):
        if covers(learning, path=path, category=category, title=title):
            return learning
    return None


def for_prompt(
    learnings: Sequence[Learning], *, count: int = PROMPT_COUNT, chars: int = PROMPT_CHARS
) -> tuple[list[Learning], list[Learning]]:
    """(shown, left out): the newest learnings within `count` and `chars` characters, newest
    first; those left out, oldest first."""
    newest = sorted(learnings, key=lambda x: -x.number)
    shown: list[Learning] = []
    room = chars
    for learning in newest:
        if len(shown) >= count or len(learning.text) > room:
            break
        shown.append(learning)
        room -= len(learning.text)
    left = sorted(newest[len(shown) :], key=lambda x: x.number)
    return shown, left


def number_ranges(numbers: Sequence[int]) -> str:
    """`#1–#3, #7` for [1, 2, 3, 7]: numbers in runs."""
    out: list[str] = []
    ordered = sorted(set(numbers))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(f"#{ordered[i]}" if i == j else f"#{ordered[i]}–#{ordered[j]}")
        i = j + 1
    return ", ".join(out)


LIST_LIMIT = 50
"""The most learnings one `@app learnings` reply lists; the rest are counted."""


def render_learned(learning: Learning, app_slug: str, *, new: bool) -> str:
    """The reply to `@app learn <text>`."""
    head = "Learned" if new else "Already learned"
    return (
        f"{head} for this repository as learning #{learning.number}: {untrusted(learning.text)}"
        f"\n\n`@{app_slug} learnings` lists them; `@{app_slug} forget {learning.number}` "
        "removes this one."
    )


def render_list(learnings: Sequence[Learning], app_slug: str) -> str:
    """The reply to `@app learnings`: every learning with its number, newest first."""
    if not learnings:
        return (
            "This repository has no learnings yet. A reason given when a finding is declined "
            f"in its thread, or `@{app_slug} learn <text>`, adds one."
        )
    lines = [f"This repository's learnings, newest first ({len(learnings)}):", ""]
    for x in learnings[:LIST_LIMIT]:
        where = f" ({x.category}, {', '.join(code_span(p) for p in x.paths)})" if x.paths else ""
        lines.append(
            f"{x.number}. {untrusted(x.text)} — {untrusted('@' + x.author)}{where}, [source]({x.source})"
            if x.source.startswith("https://")
            else f"{x.number}. {untrusted(x.text)} — {untrusted('@' + x.author)}{where}"
        )
    if len(learnings) > LIST_LIMIT:
        lines.append(f"- … and {len(learnings) - LIST_LIMIT} older ones")
    lines += ["", f"`@{app_slug} forget <n>` removes learning n."]
    return "\n".join(lines)


def render_forgot(gone: Learning | None, number: int, app_slug: str) -> str:
    """The reply to `@app forget <n>`."""
    if gone is None:
        return f"This repository has no learning #{number}. `@{app_slug} learnings` lists them."
    return f"Forgot learning #{number}: {untrusted(gone.text)}"
