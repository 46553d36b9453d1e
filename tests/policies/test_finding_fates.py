"""`policies.finding_fates`: each finding's fate, and the figures that add them up."""

from __future__ import annotations

import dataclasses

import pytest

from policies.event import Event
from policies.finding_fates import (
    FindingFate,
    PullClosed,
    closed_pull,
    dismissal_act,
    fates_of,
    marked_fixed_by,
    outcome_counts,
    pull_state,
    tally,
)
from policies.review_state import ReviewState, StoredFinding, ThreadFacts, dismissal_reason


def finding(
    fp: str, status: str = "open", resolution: str | None = None, **kw: object
) -> StoredFinding:
    return StoredFinding.model_validate(
        {
            "fingerprint": fp,
            "path": "calc.py",
            "line": 3,
            "category": "bug",
            "severity": "high",
            "title": f"t {fp}",
            "status": status,
            "resolution": resolution,
            "head": "h1",
            **kw,
        }
    )


@pytest.mark.parametrize(
    ("status", "resolution", "pull", "outdated", "want"),
    [
        pytest.param("open", None, "open", False, ("open", None, None), id="open-pull"),
        pytest.param("open", None, "merged", False, ("open_at_close", None, None), id="at-close"),
        pytest.param("open", None, "closed", True, ("outdated", None, None), id="outdated"),
        pytest.param("open", None, "open", True, ("open", None, None), id="outdated-but-open"),
        pytest.param(
            "fixed",
            "Fixed in " + "b" * 40,
            "merged",
            False,
            ("fixed", "b" * 40, "re-check"),
            id="re-check",
        ),
        pytest.param(
            "fixed",
            "marked fixed by @maint",
            "open",
            False,
            ("fixed", "maint", "marked fixed"),
            id="marked-fixed",
        ),
        pytest.param(
            "dismissed",
            "thread resolved by @ann",
            "closed",
            False,
            ("dismissed", "ann", "resolved thread"),
            id="resolved",
        ),
        pytest.param(
            "dismissed",
            "@bob answered that it will not be fixed",
            "open",
            False,
            ("dismissed", "bob", "won't fix"),
            id="wont-fix",
        ),
        pytest.param(
            "dismissed",
            "@cy reacted 👎",
            "merged",
            True,
            ("dismissed", "cy", "👎"),
            id="thumbs",
        ),
    ],
)
def test_fate_of_each_status(
    status: str, resolution: str | None, pull: str, outdated: bool, want: tuple[object, ...]
) -> None:
    state = ReviewState(findings=[finding("f1", status, resolution)])
    (got,) = fates_of("a/b", 1, state, pull=pull, outdated={"f1"} if outdated else ())  # type: ignore[arg-type]
    assert (got.outcome, got.actor, got.how) == want
    assert (got.repo, got.number, got.pull, got.head) == ("a/b", 1, pull, "h1")


@pytest.mark.parametrize(
    "thread",
    [
        pytest.param(ThreadFacts("t", True, "ann", False, ()), id="resolved"),
        pytest.param(
            ThreadFacts("t", False, None, False, (("ann", "Won't fix: by design"),)), id="wontfix"
        ),
        pytest.param(ThreadFacts("t", False, None, False, (), ("ann",)), id="thumbs"),
    ],
)
def test_dismissal_act_reads_every_dismissal_reason(thread: ThreadFacts) -> None:
    reason = dismissal_reason(thread, "app[bot]", {"ann"})
    actor, how = dismissal_act(reason)
    assert actor == "ann" and how is not None


def test_dismissal_act_of_unknown_text_is_nobody() -> None:
    assert dismissal_act("someone said so") == (None, None)
    assert dismissal_act(None) == (None, None)


def person(login: str) -> bool:
    return not login.endswith("[bot]")


@pytest.mark.parametrize(
    ("replies", "writers", "want"),
    [
        pytest.param((("maint", "Fixed in abc123"),), {"maint"}, "maint", id="fixed-in"),
        pytest.param((("maint", "done, thanks"),), {"maint"}, "maint", id="done"),
        pytest.param((("maint", "Addressed."),), {"maint"}, "maint", id="addressed"),
        pytest.param((("author", "fixed"),), {"maint"}, None, id="not-a-writer"),
        pytest.param((("maint", "not fixed yet"),), {"maint"}, None, id="negated"),
        pytest.param((("maint", "fixed?"),), {"maint"}, None, id="question"),
        pytest.param((("maint", "I don't think this is fixed"),), {"maint"}, None, id="prose"),
        pytest.param((("app[bot]", "Fixed in abc"),), {"app[bot]"}, None, id="bot"),
        pytest.param((("maint", "why?"), ("Maint", "Done")), {"maint"}, "Maint", id="later"),
    ],
)
def test_marked_fixed_by(
    replies: tuple[tuple[str, str], ...], writers: set[str], want: str | None
) -> None:
    thread = ThreadFacts("t", False, None, False, replies)
    assert marked_fixed_by(thread, person, writers) == want


def test_closed_pull_reads_only_closed_pull_requests() -> None:
    base = {"name": "pull_request", "delivery_id": "g", "repo_full_name": "a/b", "number": 4}
    assert closed_pull(
        Event(**base, action="closed", merged=True, installation_id=9)
    ) == PullClosed(  # type: ignore[arg-type]
        "a/b", 4, 9, True
    )
    assert closed_pull(Event(**base, action="closed")).state == "closed"  # type: ignore[arg-type, union-attr]
    assert closed_pull(Event(**base, action="synchronize")) is None  # type: ignore[arg-type]
    assert (
        closed_pull(
            Event(name="issues", delivery_id="g", action="closed", number=4, repo_full_name="a/b")
        )
        is None
    )
    assert closed_pull(Event(name="pull_request", delivery_id="g", action="closed")) is None


def fate(
    repo: str, outcome: str, pull: str, category: str = "bug", severity: str = "high"
) -> FindingFate:
    return FindingFate(repo, 1, "f", "p", category, severity, "t", outcome, pull=pull)  # type: ignore[arg-type]


def test_tally_rate_counts_closed_pull_requests_only() -> None:
    table = tally(
        [
            fate("a/b", "fixed", "merged"),
            fate("a/b", "open_at_close", "merged", category="style", severity="low"),
            fate("a/b", "fixed", "open"),  # not closed yet: posted, not in the rate
            fate("c/d", "dismissed", "closed"),
            fate("c/d", "outdated", "closed"),
        ]
    )
    total = table.total.as_dict()
    assert total == {
        "posted": 5,
        "fixed": 2,
        "dismissed": 1,
        "outdated": 1,
        "open_at_close": 1,
        "open": 0,
        "resolution_rate": 0.25,
    }
    assert table.repos["a/b"].resolution_rate == 0.5
    assert table.repos["c/d"].resolution_rate == 0.0
    assert table.categories["style"].open_at_close == 1
    assert table.severities["high"].posted == 4
    assert list(table.as_dict()["repos"]) == ["a/b", "c/d"]  # type: ignore[arg-type]


def test_rate_is_none_before_any_closed_pull_request() -> None:
    assert tally([fate("a/b", "open", "open")]).total.resolution_rate is None
    assert tally([]).total.as_dict()["resolution_rate"] is None


def test_outcome_counts() -> None:
    assert outcome_counts([("fixed", 2), ("open", 3), ("dismissed", 1)]) == {
        "posted": 6,
        "fixed": 2,
        "dismissed": 1,
        "outdated": 0,
        "open_at_close": 0,
    }


@pytest.mark.parametrize(
    ("state", "merged", "want"),
    [
        pytest.param("open", False, "open", id="open"),
        pytest.param("closed", False, "closed", id="closed"),
        pytest.param("closed", True, "merged", id="merged"),
        pytest.param("weird", False, "closed", id="unknown-is-closed"),
    ],
)
def test_pull_state(state: str, merged: bool, want: str) -> None:
    assert pull_state(state, merged) == want


def test_only_a_persons_reply_that_declines_a_finding_is_taken_at_once() -> None:
    from policies.event import Event
    from policies.finding_fates import ThreadDeclined, declined_thread

    reply = Event(
        name="pull_request_review_comment",
        delivery_id="d",
        action="created",
        repo_full_name="octo/hello",
        number=3,
        installation_id=42,
        sender_login="maint",
        sender_type="User",
        comment_body="intentional: callers check first",
        comment_in_reply_to=101,
    )
    assert declined_thread(reply, "app") == ThreadDeclined("octo/hello", 3, 42, 101)
    for changed in (
        {"comment_in_reply_to": None},  # a new thread, not a reply
        {"action": "edited"},
        {"sender_login": "dependabot[bot]", "sender_type": "Bot"},
        {"comment_body": "@app fix this, it is intentional"},  # a command runs instead
        {"comment_body": "thanks, looking into it"},  # declines nothing
        {"name": "issue_comment"},
    ):
        assert declined_thread(dataclasses.replace(reply, **changed), "app") is None, changed
