"""`bot serve` (receiver and worker pool in one process) and `bot worker` (the pool alone)."""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

import anyio
import uvicorn

from bot.github.setup import missing_credentials
from bot.log import configure, get_logger
from bot.queue.sqlite import SqliteJobQueue
from bot.redact import install as install_redactor
from bot.settings import Settings, SettingsError, load_settings
from bot.store import Store, StoreError
from bot.web import WEBHOOK_PATH, create_app
from bot.wiring import build_worker_hooks, has_credentials
from bot.worker import DEFAULT_APP_SLUG, Worker

log = get_logger("bot.serve")

SWITCH_INTERVAL = 0.0005  # seconds; see run_serve


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    serve = subparsers.add_parser(
        "serve", help="receive webhooks and run the worker pool in this process"
    )
    serve.add_argument("--host", help="address to listen on (default: BOT_HOST, 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to listen on (default: BOT_PORT, 8000)")
    serve.add_argument(
        "--no-worker",
        action="store_true",
        help="only receive and store deliveries; run `bot worker` elsewhere to handle them",
    )
    serve.set_defaults(func=run_serve)
    worker = subparsers.add_parser("worker", help="run only the worker pool")
    worker.set_defaults(func=run_worker)


def _prepare() -> tuple[Settings, Store] | None:
    try:
        settings = load_settings()
    except SettingsError as exc:
        configure()
        log.error(str(exc))
        return None
    configure(settings.log_level)
    install_redactor(settings)  # before anything is logged that could carry a secret
    if settings.uses_postgres:
        log.error(
            "BOT_DATABASE_URL selects Postgres, which this version cannot use yet; "
            "unset it to use SQLite in BOT_DATA_DIR"
        )
        return None
    missing = missing_credentials(settings)
    if missing:
        log.warning(
            "settings missing (%s): until they are set, nothing is read from or posted to "
            "GitHub; run `bot setup` to register the app and write them to .env",
            ", ".join(missing),
            extra={"missing": missing},
        )
    if settings.app_slug is None and not has_credentials(settings):
        log.warning(f"BOT_APP_SLUG is not set; answering to @{DEFAULT_APP_SLUG}")
    try:
        store = Store.open(settings.sqlite_path)
    except StoreError as exc:
        log.error(str(exc))
        return None
    return settings, store


def build_worker(settings: Settings, store: Store) -> Worker | None:
    """The worker pool, or None (logged) when the operator's settings cannot make one."""
    try:
        hooks = build_worker_hooks(settings, store)
    except ValueError as exc:  # settings that cannot work: a bad key, an invalid agent type
        log.error(str(exc))
        return None
    return Worker(
        store,
        SqliteJobQueue(store),
        hooks,
        app_slug=settings.app_slug or DEFAULT_APP_SLUG,
        concurrency=settings.workers,
        lease_seconds=settings.job_lease_seconds,
    )


def run_serve(args: argparse.Namespace) -> int:
    prepared = _prepare()
    if prepared is None:
        return 1
    settings, store = prepared
    if not settings.webhook_secrets:
        if settings.insecure_no_signature:
            log.warning(
                "BOT_INSECURE_NO_SIGNATURE is set: unsigned deliveries are accepted; "
                "never run like this where GitHub or anyone else can reach the port"
            )
        else:
            log.warning(
                "no webhook secret: deliveries are refused (503) until BOT_WEBHOOK_SECRET is set"
            )
    worker = None
    if not args.no_worker:
        worker = build_worker(settings, store)
        if worker is None:
            store.close()
            return 1
    app = create_app(settings, store, worker=worker)
    host = args.host or settings.host
    port = settings.port if args.port is None else args.port
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        access_log=False,
        log_config=None,
        server_header=False,
        proxy_headers=False,  # nothing reads the client address
    )
    log.info(
        "serving",
        extra={
            "url": f"http://{host}:{port}{WEBHOOK_PATH}",
            "database": str(store.path),
            "worker": worker is not None,
        },
    )
    # The delivery writer thread lets go of the GIL at every SQLite call; with the default 5 ms
    # switch interval a busy event loop keeps it that long each time and stalls group commit.
    sys.setswitchinterval(SWITCH_INTERVAL)
    # uvicorn re-raises the signal that stopped it; a stop on request is a clean exit.
    signal.signal(signal.SIGTERM, _exit_cleanly)
    try:
        uvicorn.Server(config).run()
    finally:
        store.close()
    return 0


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(0)


def run_worker(args: argparse.Namespace) -> int:
    prepared = _prepare()
    if prepared is None:
        return 1
    settings, store = prepared
    worker = build_worker(settings, store)
    if worker is None:
        store.close()
        return 1

    async def main() -> None:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(worker.run)
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    log.info("stopping", extra={"signal": signal.Signals(signum).name})
                    tasks.cancel_scope.cancel()
                    break

    anyio.run(main, backend_options={"use_uvloop": True})
    store.close()
    return 0
