"""What the app says on GitHub when `.github/bot.yml` cannot be used: fixed text around the error.

A broken config turns the app off in that repository (`policies.triggers`: every delivery
meant for it skips `invalid_config`). So that the people who can fix it learn of it, the skip
says where it is answered, in its `extra[NOTICE]`:

- `REPLY`: a writer's command (`@app review|fix|ask ...`) gets a reply on its issue or pull
  request, made by `config_error_reply`;
- `CHECK`: an automatic pull request event posts one neutral check run on the head, with
  `config_error_check` as its output;
- nothing else is answered (an opened issue, someone without write access: no noise).

The error text is the `ConfigError`'s, one line per problem: `FILE line L, column C: what`
(line and column when known), where FILE is `.github/bot.yml` or the file `_extends` names,
and `what` quotes the repository's own keys and values. So the file and each error are shown
as code spans (`policies.untrusted_text.code_span`): they cannot ping anyone, close an issue,
hide a comment or turn into Markdown. The sentences around them are the app's own.
"""

from __future__ import annotations

import re

from policies.untrusted_text import code_span

__all__ = [
    "CHECK",
    "CHECK_TITLE",
    "MAX_PROBLEMS",
    "MAX_PROBLEM_CHARS",
    "NOTICE",
    "REPLY",
    "config_error_check",
    "config_error_reply",
    "problem_lines",
]

NOTICE = "notice"
"""The key of an `invalid_config` Skip's `extra` that says where it is answered."""
REPLY = "reply"
CHECK = "check"

MAX_PROBLEMS = 10
"""Problems listed; the rest are counted."""
MAX_PROBLEM_CHARS = 300
"""Characters of one problem's text shown; a longer one is cut."""

# `FILE line L, column C: what`, `FILE line L: what` or `FILE: what` (ConfigProblem.render).
_PROBLEM = re.compile(
    r"(?P<file>\S+?)(?: (?P<where>line \d+(?:, column \d+)?))?: (?P<what>.+)", re.DOTALL
)
CHECK_TITLE = "Configuration error: the app is off in this repository"
_STAYS_OFF = (
    "The app stays off in this repository until the file is fixed on the default branch; "
    "the next event or command after that is handled as usual."
)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def problem_lines(detail: str) -> list[str]:
    """Markdown list items, one per problem: the file and the error as code, the line and
    column as the app's own words; at most MAX_PROBLEMS, then how many more."""
    problems = [line for line in detail.splitlines() if line.strip()] or [detail]
    items: list[str] = []
    for line in problems[:MAX_PROBLEMS]:
        match = _PROBLEM.fullmatch(line.strip())
        if match is None:
            items.append(f"- {code_span(_cut(line.strip(), MAX_PROBLEM_CHARS))}")
            continue
        where = f" {match.group('where')}" if match.group("where") else ""
        what = code_span(_cut(match.group("what"), MAX_PROBLEM_CHARS))
        items.append(f"- {code_span(match.group('file'))}{where}: {what}")
    if len(problems) > MAX_PROBLEMS:
        items.append(f"- and {len(problems) - MAX_PROBLEMS} more")
    return items


def _files(detail: str) -> list[str]:
    found: list[str] = []
    for line in detail.splitlines():
        match = _PROBLEM.fullmatch(line.strip())
        if match is not None and match.group("file") not in found:
            found.append(match.group("file"))
    return found


def _lead(detail: str) -> str:
    files = _files(detail)
    named = code_span(files[0]) if len(files) == 1 else "The repository's configuration"
    return f"{named} cannot be used:"


def config_error_reply(detail: str, *, command: str | None) -> str:
    """The reply to a writer's command while the config is broken (Markdown, no markers)."""
    lines = ["### Configuration error", "", _lead(detail), "", *problem_lines(detail), ""]
    refused = f"{code_span(command)} was not run. " if command else ""
    lines.append(refused + _STAYS_OFF)
    return "\n".join(lines)


def config_error_check(detail: str) -> dict[str, str]:
    """The `output` (title, summary) of the neutral check run on a pull request's head."""
    summary = "\n".join([_lead(detail), "", *problem_lines(detail), "", _STAYS_OFF])
    return {"title": CHECK_TITLE, "summary": summary}
