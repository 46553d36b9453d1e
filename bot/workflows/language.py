"""The language of what the app writes with a model: `language` in `.github/bot.yml`.

The executor puts the repository's `language` in a run's `args` (None when the file sets
none). Workflows add `language_note(args)` to the task of every agent whose text is
published (a triage's conclusion, an answer, a review's findings and summary, a fix's plan,
commit and pull request text, and any BLOCKED report they fill), and to no other: the
reports only other agents read keep their prompts, so a `decide` follow-up still replays
them. What the app writes without a model (help, status, errors, its fixed headings and
templates) stays English.

The value is the repository's text: the config accepts only a language's name or tag
(`policies.config.checked_language`), and it is checked again here, so a value that could
pass for the prompt's own structure (recorded by an older version, or given to a workflow
some other way) never reaches a prompt: the note then asks for the issue's own language.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.config import checked_language

SCOPE = (
    " This covers all the text of your result that people read (summaries, findings, "
    "answers, questions, a BLOCKED report) and commit messages. Code, file paths, "
    "identifiers and quoted text stay as they are."
)


def language_note(args: Mapping[str, Any]) -> str:
    """A paragraph to append to a task: the language to publish in."""
    try:
        language = checked_language(args.get("language"))
    except ValueError:
        language = None
    where = language or "the language of the issue or pull request"
    return f"\n\nWrite everything you publish in {where}.{SCOPE}"
