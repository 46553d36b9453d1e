"""What several benchmarks share: the listing of the requests a run made to the fake GitHub
(bench/e2e.py, bench/fix.py) and `bot worker` processes beside a receiver (bench/workers.py,
bench/exactly_once.py)."""

from __future__ import annotations

import statistics
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from tests.fakes.github import Call

# One measured run: seconds from the 202 to the end, when the 202 came, the requests it made.
Run = tuple[float, float, list[Call]]


def describe(call: Call) -> str:
    """A request to the fake GitHub, numbers in its path folded, with the bytes a push sent."""
    path = "/".join("{n}" if part.isdigit() else part for part in call.path.split("/"))
    service = call.query.get("service")
    if service:
        path += f"?service={service}"
    size = call.headers.get("content-length")
    extra = f" ({int(size):,} bytes sent)" if size and "git-receive-pack" in call.path else ""
    return f"{call.method} {path} -> {call.status}{extra}"


def print_runs(results: Sequence[Run], what: str, end: str) -> None:
    """The first run ("cold", e.g. `what` = "triage") with its requests, then the median and
    maximum of the others ("warm") and the requests of the last; `end` names what ends a run."""
    cold_s, cold_at, cold_calls = results[0]
    print(f"cold {what}: {cold_s * 1000:.0f} ms from 202 to {end}")
    print(f"    {len(cold_calls)} requests (offsets from the 202):")
    for call in cold_calls:
        print(f"    +{(call.at - cold_at) * 1000:5.0f} ms  {describe(call)}")
    warm = results[1:]
    if warm:
        times = [t for t, _, _ in warm]
        print(
            f"warm {what} ({len(warm)} runs): median {statistics.median(times) * 1000:.0f} ms, "
            f"max {max(times) * 1000:.0f} ms from 202 to {end}"
        )
        _, last_at, last_calls = warm[-1]
        print(f"    {len(last_calls)} requests in the last run (offsets from the 202):")
        for call in last_calls:
            print(f"    +{(call.at - last_at) * 1000:5.0f} ms  {describe(call)}")


@contextmanager
def workers(
    root: Path, env: dict[str, str], count: int, concurrency: int
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """`count` `bot worker --concurrency N` processes in `root` with `env`, output discarded;
    terminated (and waited for) on the way out."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "worker", "--concurrency", str(concurrency)],
            cwd=root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(count)
    ]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=20)
