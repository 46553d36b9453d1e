"""`--since`: a duration back from now (as `bot redeliver` reads it) or an ISO date or time."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.commands.since import parse_since

NOW = datetime(2024, 5, 10, 12, 0, 0, tzinfo=UTC).timestamp()


def at(*parts: int) -> float:
    return datetime(*parts, tzinfo=UTC).timestamp()  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("3d", NOW - 3 * 86400, id="days"),
        pytest.param("12h", NOW - 12 * 3600, id="hours"),
        pytest.param("30m", NOW - 1800, id="minutes"),
        pytest.param("90", NOW - 90, id="seconds"),
        pytest.param(" 1w ", NOW - 7 * 86400, id="a-week-with-spaces"),
        pytest.param("2024-05-01", at(2024, 5, 1), id="a-date-is-its-utc-midnight"),
        pytest.param("2024-05-01T08:30:00", at(2024, 5, 1, 8, 30), id="a-naive-time-is-utc"),
        pytest.param("2024-05-01T08:30:00Z", at(2024, 5, 1, 8, 30), id="zulu"),
        pytest.param("2024-05-01 10:30+02:00", at(2024, 5, 1, 8, 30), id="an-offset"),
    ],
)
def test_parse_since(text: str, expected: float) -> None:
    assert parse_since(text, now=NOW) == pytest.approx(expected)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("yesterday", id="a-word"),
        pytest.param("0d", id="zero"),
        pytest.param("-3d", id="negative"),
        pytest.param("2024-13-01", id="no-such-month"),
        pytest.param("3 days", id="a-spelled-unit"),
    ],
)
def test_parse_since_refuses_what_it_cannot_read(text: str) -> None:
    with pytest.raises(ValueError, match=r"use e\.g\. 3d, 12h or 2024-05-01"):
        parse_since(text, now=NOW)
