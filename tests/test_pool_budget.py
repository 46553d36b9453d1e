"""Postgres connections stay bounded: each process's pool holds at most BOT_DB_POOL_MAX, and
the deployment in compose.yaml stays under Postgres's default `max_connections` (100) on any
number of cores."""

from __future__ import annotations

from pathlib import Path

import psycopg_pool
import pytest
import yaml

from bot.intake.receivers import default_receivers, serve_connections
from bot.settings import load_settings
from bot.store.backend import open_store
from bot.store.postgres.connection import process_connections
from bot.store.postgres.store import PostgresStore


def test_the_pool_holds_at_most_bot_db_pool_max_connections(postgres_dsn: str) -> None:
    settings = load_settings(
        {"BOT_DATABASE_URL": postgres_dsn, "BOT_DB_POOL_MAX": "3"}, dotenv=None
    )
    store = open_store(settings)
    try:
        assert isinstance(store, PostgresStore)
        pool = store.pool
        with pool.connection() as a, pool.connection() as b, pool.connection() as c:
            pids = {conn.info.backend_pid for conn in (a, b, c)}
            assert len(pids) == 3
            with pytest.raises(psycopg_pool.PoolTimeout):
                pool.getconn(timeout=0.5)  # a fourth would pass the setting
    finally:
        store.close()


def test_the_pool_defaults_to_four_connections(postgres_dsn: str) -> None:
    store = open_store(load_settings({"BOT_DATABASE_URL": postgres_dsn}, dotenv=None))
    try:
        assert isinstance(store, PostgresStore)
        assert store.pool.max_size == 4
    finally:
        store.close()


REPO = Path(__file__).resolve().parents[1]
MAX_CONNECTIONS = 100  # Postgres's default `max_connections`
RESERVED = 10  # left for `bot deliveries`, `bot doctor`, psql and Postgres's own superuser slots


def compose_processes() -> list[tuple[str, list[str], dict[str, str]]]:
    """Each `bot` service of compose.yaml: its name, command and environment."""
    compose = yaml.safe_load((REPO / "compose.yaml").read_text())
    found = []
    for name, service in compose["services"].items():
        command = service.get("command") or []
        if command[:1] == ["bot"]:
            environment = {str(k): str(v) for k, v in (service.get("environment") or {}).items()}
            found.append((name, [str(part) for part in command], environment))
    return found


def compose_connections(cores: int) -> int:
    """The most connections compose.yaml's processes hold on a host with `cores` cores."""
    total = 0
    for _, command, environment in compose_processes():
        settings = load_settings(environment, dotenv=None)
        if command[1] == "worker":
            total += process_connections(settings.db_pool_max, runs_pool=True)
            continue
        assert command[1] == "serve"
        if "--receivers" in command:
            receivers = int(command[command.index("--receivers") + 1])
        else:
            receivers = default_receivers(postgres=settings.uses_postgres, cores=cores)
        total += serve_connections(
            receivers, settings.db_pool_max, worker="--no-worker" not in command
        )
    return total


def test_compose_runs_two_receivers_and_two_workers_on_postgres() -> None:
    processes = compose_processes()
    kinds = sorted(command[1] for _, command, _ in processes)
    assert kinds == ["serve", "serve", "worker", "worker"]
    for _, _, environment in processes:
        assert load_settings(environment, dotenv=None).uses_postgres


@pytest.mark.parametrize("cores", [1, 2, 4, 8, 16, 64, 256])
def test_compose_stays_under_postgres_default_max_connections(cores: int) -> None:
    assert compose_connections(cores) <= MAX_CONNECTIONS - RESERVED


def test_one_process_holds_its_pool_and_procrastinates_when_it_runs_jobs() -> None:
    # procrastinate's worker: a pool of two, and its listening connection.
    assert process_connections(4, runs_pool=False) == 4
    assert process_connections(4, runs_pool=True) == 7
    # One receiver is one process; more add the parent's pool.
    assert serve_connections(1, 4, worker=True) == 7
    assert serve_connections(3, 4, worker=False) == 16
    assert serve_connections(3, 4, worker=True) == 19


def test_receivers_on_sqlite_are_one_per_core() -> None:
    assert [default_receivers(cores=n) for n in (1, 2, 16, 64)] == [1, 2, 16, 64]


def test_receivers_on_postgres_stop_at_four() -> None:
    counts = [default_receivers(postgres=True, cores=n) for n in (1, 2, 4, 16, 256)]
    assert counts == [1, 2, 4, 4, 4]
