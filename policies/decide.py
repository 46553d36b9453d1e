"""The `decide` command: a maintainer's answer to a BLOCKED report, read and checked purely.

`@<app> decide 2` chooses option 2 of the newest BLOCKED report on the issue or pull request;
`@<app> decide "use the cache"` (quotes optional) answers in one's own words. `parse_answer`
reads the words after the command; `choose` checks them against the BLOCKED question (is
there one, was it answered already, is the number one of its options) and says either what
was chosen or the short reply that explains why nothing runs. `decision_args` is the record
of the answer the follow-up run's workflow receives as `args["decision"]`.

`approved_by` is what an answer approves: the risks the app recorded on its own report, and
only when the answer picks, by number, one of the options the app recorded as approving
them. Free text, and any option a model wrote, approves nothing: it steers the follow-up
(narrows it, or refuses), and the follow-up's change is judged as if no one had approved it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from policies.outcome import (
    OTHER_OPTION,
    PROVIDE_OPTION,
    AskedRisk,
    Blocked,
    answer_command,
    answer_own_command,
)

__all__ = [
    "MAX_ANSWER",
    "Answer",
    "Chosen",
    "Question",
    "Refused",
    "already_answered",
    "approved_by",
    "choose",
    "decision_args",
    "head_moved",
    "no_answer",
    "no_arguments",
    "not_resumable",
    "parse_answer",
]

MAX_ANSWER = 1_000
"""Characters of a free-text answer kept: it goes into a prompt and a comment."""

_NUMBER = re.compile(r"#?([0-9]{1,6})[.)]?")
_NOT_HEX = re.compile(r"[^0-9a-f]")
_QUOTES = {'"': '"', "'": "'", "\u201c": "\u201d", "\u2018": "\u2019", "\u00ab": "\u00bb"}
# Options that ask for the person's own words: choosing them by number says nothing.
_OPEN_OPTIONS = frozenset({OTHER_OPTION.lower(), PROVIDE_OPTION.lower()})


@dataclass(frozen=True, slots=True)
class Answer:
    """What `decide` was given: an option's number, or the person's own words."""

    option: int | None = None
    text: str = ""


@dataclass(frozen=True, slots=True)
class Question:
    """A run's BLOCKED question, and the run that already answers it, if one does."""

    run_id: str
    blocked: Blocked
    answered_by: str | None = None


@dataclass(frozen=True, slots=True)
class Chosen:
    """The answer to give the follow-up run: the option's text or the person's own words."""

    text: str
    option: int | None


@dataclass(frozen=True, slots=True)
class Refused:
    """Why nothing runs, as the short Markdown reply that says so."""

    reply: str


def _flat(text: str) -> str:
    return " ".join(text.split())


def parse_answer(args: str) -> Answer | None:
    """The answer in the words after `decide`, or None when there is none.

    A number alone (`2`, `#2`, `2.`) is an option; anything else is the person's own words,
    with one pair of surrounding quotes removed, whitespace folded and cut at MAX_ANSWER.
    """
    text = _flat(args)
    number = _NUMBER.fullmatch(text)
    if number is not None:
        return Answer(option=int(number.group(1)))
    if text and text[0] in _QUOTES:
        closing = _QUOTES[text[0]]
        text = text[1:-1] if len(text) > 1 and text.endswith(closing) else text[1:]
        text = text.strip()
    if not any(char.isalnum() for char in text):
        return None
    return Answer(text=text[:MAX_ANSWER].rstrip())


def _numbers(count: int) -> str:
    shown = [str(n) for n in range(1, count + 1)]
    return shown[0] if count == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]


def choose(answer: Answer, question: Question | None, *, app_slug: str) -> Chosen | Refused:
    """What the answer chooses for `question` (the newest BLOCKED run here, None when there is
    none), or why it cannot be given."""
    own = f"`{answer_own_command(app_slug)}`"
    if question is None:
        return Refused(
            "There is no BLOCKED question to answer here: `decide` answers the newest run on "
            "this issue or pull request that stopped to ask for a decision, and none did."
        )
    if question.answered_by is not None:
        return already_answered(question.run_id, question.answered_by)
    options = question.blocked.options
    if answer.option is None:
        return Chosen(text=answer.text, option=None)
    if not 1 <= answer.option <= len(options):
        return Refused(
            f"There is no option {answer.option}: the question of run `{question.run_id}` has "
            f"options {_numbers(len(options))}. Reply `{answer_command(app_slug, 1)}` with "
            f"the number you choose, or {own}."
        )
    text = options[answer.option - 1]
    if text.lower() in _OPEN_OPTIONS:
        return Refused(f"Option {answer.option} asks for your own words: reply {own}.")
    return Chosen(text=text, option=answer.option)


def decision_args(chosen: Chosen, question: Question, *, by: str) -> dict[str, str | int | None]:
    """`args["decision"]` of the follow-up run: the answer, who gave it, and what it answers."""
    return {
        "text": chosen.text,
        "by": by,
        "option": chosen.option,
        "question": question.blocked.decision,
        "blocked_run": question.run_id,
    }


def approved_by(blocked: Blocked, option: object) -> frozenset[AskedRisk]:
    """The risks an answer that chose `option` (a number, None for free text) of `blocked`
    approves: those the app recorded on it when that option is one it recorded as approving
    them, else none. `blocked` is the stored record of the question, never the answer's text."""
    if not isinstance(option, int) or isinstance(option, bool):
        return frozenset()
    if not 1 <= option <= len(blocked.options):
        return frozenset()
    if blocked.options[option - 1] not in blocked.approving:
        return frozenset()
    return frozenset(blocked.risks)


def already_answered(run_id: str, follow_up: str) -> Refused:
    """The reply when another `decide` already answered the question of run `run_id`."""
    return Refused(
        f"The question of run `{run_id}` was already answered: run `{follow_up}` follows it "
        "up. If that run stops to ask again, answer its question."
    )


def no_answer(app_slug: str) -> Refused:
    """The reply when `decide` came with no answer (the trigger policy skips most of these)."""
    return Refused(
        f"Say what you decide: `{answer_command(app_slug, 1)}` for option 1, or "
        f"`{answer_own_command(app_slug)}`."
    )


def not_resumable(workflow: str, app_slug: str) -> Refused:
    """The reply when the blocked run's workflow cannot be resumed by `decide`."""
    return Refused(
        f"Runs of `{_flat(workflow)[:40]}` cannot be resumed by `decide` yet: give the command "
        f"again with your answer in it, or see `@{app_slug} help`."
    )


def _short(sha: str) -> str:
    return _NOT_HEX.sub("", sha.lower())[:12]


def head_moved(run_id: str, *, asked_at: str, head: str, app_slug: str) -> Refused:
    """The reply when the pull request's head moved since review run `run_id` stopped to ask:
    its question was about the code at `asked_at`, so nothing is resumed (a decision about one
    version of the code is not applied to another); a review of the new head answers again."""
    return Refused(
        f"The question of run `{run_id}` was asked about `{_short(asked_at)}`, and the pull "
        f"request's head has moved to `{_short(head)}` since, so nothing was resumed: a "
        f"decision about one version of the code is not applied to another. Comment "
        f"`@{app_slug} review` to review the new head; if it stops to ask again, answer its "
        "question."
    )


def no_arguments(run_id: str) -> Refused:
    """The reply when the blocked run's arguments were not recorded (a run from before
    `decide` existed), so it cannot be resumed with the same prompts."""
    return Refused(
        f"Run `{run_id}` cannot be resumed: it ran before this app recorded what a run needs "
        "to be resumed. Start it again with your answer in the request."
    )
