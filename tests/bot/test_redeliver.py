"""The periodic redelivery against the fake GitHub's hook deliveries: a GUID that fails every
time is asked for `MAX_REDELIVERIES` times in all, whatever the interval, on both backends.

The passes run on an injected clock (the fake dates its attempts by the same clock), so thirty
passes ten minutes apart take no time; the App's JWT is made on the real clock, which the fake
checks.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bot.ops.redeliver import redeliver_forever, redeliver_missed
from bot.store.contract import Storage
from bot.store.postgres.store import PostgresStore
from bot.store.sqlite import Store
from policies.redelivery import MAX_REDELIVERIES, REMEMBER_S
from tests.backends import BACKENDS
from tests.fakes.github import FakeGitHub, serve_app
from tests.github._client_world import hello_world, make_app

pytestmark = pytest.mark.anyio

INTERVAL = 600.0
PASSES = 30


class Refusing:
    """A webhook receiver that answers 503 to everything (a store that never takes it)."""

    def __init__(self) -> None:
        self.got: list[str] = []

    async def receive(self, request: Request) -> Response:
        self.got.append(request.headers.get("x-github-delivery", ""))
        return Response('{"error": "the store is unavailable"}', 503)


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


class Done(Exception):
    """Ends `redeliver_forever` after the passes a test wants."""


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, data_dir: Path) -> Iterator[Storage]:
    opened: Storage
    if request.param == "sqlite":
        opened = Store.open(data_dir / "bot.sqlite3")
    else:
        opened = PostgresStore.open(request.getfixturevalue("postgres_dsn"))
    yield opened
    opened.close()


@pytest.fixture
def fake(tmp_path: Path) -> FakeGitHub:
    return hello_world(tmp_path)


@pytest.fixture
def refusing(fake: FakeGitHub) -> Iterator[Refusing]:
    receiver = Refusing()
    app = Starlette(routes=[Route("/webhooks/github", receiver.receive, methods=["POST"])])
    with serve_app(app) as url:
        fake.webhook_url = f"{url}/webhooks/github"
        yield receiver


def payload() -> dict[str, object]:
    return {"action": "opened", "installation": {"id": 42}, "issue": {"number": 1}}


async def test_an_always_failing_guid_is_asked_for_three_times_in_thirty_passes(
    fake: FakeGitHub, refusing: Refusing, store: Storage
) -> None:
    clock = Clock()
    fake.hooks.clock = clock
    lost = fake.hooks.record("issues", payload(), status_code=502)
    passes = 0

    async def sleep(seconds: float) -> None:
        nonlocal passes
        passes += 1
        if passes == PASSES:
            raise Done
        clock.now += seconds

    with pytest.raises(Done):
        await redeliver_forever(make_app(fake), store, INTERVAL, clock=clock, sleep=sleep)

    assert len(fake.calls_to("GET", "/app/hook/deliveries")) == PASSES  # every pass listed
    asked = fake.calls_to("POST", "/app/hook/deliveries/*/attempts")
    assert len(asked) == MAX_REDELIVERIES == 3
    assert refusing.got == [lost.guid] * 3
    assert [(a.redelivery, a.status_code) for a in fake.hooks.by_guid(lost.guid)] == [
        (False, 502),
        (True, 503),
        (True, 503),
        (True, 503),
    ]
    assert store.redelivery_requests([lost.guid]) == {lost.guid: 3}


async def test_the_count_is_kept_past_github_s_three_days_then_dropped(
    fake: FakeGitHub, refusing: Refusing, store: Storage
) -> None:
    clock = Clock()
    fake.hooks.clock = clock
    lost = fake.hooks.record("issues", payload(), status_code=502)
    app = make_app(fake)
    results = []
    for _ in range(4):
        done = await redeliver_missed(app, store, since=2 * INTERVAL, clock=clock)
        results.append([d.result for d in done])
        clock.now += INTERVAL
    # The fourth pass lists two of the three redeliveries; the store counts all three.
    assert results == [["redelivered"]] * 3 + [["skipped: redelivered enough times"]]
    assert len(refusing.got) == 3
    clock.now -= INTERVAL
    (step,) = await redeliver_missed(app, store, since=2 * INTERVAL, clock=clock, dry_run=True)
    assert step.result == "skipped: redelivered enough times"

    # Days later GitHub lists none of the GUID's attempts, and the count goes with them.
    clock.now += REMEMBER_S
    assert await redeliver_missed(app, store, since=2 * INTERVAL, clock=clock) == []
    assert store.redelivery_requests([lost.guid]) == {}
