"""Tests for policies/decide.py: reading `decide`'s answer and checking it against the question."""

from __future__ import annotations

import dataclasses

import pytest

from policies.decide import (
    MAX_ANSWER,
    Answer,
    Chosen,
    Question,
    Refused,
    approved_by,
    choose,
    decision_args,
    head_moved,
    no_answer,
    no_arguments,
    not_resumable,
    parse_answer,
)
from policies.outcome import OTHER_OPTION, PROVIDE_OPTION, AskedRisk, Blocked

BLOCKED = Blocked(
    decision="Which command fails?",
    why="",
    options=("`app start` fails", "`app build` fails", OTHER_OPTION),
    default="`app start` fails",
    risk="",
    answer="@app decide 1",
    answer_own='@app decide "<your own answer>"',
)
QUESTION = Question("wf_0123456789ab", BLOCKED)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param("1", Answer(option=1), id="number"),
        pytest.param("  #2 ", Answer(option=2), id="hash"),
        pytest.param("3.", Answer(option=3), id="dot"),
        pytest.param("0", Answer(option=0), id="zero-is-a-number"),
        pytest.param('"use the cache"', Answer(text="use the cache"), id="quoted"),
        pytest.param("use the cache", Answer(text="use the cache"), id="unquoted"),
        pytest.param("“use  the\ncache”", Answer(text="use the cache"), id="curly-folded"),
        pytest.param("'2'", Answer(text="2"), id="quoted-number-is-text"),
        pytest.param('"unclosed', Answer(text="unclosed"), id="unclosed-quote"),
        pytest.param("2 because it is faster", Answer(text="2 because it is faster"), id="more"),
        pytest.param("1234567", Answer(text="1234567"), id="too-long-for-a-number"),
        pytest.param("", None, id="empty"),
        pytest.param('""', None, id="empty-quotes"),
        pytest.param(" ?! ", None, id="punctuation"),
    ],
)
def test_parse_answer(args: str, expected: Answer | None) -> None:
    assert parse_answer(args) == expected


def test_a_long_answer_is_cut() -> None:
    answer = parse_answer("x " * MAX_ANSWER)
    assert answer is not None and len(answer.text) <= MAX_ANSWER


@pytest.mark.parametrize(
    ("answer", "question", "expected"),
    [
        pytest.param(Answer(option=2), QUESTION, Chosen("`app build` fails", 2), id="option"),
        pytest.param(Answer(text="neither"), QUESTION, Chosen("neither", None), id="own-words"),
        pytest.param(
            Answer(option=9),
            QUESTION,
            Refused(
                "There is no option 9: the question of run `wf_0123456789ab` has options 1, 2 "
                'or 3. Reply `@app decide 1` with the number you choose, or `@app decide "<your '
                'own answer>"`.'
            ),
            id="out-of-range",
        ),
        pytest.param(Answer(option=0), QUESTION, "There is no option 0", id="zero-out-of-range"),
        pytest.param(
            Answer(option=3),
            QUESTION,
            Refused('Option 3 asks for your own words: reply `@app decide "<your own answer>"`.'),
            id="open-option",
        ),
        pytest.param(Answer(option=1), None, "There is no BLOCKED question", id="no-question"),
        pytest.param(
            Answer(option=1),
            Question("wf_0123456789ab", BLOCKED, answered_by="wf_00000000beef"),
            "already answered: run `wf_00000000beef` follows it up",
            id="answered",
        ),
    ],
)
def test_choose(answer: Answer, question: Question | None, expected: object) -> None:
    got = choose(answer, question, app_slug="app")
    if isinstance(expected, str):
        assert isinstance(got, Refused) and expected in got.reply
    else:
        assert got == expected


def test_one_option_is_named_alone() -> None:
    one = Question("wf_1", Blocked("d", "", (PROVIDE_OPTION,), PROVIDE_OPTION, "", "a"))
    got = choose(Answer(option=2), one, app_slug="app")
    assert isinstance(got, Refused) and "has options 1." in got.reply


def test_decision_args_record_the_answer_and_what_it_answers() -> None:
    assert decision_args(Chosen("`app build` fails", 2), QUESTION, by="maint") == {
        "text": "`app build` fails",
        "by": "maint",
        "option": 2,
        "question": "Which command fails?",
        "blocked_run": "wf_0123456789ab",
    }


def test_the_other_replies_say_what_to_do() -> None:
    assert "`@app decide 1`" in no_answer("app").reply
    assert "cannot be resumed by `decide` yet" in not_resumable("review", "app").reply
    assert "`@app help`" in not_resumable("review", "app").reply
    assert "Run `wf_1` cannot be resumed" in no_arguments("wf_1").reply


def test_a_moved_head_is_named_with_the_one_asked_about_and_what_to_do() -> None:
    reply = head_moved("wf_1", asked_at="a" * 40, head="b`c\n" + "d" * 40, app_slug="app").reply
    assert "`wf_1`" in reply and f"`{'a' * 12}`" in reply and f"`bc{'d' * 10}`" in reply
    assert "nothing was resumed" in reply and "`@app review`" in reply
    assert "\n" not in reply


RISKS = (
    AskedRisk("dependencies", "change `package.json`"),
    AskedRisk("submodule", "move `vendor/lib` from `a1` to `b2`"),  # any kind: compared as text
)
RISK_REPORT = Blocked(
    decision="This fix would change `package.json`. Should it go ahead?",
    why="",
    options=("Go ahead", "Attach a patch", "Make it without those", "Do nothing"),
    default="Do nothing",
    risk="",
    answer="@app decide 4",
    risks=RISKS,
    approving=("Go ahead", "Attach a patch"),
)


@pytest.mark.parametrize(
    ("blocked", "option", "approved"),
    [
        pytest.param(RISK_REPORT, 1, frozenset(RISKS), id="go-ahead"),
        pytest.param(RISK_REPORT, 2, frozenset(RISKS), id="patch"),
        pytest.param(RISK_REPORT, 3, frozenset(), id="narrow"),
        pytest.param(RISK_REPORT, 4, frozenset(), id="stop"),
        pytest.param(RISK_REPORT, None, frozenset(), id="free-text"),
        pytest.param(RISK_REPORT, 5, frozenset(), id="out-of-range"),
        pytest.param(RISK_REPORT, 0, frozenset(), id="zero"),
        pytest.param(RISK_REPORT, True, frozenset(), id="a-bool-is-no-number"),
        pytest.param(RISK_REPORT, "1", frozenset(), id="text-is-no-number"),
        pytest.param(BLOCKED, 1, frozenset(), id="a-models-question"),
        pytest.param(
            dataclasses.replace(RISK_REPORT, risks=(), approving=()),
            1,
            frozenset(),
            id="the-same-options-without-the-apps-record",
        ),
    ],
)
def test_only_the_apps_own_approving_option_approves_its_recorded_risks(
    blocked: Blocked, option: object, approved: frozenset[AskedRisk]
) -> None:
    assert approved_by(blocked, option) == approved
