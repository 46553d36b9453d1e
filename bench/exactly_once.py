"""Two receivers and two workers on one Postgres: every delivery decided exactly once.

Two `bot serve --no-worker` receivers and two `bot worker --concurrency 4` processes (each
running its jobs through procrastinate's worker) share one Postgres database (`--database-url`,
else BOT_TEST_DATABASE_URL, else a throwaway server from `scripts/postgres`). `--deliveries`
signed comments (which address nobody, so each is decided without a model) are posted
alternately to the two receivers from 16 threads, and every tenth is posted to both at once, as a GitHub redelivery racing the first try would be. Then
`bot deliveries --json` must show each GUID once, decided once, its job done after one
attempt. The script prints the counts and the time, and exits 1 when anything ran twice.

    .venv/bin/python bench/exactly_once.py [--deliveries 2000] [--database-url postgresql://...]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import workers  # noqa: E402
from tests.conftest import with_search_path  # noqa: E402
from tests.fakes.github import make_fake_github  # noqa: E402
from tests.scripted import (  # noqa: E402
    REPO_FILES,
    ModelScript,
    bot_env,
    comment_created,
    delivery_headers,
    running_bot,
    serving_fakes,
)


def database_url(given: str | None) -> tuple[str, str | None]:
    """The DSN to use, and the throwaway server's directory to stop afterwards (or None)."""
    if given:
        return given, None
    if os.environ.get("BOT_TEST_DATABASE_URL"):
        return os.environ["BOT_TEST_DATABASE_URL"], None
    out = subprocess.run(
        ["bash", str(ROOT / "scripts" / "postgres"), "start"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    values = dict(
        line.removeprefix("export ").split("=", 1) for line in out.splitlines() if "=" in line
    )
    return values["BOT_TEST_DATABASE_URL"].strip("'\""), values["BOT_TEST_POSTGRES_DIR"].strip(
        "'\""
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deliveries", type=int, default=2000)
    parser.add_argument("--database-url")
    args = parser.parse_args()
    base, server = database_url(args.database_url)
    schema = f"bench_{secrets.token_hex(4)}"  # a fresh schema, dropped afterwards
    try:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        try:
            return run(with_search_path(base, schema), args.deliveries)
        finally:
            with psycopg.connect(base, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")
    finally:
        if server is not None:
            subprocess.run(["bash", str(ROOT / "scripts" / "postgres"), "stop", server])


def run(dsn: str, count: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name in ("r1", "r2"):
            (root / name).mkdir()
        fake = make_fake_github(root, files=REPO_FILES)
        issue = fake.add_issue("octo", "hello", title="Chatter", body="x", user="someone")
        extra = {"BOT_APP_SLUG": "repo-agent", "BOT_DATABASE_URL": dsn}
        with (
            serving_fakes(fake, ModelScript(), extra_env=extra) as (_, options),
            running_bot(root / "r1", serve_args=["--no-worker"], **options) as one,
            running_bot(root / "r2", serve_args=["--no-worker"], **options) as two,
        ):
            env = bot_env(root, **options)
            with workers(root, env, 2, concurrency=4):
                urls = [f"{one.url}/webhooks/github", f"{two.url}/webhooks/github"]
                started = time.monotonic()
                statuses = post_all(fake, issue, urls, count)
                posted = time.monotonic() - started
                summaries = wait_decided(env, count)
                decided = time.monotonic() - started
    by_guid: dict[str, list[dict[str, Any]]] = {}
    for row in summaries:
        by_guid.setdefault(str(row["delivery_id"]), []).append(row)
    twice = [g for g, rows in by_guid.items() if len(rows) != 1]
    undecided = [g for g, rows in by_guid.items() if rows[0]["decision"] is None]
    retried = [
        g
        for g, rows in by_guid.items()
        if rows[0]["job"] is None
        or rows[0]["job"]["attempts"] != 1
        or rows[0]["job"]["status"] != "done"
    ]
    print(f"posted {count} deliveries (+{count // 10} duplicates) to 2 receivers in {posted:.1f} s")
    print(f"answers: {statuses}")
    print(f"all decided after {decided:.1f} s by 2 workers")
    print(
        f"GUIDs stored: {len(by_guid)}; stored twice: {len(twice)}; undecided: {len(undecided)};"
        f" jobs not done after exactly one attempt: {len(retried)}"
    )
    ok = len(by_guid) == count and not twice and not undecided and not retried
    print("exactly once: " + ("yes" if ok else "NO"))
    return 0 if ok else 1


def post_all(fake: Any, issue: dict[str, Any], urls: list[str], count: int) -> dict[int, int]:
    """Post `count` signed comments, every tenth to both receivers; status code -> count."""
    fr = fake.repos["octo/hello"]
    comment = fake.add_comment("octo", "hello", issue["number"], "thanks, all good", user="u")
    body = json.dumps(comment_created(fr.issues[issue["number"]], comment, "octo/hello", 42))
    payload = body.encode()
    statuses: dict[int, int] = {}

    def post(n: int) -> list[int]:
        headers = delivery_headers("issue_comment", f"once-{n:05d}", fake.webhook_secret, payload)
        targets = urls if n % 10 == 0 else [urls[n % 2]]
        with httpx.Client(timeout=30) as client:
            return [
                client.post(url, content=payload, headers=headers).status_code for url in targets
            ]

    with ThreadPoolExecutor(16) as pool:
        for codes in pool.map(post, range(count)):
            for code in codes:
                statuses[code] = statuses.get(code, 0) + 1
    return statuses


def wait_decided(env: dict[str, str], count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 600
    while True:
        out = subprocess.run(
            [sys.executable, "-m", "bot.cli", "deliveries", "--json"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        rows = [json.loads(line) for line in out.splitlines() if line.strip()]
        done = [
            r
            for r in rows
            if r["decision"] is not None and r["job"] and r["job"]["status"] == "done"
        ]
        if len(done) >= count or time.monotonic() > deadline:
            return rows
        time.sleep(1.0)


if __name__ == "__main__":
    sys.exit(main())
