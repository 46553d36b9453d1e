"""`bot redeliver`: ask GitHub again for the webhook deliveries the app missed."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import anyio

from bot.github.errors import AuthError, GitHubError
from bot.ops.redeliver import Done, redeliver_missed
from bot.settings import SettingsError, load_settings
from bot.store.backend import open_store
from bot.store.contract import StoreError
from bot.wiring import has_credentials
from policies.redelivery import DEFAULT_SINCE, parse_duration


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    redeliver = subparsers.add_parser(
        "redeliver",
        help="ask GitHub to send again the recent deliveries that failed and were never received",
    )
    redeliver.add_argument(
        "--since",
        default=DEFAULT_SINCE,
        help=f"how far back to look: 30m, 12h, 3d (default {DEFAULT_SINCE}, GitHub's limit)",
    )
    redeliver.add_argument(
        "--dry-run", action="store_true", help="only print what would be redelivered"
    )
    redeliver.set_defaults(func=run_redeliver)


def _fail(message: str) -> int:
    print(f"bot: {message}", file=sys.stderr)
    return 1


def _line(done: Done) -> str:
    attempt = done.step.attempt
    status = f"{attempt.status_code} {attempt.status}".strip()
    return f"{attempt.guid}  {done.step.event:40}  {status:28}  {done.result}"


def run_redeliver(args: argparse.Namespace) -> int:
    try:
        since = parse_duration(args.since)
    except ValueError as exc:
        return _fail(f"--since: {exc}")
    try:
        settings = load_settings()
    except SettingsError as exc:
        return _fail(str(exc))
    if not has_credentials(settings):
        return _fail(
            "listing the App's deliveries needs its credentials: set BOT_APP_ID and "
            "BOT_PRIVATE_KEY_PATH (or run `bot setup`)"
        )
    from bot.github.client import GitHubApp

    try:
        store = open_store(settings)
    except StoreError as exc:
        return _fail(str(exc))

    async def main() -> list[Done]:
        async with GitHubApp.from_settings(settings) as app:
            return await redeliver_missed(app, store, since=since, dry_run=args.dry_run)

    try:
        done = anyio.run(main)
    except (SettingsError, ValueError) as exc:
        return _fail(str(exc))
    except AuthError as exc:
        return _fail(
            f"GitHub refused the App's credentials ({exc.status}: {exc.message}); check "
            "BOT_APP_ID and that BOT_PRIVATE_KEY_PATH is the App's current private key"
        )
    except GitHubError as exc:
        return _fail(f"GitHub could not list the App's deliveries: {exc}")
    finally:
        store.close()
    for item in done:
        print(_line(item))
    redelivered = sum(d.result in ("redelivered", "would redeliver") for d in done)
    failed = sum(d.result.startswith("failed") for d in done)
    verb = "to redeliver" if args.dry_run else "redelivered"
    print(
        f"{len(done)} deliveries since {args.since}: {redelivered} {verb}, {failed} failed",
        file=sys.stderr,
    )
    return 1 if failed else 0
