"""The `bot` command: each area of the app registers its own subcommands here."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from importlib import metadata

from bot import __version__

# Each module exposes `register(subparsers)`, adding parsers whose `func(args) -> int` runs them.
COMMAND_MODULES = (
    "bot.commands.serve",  # serve, worker
    "bot.commands.action",  # action
    "bot.commands.deliveries",  # replay, deliveries
    "bot.commands.redeliver",  # redeliver
    "bot.commands.retry",  # retry
    "bot.commands.findings",  # findings
    "bot.commands.backup",  # backup, restore
    "bot.engine.cli",  # workflow run | status | stop
    "bot.ops.doctor",  # doctor
    "bot.github.setup",  # setup
)

DISTRIBUTION = "repo-agent-bot"  # pyproject's [project] name


def package_version() -> str:
    """The installed package's version (pyproject's), or the source's when it is not installed."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bot",
        description="A GitHub App that turns repository events into autonomous agent runs.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        return int(func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
