"""CPU per run of `bench/e2e.py` (triage) or `bench/fix.py`: what the `bot serve` process spends.

Each run is the bench's own (`one_triage`, `one_fix`: post the delivery, wait for the end, let
stragglers land); around it the process's user and system time is read from `/proc`, its
waited-for children (git) included. `boot` is the CPU from the process's start until
`/readyz` answered. `bot serve` runs with `--receivers 1` unless told otherwise: the measured
process then also receives the delivery, and it starts in time on a busy machine. Linux only.

    .venv/bin/python bench/cpu_per_run.py e2e [--runs 6]
    .venv/bin/python bench/cpu_per_run.py fix [--runs 4] [--files 20000]
    .venv/bin/python bench/cpu_per_run.py e2e --tree ../other-checkout   # the same, on that tree
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User and system time of `pid` and of its children it has waited for, in seconds."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    # fields[11:15] are utime, stime, cutime, cstime (fields 14-17 of proc(5))
    return sum(int(value) for value in fields[11:15]) / CLOCK_TICKS


@contextmanager
def e2e_bot(root: Path, serve: list[str]) -> Iterator[tuple[Any, Any, Callable[..., Any]]]:
    from bench.e2e import one_triage
    from tests.scripted import bot_with_fakes

    env = {"BOT_APP_SLUG": "repo-agent"}
    with bot_with_fakes(root, extra_env=env, serve_args=serve) as (fake, _, bot):
        yield fake, bot, one_triage


@contextmanager
def fix_bot(
    root: Path, serve: list[str], files: int
) -> Iterator[tuple[Any, Any, Callable[..., Any]]]:
    from bench.fix import big_repo, one_fix
    from tests.fakes.fix_model import Edit, FixModel
    from tests.fakes.github import FakeGitHub
    from tests.scripted import bot_on_fakes

    bare = root / "remote" / "octo" / "hello.git"
    bare.parent.mkdir(parents=True)
    big_repo(bare, files, False)
    fake = FakeGitHub()
    fake.add_repo("octo", "hello", bare)
    fake.add_installation(42, "octo", ["octo/hello"])
    fake.set_permission("octo", "hello", "maint", "write")
    model = FixModel((Edit("", {"app/greet.py": 'def greet():\n    return "hello"\n'}),))
    env = {"BOT_APP_SLUG": "repo-agent", "BOT_GITHUB_WRITE_INTERVAL": "0"}
    with bot_on_fakes(root, fake, model, extra_env=env, serve_args=serve) as (_, bot):
        yield fake, bot, one_fix


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bench", choices=("e2e", "fix"))
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--receivers", type=int, default=1)
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args()
    sys.path.insert(0, str(args.tree.resolve()))
    runs = args.runs or (6 if args.bench == "e2e" else 4)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        serve = ["--receivers", str(args.receivers)]
        bot_of = e2e_bot(root, serve) if args.bench == "e2e" else fix_bot(root, serve, args.files)
        with bot_of as (fake, bot, one_run):
            pid = bot.process.pid
            boot = cpu_seconds(pid)
            cpu: list[float] = []
            requests: list[int] = []
            for n in range(1, runs + 1):
                before = cpu_seconds(pid)
                _, _, calls = one_run(fake, bot.url, n)
                cpu.append(cpu_seconds(pid) - before)
                requests.append(len(calls))
    warm = cpu[1:]
    print(
        f"{args.bench} on {args.tree.resolve().name}: boot {boot:.2f} s, "
        f"cold run {cpu[0]:.2f} s, warm median {statistics.median(warm):.3f} s "
        f"(runs: {', '.join(f'{c:.2f}' for c in cpu)}); "
        f"requests cold {requests[0]}, warm {requests[-1]}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
