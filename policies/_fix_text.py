"""The text and names `fix` writes: the `bot/fix-*` branch, the pull request, the trailer.

Everything here is built from values the caller passes in; titles, commands, summaries,
assumptions and the agent's commit messages come from people or models, so they pass
through `policies.untrusted_text` (code spans no backtick can close early, no live mentions,
no closing keywords, plain fences). The only closing keyword in what `fix` opens is the
app's own `Fixes #<n>` line, and the only trailer in what it pushes is the app's own
`Co-authored-by`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from policies.outcome import UsageSummary
from policies.untrusted_text import code_span, defuse, untrusted

__all__ = [
    "CheckResult",
    "agent_commit_message",
    "branch_name",
    "co_author_trailer",
    "code_span",
    "is_fix_branch",
    "printable",
    "pull_request_text",
    "with_trailer",
]

_TITLE_MAX = 100
_SUMMARY_MAX = 20_000
_SLUG_MAX = 40
_LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?")


@dataclass(frozen=True, slots=True)
class CheckResult:
    """What the repository's check command did; `exit_code` None when it timed out."""

    command: str
    exit_code: int | None
    timeout: int = 0


def printable(text: str) -> str:
    """`text` on one line, each character that does not print replaced by `?`."""
    return "".join(c if c.isprintable() else "?" for c in " ".join(text.split()))


# --- branch -------------------------------------------------------------------------------


def _slug(title: str) -> str:
    ascii_text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    slug = ""
    for word in re.findall(r"[a-z0-9]+", ascii_text.lower()):
        joined = f"{slug}-{word}" if slug else word
        if len(joined) > _SLUG_MAX:
            return slug or word[:_SLUG_MAX]
        slug = joined
    return slug


def branch_name(issue_number: int, title: str, existing: Collection[str]) -> str:
    """`bot/fix-<n>-<slug>`, with `-2`, `-3`, ... when that name is taken.

    The slug holds only lower-case ASCII letters, digits and single dashes, so git accepts it.
    Names in `existing` may carry `refs/heads/`; they are compared without regard to case.
    """
    if issue_number < 1:
        raise ValueError(f"an issue number is positive, got {issue_number}")
    slug = _slug(title)
    base = f"bot/fix-{issue_number}-{slug}" if slug else f"bot/fix-{issue_number}"
    taken = {name.removeprefix("refs/heads/").lower() for name in existing}
    name, n = base, 1
    while name.lower() in taken:
        n += 1
        name = f"{base}-{n}"
    return name


def is_fix_branch(name: str, issue_number: int) -> bool:
    """Whether `name` is a branch `branch_name` could have made for this issue."""
    return bool(
        re.fullmatch(rf"bot/fix-{issue_number}(?:-[a-z0-9-]+)?", name.removeprefix("refs/heads/"))
    )


# --- pull request and commit text ---------------------------------------------------------


def _check_line(check: CheckResult | None) -> str:
    if check is None:
        return "Not configured: set `fix.check_command` in `.github/bot.yml` to run one."
    if check.exit_code is None:
        return f"{code_span(check.command)} timed out after {check.timeout} s."
    if check.exit_code == 0:
        return f"{code_span(check.command)} passed."
    return f"{code_span(check.command)} failed with exit code {check.exit_code}."


def _usage_line(usage: UsageSummary) -> str:
    cost = "cost unknown" if usage.cost is None else f"cost ${usage.cost:.4f}"
    return (
        f"{usage.input_tokens:,} input and {usage.output_tokens:,} output tokens, {cost}, "
        f"{usage.wall_seconds:.0f} s."
    )


def pull_request_text(
    *,
    number: int,
    title: str,
    summary: str,
    check: CheckResult | None,
    assumptions: Sequence[str],
    usage: UsageSummary,
    closes: bool = True,
) -> tuple[str, str]:
    """The draft pull request's title and body for a fix of issue or pull request `number`.

    `summary` (what changed and why) is already cleaned of HTML by the caller; it and the
    assumptions are defused here, so the app's own line is the body's only closing keyword.
    With `closes` the body says `Fixes #<n>`, so merging closes the issue; otherwise it only
    refers to it.
    """
    flat = defuse(printable(title).strip())
    head = f"Fix: {flat}" if flat else f"Fix #{number}"
    if len(head) > _TITLE_MAX:
        head = head[: _TITLE_MAX - 1].rstrip() + "…"
    text = untrusted(summary).strip() or "The change is in the commits of this pull request."
    if len(text) > _SUMMARY_MAX:
        text = text[:_SUMMARY_MAX].rstrip() + "\n\n(cut here)"
    listed = [f"- {untrusted(' '.join(a.split()))}" for a in assumptions if a.strip()]
    listed = listed or ["None."]
    body = "\n".join(
        [
            f"Fixes #{number}" if closes else f"Requested in #{number}.",
            "",
            "## What changed and why",
            "",
            text,
            "",
            "## Check",
            "",
            _check_line(check),
            "",
            "## Assumptions",
            "",
            *listed,
            "",
            "---",
            f"Usage: {_usage_line(usage)}",
        ]
    )
    return head, body


def co_author_trailer(login: str, user_id: int) -> str:
    """The `Co-authored-by` trailer for a GitHub user, with their noreply address."""
    if not _LOGIN.fullmatch(login) or user_id < 1:
        raise ValueError(f"not a GitHub login and user id: {login!r}, {user_id}")
    return f"Co-authored-by: {login} <{user_id}+{login}@users.noreply.github.com>"


# A trailer line: `Token: value`, the token one word of letters, digits and dashes.
_TRAILER = re.compile(r"^[ \t]*[A-Za-z0-9][A-Za-z0-9-]*[ \t]*:[ \t]*\S")
# The trailers that credit or vouch for a person, wherever in a message they stand.
_PERSON_TRAILER = re.compile(r"^[ \t]*[A-Za-z0-9][A-Za-z0-9-]*-by[ \t]*:", re.IGNORECASE)
_MESSAGE_SUBJECT = 72
_MESSAGE_BODY = 2_000
_NO_MESSAGE = "Apply the requested fix"


def without_trailers(body: str) -> str:
    """`body` without trailers: no `...-by:` line anywhere (`Signed-off-by`, `Reviewed-by`,
    `Co-authored-by`, ...), and no final paragraph made only of `Token: value` lines, which
    git and GitHub read as the message's trailers."""
    kept = [line for line in body.split("\n") if not _PERSON_TRAILER.match(line)]
    paragraphs = "\n".join(kept).strip().split("\n\n")
    last = [line for line in paragraphs[-1].split("\n") if line.strip()]
    if last and all(_TRAILER.match(line) for line in last):
        paragraphs.pop()
    return "\n\n".join(paragraphs).strip()


def agent_commit_message(messages: Sequence[str]) -> str:
    """The agent's commit messages (oldest first) as the one message the app commits.

    The first message's subject (one printable line, cut to 72 characters) and body, then
    the later messages' subjects as a list; no trailers of the agent's, no closing keywords
    or mentions (the app adds its own trailer with `with_trailer`)."""
    texts = [m.strip() for m in messages if m.strip()]
    if not texts:
        return _NO_MESSAGE
    first = texts[0].splitlines()
    subject = defuse(printable(first[0])[:_MESSAGE_SUBJECT].strip()) or _NO_MESSAGE
    if _PERSON_TRAILER.match(subject):
        subject = _NO_MESSAGE
    body = without_trailers("\n".join(first[1:]))
    rest = [printable(m.splitlines()[0]) for m in texts[1:]]
    rest = [line for line in rest if not _PERSON_TRAILER.match(line)]
    if rest:
        body = "\n".join([body, *(f"- {line}" for line in rest)]).strip()
    body = "".join(c for c in body if c.isprintable() or c == "\n")[:_MESSAGE_BODY]
    body = defuse(without_trailers(body))
    return f"{subject}\n\n{body}" if body else subject


def with_trailer(message: str, trailer: str) -> str:
    """`message` with `trailer` appended as a trailer (once, after a blank line)."""
    text = message.rstrip()
    lines = text.splitlines()
    if trailer in lines:
        return text + "\n"
    after_trailers = len(lines) > 1 and lines[-1].startswith("Co-authored-by: ")
    separator = "\n" if after_trailers else "\n\n"
    return f"{text}{separator}{trailer}\n"
