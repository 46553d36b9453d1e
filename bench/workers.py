"""Benchmark the workers: runs per minute through one and two worker processes.

`bot serve --no-worker` receives; `bot worker --concurrency 1` processes (one, then two)
handle the jobs, all on one SQLite database. The fake model answers every turn after a fixed
delay (1 s by default), like a slow provider, so a run costs wall time and no CPU, as real
runs mostly do. `--runs` triage runs (two agent turns each) are posted at once; the time from
the first 202 to the last run's end gives runs per minute.

    .venv/bin/python bench/workers.py [--runs 12] [--latency 1.0]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import workers as bench_workers  # noqa: E402
from tests.fakes.github import make_fake_github  # noqa: E402
from tests.fakes.llm import Reply  # noqa: E402
from tests.scripted import (  # noqa: E402
    REPO_FILES,
    ModelScript,
    bot_env,
    delivery_headers,
    issues_opened,
    running_bot,
    serving_fakes,
)

FINAL = ("succeeded", "no_changes", "needs_info", "blocked", "failed", "skipped")


@dataclasses.dataclass
class Slow:
    """The scripted model, answering each turn after `latency` seconds."""

    latency: float
    script: ModelScript = dataclasses.field(default_factory=ModelScript)

    def __call__(self, body: dict[str, Any]) -> Reply:
        return dataclasses.replace(self.script(body), delay=self.latency)


def measure(workers: int, runs: int, latency: float) -> float:
    """Seconds from the first 202 to the end of the last of `runs` triages."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        fake = make_fake_github(root, files=REPO_FILES)
        env = {"BOT_APP_SLUG": "repo-agent", "BOT_GITHUB_WRITE_INTERVAL": "0"}
        with (
            serving_fakes(fake, Slow(latency), extra_env=env) as (_, options),
            running_bot(root, serve_args=["--no-worker"], **options) as bot,
            bench_workers(root, bot_env(root, **options), workers, concurrency=1),
        ):
            time.sleep(1.0)  # the workers open the store and start polling
            started = time.monotonic()
            for n in range(runs):
                issue = fake.add_issue(
                    "octo", "hello", title=f"Crash {n}", body="It crashes.", user="u"
                )
                body = json.dumps(issues_opened(issue, "octo/hello", 42)).encode()
                headers = delivery_headers("issues", f"w-{n}", fake.webhook_secret, body)
                answer = httpx.post(f"{bot.url}/webhooks/github", content=body, headers=headers)
                assert answer.status_code == 202, answer.text
            deadline = started + 600
            while True:
                with sqlite3.connect(bot.db, timeout=10) as conn:
                    done = conn.execute(
                        f"SELECT count(*) FROM runs WHERE status IN {FINAL}"
                    ).fetchone()[0]
                if done >= runs:
                    return time.monotonic() - started
                if time.monotonic() > deadline:
                    raise RuntimeError(f"only {done} of {runs} runs ended in 600 s")
                time.sleep(0.05)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--latency", type=float, default=1.0)
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()}, {platform.python_implementation()} "
        f"{platform.python_version()}; {args.runs} triage runs of 2 model turns, "
        f"{args.latency:.1f} s per turn; `bot worker --concurrency 1` processes"
    )
    rates = {}
    for workers in (1, 2):
        seconds = measure(workers, args.runs, args.latency)
        rates[workers] = args.runs / seconds * 60
        print(f"{workers} worker(s): {seconds:.1f} s, {rates[workers]:.1f} runs/min")
    print(f"two / one: {rates[2] / rates[1]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
