"""A maintainer's answer to a BLOCKED question, as trusted text for a follow-up run's prompts.

A `decide` follow-up runs the blocked workflow again with the same arguments plus
`args["decision"]` (see `policies.decide.decision_args`): `{"text", "by", "option",
"question", "blocked_run"}`. Workflows add `decision_note(args)` to the task of every agent
that comes after the point where the run blocked, and to no agent before it: those earlier
prompts stay byte-identical, so the engine replays their recorded results instead of paying
for them again. With no decision the note is empty, so a first run's prompts do not change.

The answer was written by a person with write access, which is why it goes in the task and
not among the fenced context. Its text (and the question, which a model wrote) is still
folded onto one line, cut short and stripped of code fences and of the context's fence token,
so it cannot pass for the prompt's own structure.

A review's advisor, whose prompt is mostly fenced context, gets the answer with the rest of
it: `decision_context` gives a block fenced as written by that maintainer (trusted `data`,
`source="decision"`, `author=<login>`), folded the same way, and a short paragraph for the
task that says what the block is and that it is a decision.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from bot.runs.context import Part, assemble, plain

_TEXT = 1_000
_QUESTION = 500
_LOGIN_UNSAFE = re.compile(r"[^A-Za-z0-9-]")
_BACKTICKS = re.compile(r"`+|~{3,}")


def _line(value: object, limit: int, fence: str) -> str:
    text = plain(value if isinstance(value, str) else "")
    if fence:
        text = text.replace(fence, "[fence]")
    text = _BACKTICKS.sub("'", text).replace('"', "'")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def decision_note(args: Mapping[str, Any]) -> str:
    """The decision in `args["decision"]` as a paragraph to append to a task; "" without one."""
    decision = args.get("decision")
    if not isinstance(decision, Mapping):
        return ""
    fence = str(args.get("fence") or "")
    text = _line(decision.get("text"), _TEXT, fence)
    if not text:
        return ""
    login = _LOGIN_UNSAFE.sub("", str(decision.get("by") or ""))[:39] or "a maintainer"
    question = _line(decision.get("question"), _QUESTION, fence)
    option = decision.get("option")
    chose = f"chose option {option}" if isinstance(option, int) else "answered in their own words"
    asked = f' "{question}"' if question else ""
    return (
        "\n\n## The maintainer's decision\n\n"
        f"An earlier run of this task stopped to ask{asked}. A maintainer with write access "
        f'to the repository, @{login}, {chose}: "{text}". Treat it as a decision, not as '
        "data: act on it, do not ask the same question again, and say in your result how it "
        "shaped your conclusion."
    )


def _login(decision: Mapping[str, Any]) -> str:
    return _LOGIN_UNSAFE.sub("", str(decision.get("by") or ""))[:39]


def decision_context(args: Mapping[str, Any]) -> tuple[str, str]:
    """The decision in `args["decision"]` as (a paragraph for the task, a block of context
    fenced with `args["fence"]` as written by the maintainer); ("", "") without one."""
    decision = args.get("decision")
    fence = str(args.get("fence") or "")
    if not isinstance(decision, Mapping) or not fence:
        return "", ""
    text = _line(decision.get("text"), _TEXT, fence)
    if not text:
        return "", ""
    login = _login(decision)
    question = _line(decision.get("question"), _QUESTION, fence)
    option = decision.get("option")
    chose = f"Option {option}" if isinstance(option, int) else "In their own words"
    lines = [f"Question: {question}"] if question else []
    lines.append(f"{chose}: {text}")
    block, _, _ = assemble(
        [Part("decision", "\n".join(lines), True, login or None)],
        fence=fence,
        budget_tokens=1_000_000,
    )
    who = f"@{login}" if login else "a maintainer"
    note = (
        "\n\n## The maintainer's decision\n\n"
        "An earlier run of this task stopped to ask a maintainer a question. "
        f"{who}, who has write access to the repository, answered it: the question and "
        'the answer are in the block whose source is "decision" below, written by them. '
        "Treat the answer as their decision, not as data: act on it, do not ask the same "
        "question again, and say in your result how it shaped your conclusion. Fill "
        "`blocked` only for a different decision that is still needed."
    )
    return note, block
