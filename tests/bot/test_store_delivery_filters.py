"""The store's filtered listing of deliveries (`bot deliveries --event/--repo/--decision/--since`),
on both backends."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.store.contract import Storage
from bot.store.records import repository_of
from tests.backends import BACKENDS, backend_store, insert_delivery


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, data_dir: Path) -> Iterator[Storage]:
    yield from backend_store(request, data_dir)


def body(repo: str | None) -> bytes:
    return json.dumps({"repository": {"full_name": repo}} if repo else {"zen": "hi"}).encode()


@pytest.fixture
def filled(store: Storage) -> Storage:
    rows = [
        ("g-0", 100.0, "issues", "opened", "acme/api", "trigger"),
        ("g-1", 200.0, "pull_request", "opened", "acme/web", "skip"),
        ("g-2", 300.0, "issues", "closed", "Acme/API", "skip"),
        ("g-3", 400.0, "ping", None, None, None),
        ("g-4", 500.0, "issues", "opened", "acme/web", "error"),
    ]
    for guid, at, event, action, repo, decision in rows:
        insert_delivery(store, guid, at, event=event, action=action, body=body(repo))
        if decision is not None:
            store.record_decision(guid, decision)
    return store


def guids(store: Storage, **filters: object) -> list[str]:
    return [s.delivery.guid for s in store.delivery_summaries(**filters)]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        pytest.param({}, ["g-0", "g-1", "g-2", "g-3", "g-4"], id="all-oldest-first"),
        pytest.param({"event": "issues"}, ["g-0", "g-2", "g-4"], id="event"),
        pytest.param({"event": "issues", "action": "opened"}, ["g-0", "g-4"], id="action"),
        pytest.param({"decision": "skip"}, ["g-1", "g-2"], id="decision"),
        pytest.param({"decision": "pending"}, ["g-3"], id="not-decided-yet"),
        pytest.param({"since": 300.0}, ["g-2", "g-3", "g-4"], id="since-is-inclusive"),
        pytest.param({"repo": "acme/api"}, ["g-0", "g-2"], id="repo-any-case"),
        pytest.param({"repo": "acme/web", "event": "issues"}, ["g-4"], id="repo-and-event"),
        pytest.param({"repo": "acme/web", "limit": 1}, ["g-4"], id="limit-takes-the-newest"),
        pytest.param({"limit": 2, "since": 100.0}, ["g-3", "g-4"], id="limit-and-since"),
        pytest.param({"repo": "acme/none"}, [], id="no-match"),
    ],
)
def test_filters(filled: Storage, filters: dict[str, object], expected: list[str]) -> None:
    assert guids(filled, **filters) == expected


def test_a_repository_filter_pages_through_many_rows(store: Storage) -> None:
    # More rows than one scan batch, the matching ones at the far end.
    for n in range(1200):
        repo = "acme/old" if n < 3 else "acme/new"
        insert_delivery(store, f"g-{n:04d}", float(n), body=body(repo))
    assert guids(store, repo="acme/old") == ["g-0000", "g-0001", "g-0002"]
    assert guids(store, repo="acme/old", limit=2) == ["g-0001", "g-0002"]


def test_a_filtered_listing_keeps_the_bodies_out(filled: Storage) -> None:
    [row] = filled.delivery_summaries(repo="acme/api", event="issues", action="closed")
    assert row.delivery.guid == "g-2" and row.delivery.body == b""


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(body("acme/api"), "acme/api", id="a-repository"),
        pytest.param(body(None), None, id="none"),
        pytest.param(b"not json", None, id="not-json"),
        pytest.param(b"[1]", None, id="not-an-object"),
        pytest.param(b'{"repository": "acme"}', None, id="not-a-repository-object"),
        pytest.param(b'{"repository": {"full_name": 7}}', None, id="not-a-name"),
    ],
)
def test_repository_of(raw: bytes, expected: str | None) -> None:
    assert repository_of(raw) == expected
