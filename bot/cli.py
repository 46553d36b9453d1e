"""The `bot` command: each area of the app registers its own subcommands here."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Each module exposes `register(subparsers)`, adding parsers whose `func(args) -> int` runs them.
COMMAND_MODULES = (
    "bot.commands.serve",  # serve, worker
    "bot.commands.deliveries",  # replay, deliveries
    "bot.commands.redeliver",  # redeliver
    "bot.commands.backup",  # backup, restore
    "bot.engine.cli",  # workflow run | status | stop
    "bot.ops.doctor",  # doctor
    "bot.github.setup",  # setup
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bot",
        description="A GitHub App that turns repository events into autonomous agent runs.",
    )
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
