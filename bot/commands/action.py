"""`bot action`: run the app on the event of the GitHub Actions job it is a step of."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    action = subparsers.add_parser(
        "action",
        help="handle the GitHub Actions job's event (GITHUB_EVENT_PATH) with the job's token, "
        "as the server would handle the webhook; no server, no database",
    )
    action.add_argument(
        "--app-slug",
        metavar="SLUG",
        help="the App the job's token acts as, when the workflow made an App token "
        "(default: github-actions, the account of GITHUB_TOKEN); people mention @SLUG",
    )
    action.add_argument(
        "--artifacts",
        type=Path,
        metavar="DIR",
        help="copy the run's journal and store here, for actions/upload-artifact",
    )
    action.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from bot.action.runner import run

    return run(args)
