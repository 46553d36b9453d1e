"""Sandbox start-up per command with the per-command limits on, against the same without them.

Runs `true` through `run_sandboxed` (the call `run_command` makes) in three set-ups,
interleaved round by round in a shuffled order so that the machine's load hits them alike:
limits off (plain bubblewrap, as before the limits), limits on with the best mechanism this
machine offers (cgroups where writable), and limits on with rlimits only (an app that may not
make cgroups). Prints median, p90 and mean per set-up and the median difference against off;
then the cost of one precise growth measurement of the tree (the walk the growth watch makes
only when the disk rose by more than the cap during a command).

Target: under 20 ms added per command.

    .venv/bin/python bench/sandbox.py [--count 50] [--files 2000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.agents.sandbox import bwrap_path, run_sandboxed  # noqa: E402
from bot.agents.sandbox_limits import GrowthWatch, SandboxLimits, describe  # noqa: E402

SETUPS = {
    "off": SandboxLimits.off(),
    "on": SandboxLimits(),
    "on, rlimits only": replace(SandboxLimits(), use_cgroups=False),
}


def make_tree(root: Path, files: int) -> None:
    for i in range(files):
        folder = root / f"d{i // 100:03d}"
        folder.mkdir(exist_ok=True)
        (folder / f"f{i:05d}.txt").write_text(f"line {i}\n" * 20)


async def measure(tree: Path, count: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in SETUPS}
    for limits in SETUPS.values():  # warm up: caches, the cgroup probe
        await run_sandboxed(tree, "true", limits=limits)
    for _ in range(count):
        order = list(SETUPS.items())
        random.shuffle(order)
        for name, limits in order:
            start = time.perf_counter()
            result = await run_sandboxed(tree, "true", limits=limits)
            times[name].append(time.perf_counter() - start)
            if result.exit_code != 0:
                raise RuntimeError(f"sandboxed `true` failed ({name}): {result.render()}")
    return times


def p90(values: list[float]) -> float:
    return sorted(values)[max(0, int(len(values) * 0.9) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=50, help="commands per set-up")
    parser.add_argument("--files", type=int, default=2000, help="files in the worktree")
    args = parser.parse_args()
    if bwrap_path() is None:
        sys.exit("bubblewrap (bwrap) is not installed; this benchmark needs it")
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as tmp:
        tree = Path(tmp)
        make_tree(tree, args.files)
        times = anyio.run(measure, tree, args.count)
        watch = GrowthWatch(tree, 1)
        watch.since = 0  # charge every entry: the walk's full cost
        start = time.perf_counter()
        watch.measure()
        walk = time.perf_counter() - start
    print(f"`true` x {args.count} per set-up, worktree of {args.files} files")
    print("limits on here: " + ", ".join(describe(SETUPS["on"])))
    base = statistics.median(times["off"])
    for name, values in times.items():
        median = statistics.median(values)
        print(
            f"{name:>18}: median {median * 1000:6.2f} ms  p90 {p90(values) * 1000:6.2f} ms  "
            f"mean {statistics.fmean(values) * 1000:6.2f} ms  "
            f"added {(median - base) * 1000:+6.2f} ms"
        )
    print(f"precise growth walk of the worktree ({args.files} files): {walk * 1000:.1f} ms")


if __name__ == "__main__":
    main()
