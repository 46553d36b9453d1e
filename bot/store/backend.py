"""The one place that picks the storage backend: SQLite by default, Postgres by BOT_DATABASE_URL.

Everything else takes a `Storage` and a `JobQueue` and does not know which it got. The
Postgres modules are imported only when Postgres is chosen, so an embedded deployment never
loads psycopg or procrastinate, and needs neither installed: they are the `postgres` extra.
Postgres chosen without them installed is a StoreError with one line naming the extra
(`require_postgres`), raised before anything connects.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Protocol

from bot.settings import Settings
from bot.store.contract import Storage, StoreError
from bot.store.queue.base import (
    DEFAULT_MAX_ATTEMPTS,
    DELIVERY_JOB,
    Job,
    JobQueue,
    QueueStats,
)
from bot.store.queue.sqlite import SqliteJobQueue
from bot.store.retry import Retried
from bot.store.sqlite import Store

POSTGRES_EXTRA_MISSING = (
    "BOT_DATABASE_URL names a Postgres database, which needs the postgres extra: "
    "pip install 'repo-agent-bot[postgres]'"
)
POSTGRES_STACK = ("psycopg", "psycopg_pool", "procrastinate")
"""The packages the `postgres` extra installs, as imported."""


def require_postgres() -> None:
    """StoreError (POSTGRES_EXTRA_MISSING) unless the Postgres stack imports; a package that
    is there but fails to import (psycopg without its libpq) is named after the line."""
    for name in POSTGRES_STACK:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            raise StoreError(POSTGRES_EXTRA_MISSING) from exc
        except ImportError as exc:
            raise StoreError(f"{POSTGRES_EXTRA_MISSING} ({name}: {exc})") from exc


class InspectableQueue(JobQueue, Protocol):
    """A JobQueue with the blocking calls that commands and tests use beside the contract."""

    def enqueue_sync(
        self, delivery_id: str, kind: str = DELIVERY_JOB, max_attempts: int = DEFAULT_MAX_ATTEMPTS
    ) -> int | None: ...

    def jobs_for_delivery(self, delivery_id: str) -> list[Job]:
        """The delivery's jobs, oldest first."""
        ...

    def stats_sync(self) -> QueueStats:
        """The queue's figures for monitoring, cheap enough for every metrics scrape."""
        ...

    def retry_sync(
        self, guids: Sequence[str], *, source: str, dry_run: bool = False
    ) -> list[Retried]:
        """Run these stored deliveries again where `policies.retry` allows (bot.store.retry)."""
        ...


def open_store(settings: Settings) -> Storage:
    """The deployment's store, its schema migrated; StoreError when it cannot be opened."""
    dsn = settings.database_dsn
    if settings.uses_postgres and dsn is not None:
        require_postgres()
        from bot.store.postgres.store import PostgresStore

        return PostgresStore.open(dsn, pool_size=settings.db_pool_max)
    return Store.open(settings.sqlite_path)


def job_queue(store: Storage) -> InspectableQueue:
    """The job queue that lives in the store's database."""
    if isinstance(store, Store):
        return SqliteJobQueue(store)
    from bot.store.postgres.store import PostgresStore
    from bot.store.queue.postgres import PostgresJobQueue

    if isinstance(store, PostgresStore):
        return PostgresJobQueue(store)
    raise TypeError(f"no job queue for a {type(store).__name__}")
