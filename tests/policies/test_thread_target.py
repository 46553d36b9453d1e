"""Where the answer to a command in a review thread goes."""

from __future__ import annotations

import pytest

from policies.thread_target import (
    ASKING_COMMENT_GONE,
    FIRST_COMMENT_GONE,
    InThread,
    ThreadTarget,
    TopLevel,
    answers_in_thread,
    thread_target,
    top_level_note,
)


@pytest.mark.parametrize(
    ("comment_id", "listed", "expected"),
    [
        pytest.param(10, {10: None}, InThread(10), id="a-new-thread-is-answered-under-itself"),
        pytest.param(
            11, {10: None, 11: 10}, InThread(10), id="a-reply-is-answered-under-the-first-comment"
        ),
        pytest.param(
            12,
            {10: None, 11: 10, 12: 10},
            InThread(10),
            id="a-later-reply-is-answered-under-the-first-comment-too",
        ),
        pytest.param(
            11, {11: 10}, TopLevel(FIRST_COMMENT_GONE), id="the-first-comment-was-deleted"
        ),
        pytest.param(
            11, {10: None}, TopLevel(ASKING_COMMENT_GONE), id="the-asking-comment-was-deleted"
        ),
        pytest.param(10, {}, TopLevel(ASKING_COMMENT_GONE), id="nothing-listed"),
    ],
)
def test_thread_target(
    comment_id: int, listed: dict[int, int | None], expected: ThreadTarget
) -> None:
    assert thread_target(comment_id, listed) == expected


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        pytest.param("ask", True, id="ask"),
        pytest.param("fix", True, id="fix"),
        pytest.param("help", True, id="help"),
        pytest.param("status", True, id="status"),
        pytest.param("review", False, id="review-answers-with-the-pull-requests-review"),
    ],
)
def test_answers_in_thread(kind: str, expected: bool) -> None:
    assert answers_in_thread(kind) is expected


def test_top_level_note_says_why_and_links_the_thread_when_it_can() -> None:
    assert top_level_note("gone") == "Answered here rather than in the review thread: gone."
    assert top_level_note("gone", "https://x/1#discussion_r2") == (
        "Answered here rather than in the [review thread](https://x/1#discussion_r2): gone."
    )
