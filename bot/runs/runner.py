"""Which runner gets a worker pool its jobs: on Postgres procrastinate's worker, on SQLite none
(the pool's own claim loop over the LeasedQueue)."""

from __future__ import annotations

from bot.runs.worker import Runner
from bot.store.contract import Storage
from bot.store.sqlite import Store


def job_runner(store: Storage, lease_seconds: float = 60.0) -> Runner | None:
    """The runner for the store's backend (`bot.runs.procrastinate_pool` on Postgres, imported
    only there); `lease_seconds` is how long a silent worker keeps its jobs."""
    if isinstance(store, Store):
        return None
    from bot.runs.procrastinate_pool import ProcrastinatePool
    from bot.store.postgres.store import PostgresStore

    if isinstance(store, PostgresStore):
        return ProcrastinatePool(store, stalled_after=lease_seconds)
    raise TypeError(f"no job runner for a {type(store).__name__}")
