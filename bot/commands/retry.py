"""`bot retry`: run a stored delivery again, by its GUID or a run it started, or every one
that failed lately (`--failed`).

A delivery runs again when its job is dead or a run of it failed (`policies.retry`): one
more job, its failed runs back to queued under the same run id, the retry recorded. One that
is still under way (a job waiting or running, a run not finished) is refused, and so is one
where nothing failed. A running worker picks the new job up.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from typing import Any

from bot.commands.since import parse_since
from bot.settings import SettingsError, load_settings
from bot.store.backend import job_queue, open_store
from bot.store.contract import Storage, StoreError
from bot.store.retry import Retried

DEFAULT_FAILED_SINCE = "1d"
_RUN_ID = re.compile(r"wf_[0-9a-f]{4,32}")


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    retry = subparsers.add_parser(
        "retry",
        help="run again a stored delivery whose job is dead or whose run failed "
        "(by GUID or run id), or with --failed every such delivery of a recent window",
    )
    retry.add_argument("target", nargs="?", metavar="DELIVERY|RUN", help="a GUID or a run id")
    retry.add_argument(
        "--failed",
        action="store_true",
        help="every delivery received within --since whose job is dead or whose run failed",
    )
    retry.add_argument(
        "--since",
        default=None,
        help=f"with --failed: how far back, 12h, 3d or a date (default {DEFAULT_FAILED_SINCE})",
    )
    retry.add_argument("--dry-run", action="store_true", help="only print what would run again")
    retry.set_defaults(func=run_retry)


def _fail(message: str, code: int = 2) -> int:
    print(f"bot: {message}", file=sys.stderr)
    return code


def _line(result: Retried, *, dry_run: bool) -> str:
    if not result.verdict.retry:
        return f"{result.guid}  refused: {result.verdict.reason}"
    if dry_run:
        return f"{result.guid}  would retry: {result.verdict.reason}"
    runs = f", runs {', '.join(result.runs)} queued again" if result.runs else ""
    return f"{result.guid}  retried as job {result.kind}: {result.verdict.reason}{runs}"


def _guid_of(store: Storage, target: str) -> str | None:
    """The delivery GUID `target` names: itself, or the delivery of run `target`."""
    if _RUN_ID.fullmatch(target):
        run = store.get_run(target)
        if run is not None:
            return run.delivery_id
    return target if store.seen_guids([target]) else None


def run_retry(args: argparse.Namespace) -> int:
    if args.failed == (args.target is not None):
        return _fail("give DELIVERY|RUN or --failed, one of the two")
    if args.since is not None and not args.failed:
        return _fail("--since goes with --failed")
    try:
        since = parse_since(args.since or DEFAULT_FAILED_SINCE, now=time.time())
    except ValueError as exc:
        return _fail(f"--since: {exc}")
    try:
        settings = load_settings()
        store = open_store(settings)
    except (SettingsError, StoreError) as exc:
        return _fail(str(exc))
    try:
        queue = job_queue(store)
        if not args.failed:
            guid = _guid_of(store, args.target)
            if guid is None:
                return _fail(f"no delivery or run {args.target} is stored (see `bot deliveries`)")
            [result] = queue.retry_sync([guid], source="cli", dry_run=args.dry_run)
            print(_line(result, dry_run=args.dry_run))
            return 0 if result.verdict.retry else 1
        guids = [row.delivery.guid for row in store.delivery_summaries(since=since)]
        results = queue.retry_sync(guids, source="cli", dry_run=args.dry_run)
    finally:
        store.close()
    chosen = [r for r in results if r.verdict.retry]
    for result in chosen:
        print(_line(result, dry_run=args.dry_run))
    verb = "would run again" if args.dry_run else "run again"
    print(
        f"{len(guids)} deliveries since {args.since or DEFAULT_FAILED_SINCE}: {len(chosen)} {verb}",
        file=sys.stderr,
    )
    return 0
