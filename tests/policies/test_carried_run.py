"""A BLOCKED run carried in its own comment: only the app's signed, unaltered line counts."""

from __future__ import annotations

import dataclasses
import secrets

from policies.carried_run import MAX_CHARS, CarriedRun, carried_line, read_carried

KEY = b"k" * 32
RUN = CarriedRun(
    id="wf_0123456789ab",
    workflow="fix",
    target_kind="issue",
    number=7,
    repo="Octo/Hello",
    mode="webhook",
    outcome={"status": "blocked", "blocked": {"options": ["a", "b"]}},
    args={"request": "update ci.yml"},
)


def test_the_line_gives_back_the_run_for_its_repository_and_number() -> None:
    body = f"Blocked: choose.\n{carried_line(RUN, key=KEY)}\n<!-- bot:review-state x -->"
    assert read_carried(body, key=KEY, repo="octo/hello", number=7) == RUN


def test_another_key_number_or_repository_reads_nothing() -> None:
    line = carried_line(RUN, key=KEY)
    assert read_carried(line, key=b"x" * 32, repo="octo/hello", number=7) is None
    assert read_carried(line, key=KEY, repo="octo/hello", number=8) is None
    assert read_carried(line, key=KEY, repo="octo/other", number=7) is None
    assert read_carried(None, key=KEY, repo="octo/hello", number=7) is None


def test_a_line_changed_by_hand_reads_nothing() -> None:
    line = carried_line(RUN, key=KEY)
    mac, text = line.removeprefix("<!-- bot:blocked-run ").removesuffix(" -->").split(" ")
    flipped = text[:-6] + ("A" if text[-6] != "A" else "B") + text[-5:]
    assert (
        read_carried(
            f"<!-- bot:blocked-run {mac} {flipped} -->", key=KEY, repo="octo/hello", number=7
        )
        is None
    )


def test_arguments_too_large_are_dropped_the_question_never() -> None:
    big = dataclasses.replace(RUN, args={"context": secrets.token_hex(MAX_CHARS)})
    line = carried_line(big, key=KEY)
    assert len(line) < MAX_CHARS + 200
    read = read_carried(line, key=KEY, repo="octo/hello", number=7)
    assert read is not None and read.args is None and read.outcome == RUN.outcome
