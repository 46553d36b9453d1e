"""`bot serve` (receivers and the worker pool) and `bot worker` (the pool alone).

`bot serve --receivers 1` runs the receiver and the pool in one process. With more (the
default is one per core), the process binds the port, starts that many receiver processes on
it and runs the pool itself (bot/intake/receivers.py). A receiver is this same command with the
hidden `--listen-fd`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import sys
from typing import Any

import anyio
import uvicorn
from starlette.applications import Starlette

from bot import metrics
from bot.intake import wakeup
from bot.intake.receivers import Receivers, default_receivers, die_with_parent, listen, supervise
from bot.intake.web import WEBHOOK_PATH, create_app
from bot.log import configure, get_logger
from bot.ops.settings_check import log_startup_warnings
from bot.redact import install as install_redactor
from bot.runs import worker_http
from bot.runs.runner import job_runner
from bot.runs.worker import DEFAULT_APP_SLUG, Worker
from bot.runs.worker_http import PoolState, create_worker_app
from bot.settings import Settings, SettingsError, load_settings
from bot.store.backend import job_queue, open_store
from bot.store.contract import Storage, StoreError
from bot.wiring import build_worker_hooks, has_credentials

log = get_logger("bot.serve")

SWITCH_INTERVAL = 0.0005  # seconds; see _run_uvicorn


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError("must be between 1 and 65535")
    return value


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
    serve.add_argument(
        "--receivers",
        type=_positive,
        help="receiver processes sharing the port (default: one per core); "
        "the worker pool runs in one process whatever the number",
    )
    # Set by `bot serve --receivers N` on the receivers it starts.
    serve.add_argument("--listen-fd", type=int, help=argparse.SUPPRESS)
    serve.add_argument("--wake-fd", type=int, help=argparse.SUPPRESS)
    serve.add_argument("--parent-pid", type=int, help=argparse.SUPPRESS)
    serve.set_defaults(func=run_serve)
    worker = subparsers.add_parser("worker", help="run only the worker pool")
    worker.add_argument(
        "--concurrency",
        type=int,
        help="jobs handled at once by this process (default: BOT_WORKERS, 2)",
    )
    worker.add_argument(
        "--port",
        type=_port,
        help="serve /healthz, /readyz and /metrics on this port (default: BOT_WORKER_PORT; "
        "unset: none)",
    )
    worker.add_argument("--host", help="address for --port (default: BOT_HOST, 127.0.0.1)")
    worker.set_defaults(func=run_worker)


def _prepare(*, quiet: bool = False) -> tuple[Settings, Storage] | None:
    """Settings and the store, or None (logged). `quiet`: a receiver started by `bot serve`,
    whose parent has already warned about what the settings lack."""
    try:
        settings = load_settings()
    except SettingsError as exc:
        configure()
        log.error(str(exc))
        return None
    configure(settings.log_level)
    install_redactor(settings)  # before anything is logged that could carry a secret
    if not quiet:
        log_startup_warnings(log, settings)  # unknown BOT_* names, no model, no credentials
    if not quiet and settings.app_slug is None and not has_credentials(settings):
        log.warning(f"BOT_APP_SLUG is not set; answering to @{DEFAULT_APP_SLUG}")
    try:
        store = open_store(settings)
    except StoreError as exc:
        log.error(str(exc))
        return None
    return settings, store


def build_worker(
    settings: Settings, store: Storage, *, concurrency: int | None = None
) -> Worker | None:
    """The worker pool, or None (logged) when the operator's settings cannot make one."""
    try:
        hooks = build_worker_hooks(settings, store)
    except ValueError as exc:  # settings that cannot work: a bad key, an invalid agent type
        log.error(str(exc))
        return None
    queue = job_queue(store)
    return Worker(
        store,
        queue,
        hooks,
        app_slug=settings.app_slug or DEFAULT_APP_SLUG,
        concurrency=concurrency or settings.workers,
        lease_seconds=settings.job_lease_seconds,
        runner=job_runner(store, settings.job_lease_seconds),
    )


def preload_github(worker: Worker | None) -> None:
    """Before the pool takes its first job: githubkit's imports for the calls runs make
    (`bot.github.preload`), so that no run pays them. Nothing without a pool or credentials."""
    if worker is not None and worker.hooks.executor is not None:
        from bot.github.preload import preload

        preload()


def run_serve(args: argparse.Namespace) -> int:
    if args.listen_fd is not None:
        return _run_receiver(args)
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
    receivers = args.receivers or default_receivers(postgres=settings.uses_postgres)
    if receivers > 1:
        # Before anything records a value: every process writes to files there.
        metrics.use_folder(settings.data_dir / "metrics")
    else:
        metrics.use_memory()
    worker = None
    if not args.no_worker:
        worker = build_worker(settings, store)
        if worker is None:
            store.close()
            return 1
    host = args.host or settings.host
    port = settings.port if args.port is None else args.port
    try:
        if receivers > 1:
            return _run_supervisor(settings, store, worker, host, port, receivers)
        preload_github(worker)
        app = create_app(settings, store, worker=worker)
        log.info(
            "serving",
            extra={
                "url": f"http://{host}:{port}{WEBHOOK_PATH}",
                "database": store.where,
                "worker": worker is not None,
                "receivers": 1,
                "durability": settings.durability,
            },
        )
        _run_uvicorn(app, host=host, port=port)
    finally:
        store.close()
    return 0


def _run_supervisor(
    settings: Settings, store: Storage, worker: Worker | None, host: str, port: int, count: int
) -> int:
    try:
        sock = listen(host, port)
    except OSError as exc:
        log.error(f"cannot listen on {host}:{port}: {exc.strerror}; is another server there?")
        return 1
    read_fd, write_fd = wakeup.open_pipe() if worker is not None else (None, None)
    receivers = Receivers(count, wake_fd=write_fd)
    try:
        receivers.start(sock)
    finally:
        sock.close()  # the receivers hold it now; the port closes when the last one stops
    preload_github(worker)  # while the receivers start
    log.info(
        "serving",
        extra={
            "url": f"http://{host}:{port}{WEBHOOK_PATH}",
            "database": store.where,
            "worker": worker is not None,
            "receivers": count,
            "receiver_pids": receivers.pids,
            "durability": settings.durability,
        },
    )
    try:
        status = anyio.run(
            supervise, receivers, worker, read_fd, backend_options={"use_uvloop": True}
        )
    finally:
        receivers.stop()
        for fd in (read_fd, write_fd):
            if fd is not None:
                os.close(fd)
    log.info("stopped", extra={"status": status})
    return status


def _run_receiver(args: argparse.Namespace) -> int:
    """A receiver started by `bot serve --receivers N`: no pool; new jobs wake the parent's."""
    if args.parent_pid is not None:
        die_with_parent(args.parent_pid)
    prepared = _prepare(quiet=True)
    if prepared is None:
        return 1
    settings, store = prepared
    sock = socket.socket(fileno=args.listen_fd)
    on_commit = None if args.wake_fd is None else wakeup.notifier(args.wake_fd)
    app = create_app(settings, store, on_commit=on_commit)
    try:
        _run_uvicorn(app, sock=sock)
    finally:
        store.close()
    return 0


def _run_uvicorn(
    app: Starlette, *, host: str = "", port: int = 0, sock: socket.socket | None = None
) -> None:
    """Serve `app` on (host, port), or on `sock` when given, until SIGTERM or SIGINT."""
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
    # The delivery writer thread lets go of the GIL at every SQLite call; with the default 5 ms
    # switch interval a busy event loop keeps it that long each time and stalls group commit.
    sys.setswitchinterval(SWITCH_INTERVAL)
    # uvicorn re-raises the signal that stopped it; a stop on request is a clean exit.
    signal.signal(signal.SIGTERM, _exit_cleanly)
    serving = uvicorn.Server(config).serve(sockets=None if sock is None else [sock])
    try:
        with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:
            runner.run(serving)
    finally:
        # A SIGTERM that lands before the loop has started the server (a receiver stopped
        # while still starting) leaves it unstarted: close it rather than warn at exit.
        serving.close()


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(0)


def run_worker(args: argparse.Namespace) -> int:
    prepared = _prepare()
    if prepared is None:
        return 1
    settings, store = prepared
    if args.concurrency is not None and not 1 <= args.concurrency <= 64:
        log.error("--concurrency must be between 1 and 64")
        store.close()
        return 1
    metrics.use_memory()  # one process: what it records, its own page serves
    worker = build_worker(settings, store, concurrency=args.concurrency)
    if worker is None:
        store.close()
        return 1
    preload_github(worker)
    host = args.host or settings.host
    port = settings.worker_port if args.port is None else args.port
    sock = None
    if port is not None:
        try:
            sock = listen(host, port)
        except OSError as exc:
            log.error(f"cannot listen on {host}:{port}: {exc.strerror}; is another server there?")
            store.close()
            return 1
    pool = PoolState()

    async def main() -> None:
        async with anyio.create_task_group() as tasks:
            if sock is not None:
                app = create_worker_app(store, job_queue(store).stats_sync, pool)
                await tasks.start(worker_http.serve, app, sock)
                log.info("serving health and metrics", extra={"url": f"http://{host}:{port}"})
            tasks.start_soon(pool.watched, worker.run)
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    log.info("stopping", extra={"signal": signal.Signals(signum).name})
                    tasks.cancel_scope.cancel()
                    break

    anyio.run(main, backend_options={"use_uvloop": True})
    store.close()
    return 0
