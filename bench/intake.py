"""Intake benchmark: signed deliveries into a running `bot serve --no-worker`, measured with wrk.

Starts the server on a fresh data directory on 127.0.0.1, drives it with wrk at concurrency
1, 16 and 64 (a Lua script sends one signed body with a distinct X-GitHub-Delivery per
request), prints deliveries/s and p50/p99 latency per level, then checks that every 202 wrk
saw is a stored delivery.

    .venv/bin/python bench/intake.py [--duration 8] [--body PATH] [--levels 1,16,64]
    .venv/bin/python bench/intake.py --database-url postgresql://...   # the Postgres backend

`--receivers N` (1 by default, the figures in bench/README.md) is passed to `bot serve`;
bench/scale.py compares receiver counts and durability settings with Probot.

`--flood N` measures what a flood of unsigned requests does to valid deliveries, in one run:
windows of signed deliveries at concurrency 16 alone, each followed by one while a second
wrk (concurrency 4) sends unsigned ones (401, each noted in the refusals table), until the
flood has sent N; it prints each window's p99, the ratio of the flooded windows' median p99
to the alone ones', how many unsigned requests were refused and how many rows the refusals
table holds after (at most 10,000).

    .venv/bin/python bench/intake.py --levels '' --flood 20000
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import platform
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_BODY = ROOT / "fixtures" / "github-payloads" / "issues" / "opened.payload.json"
SECRET = "bench-secret"

LUA = r"""
local counter = 0
local threads = {}
accepted = 0
other = 0

function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  prefix = args[1] .. "-" .. tid .. "-"
  expected = tonumber(args[2] or "202")
end

function request()
  counter = counter + 1
  wrk.headers["X-GitHub-Delivery"] = prefix .. counter
  return wrk.format()
end

function response(status, headers, body)
  if status == expected then accepted = accepted + 1 else other = other + 1 end
end

function done(summary, latency, requests)
  local acc, oth = 0, 0
  for _, t in ipairs(threads) do
    acc = acc + t:get("accepted")
    oth = oth + t:get("other")
  end
  local e = summary.errors
  io.write(string.format(
    "RESULT {\"requests\": %d, \"duration_us\": %d, \"accepted\": %d, \"other\": %d, " ..
    "\"p50_us\": %d, \"p99_us\": %d, \"max_us\": %d, \"errors\": %d}\n",
    summary.requests, summary.duration, acc, oth,
    latency:percentile(50), latency:percentile(99), latency.max,
    e.connect + e.read + e.write + e.status + e.timeout))
end
"""


@dataclass(frozen=True)
class Level:
    concurrency: int
    requests: int
    accepted: int
    other: int
    errors: int
    seconds: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    stored: int
    cpu_us: float

    @property
    def rate(self) -> float:
        return self.accepted / self.seconds


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process (all its threads) has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree(pid: int) -> list[int]:
    """`pid` and its children (the receivers of `bot serve`)."""
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == pid:
                children.append(int(entry.name))
    return [pid, *children]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"bot serve exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("bot serve did not become ready")


def run_wrk(
    url: str,
    script: Path,
    prefix: str,
    concurrency: int,
    duration: float,
    threads: int,
    expected: int = 202,
) -> dict[str, int]:
    """wrk's figures; `accepted` counts the answers with status `expected`, `other` the rest."""
    cmd = [
        "wrk",
        f"-t{min(threads, concurrency)}",
        f"-c{concurrency}",
        f"-d{max(1, round(duration))}s",
        "--timeout",
        "10s",
        "-s",
        str(script),
        url,
        "--",
        prefix,
        str(expected),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"wrk failed ({done.returncode}): {done.stderr or done.stdout}")
    out = done.stdout
    for line in out.splitlines():
        if line.startswith("RESULT "):
            result: dict[str, int] = json.loads(line.removeprefix("RESULT "))
            return result
    raise SystemExit(f"wrk printed no result:\n{out}")


def write_script(path: Path, body: bytes, event: str) -> None:
    """The wrk script: POST `body` signed with SECRET, a distinct delivery id per request."""
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-Hub-Signature-256": signature,
        "User-Agent": "GitHub-Hookshot/bench",
    }
    setup = "wrk.method = 'POST'\nwrk.body = " + _lua_string(body.decode()) + "\n"
    setup += "".join(
        f"wrk.headers[{_lua_string(k)}] = {_lua_string(v)}\n" for k, v in headers.items()
    )
    path.write_text(setup + LUA)


def stored(db: Path | str, prefix: str) -> int:
    if isinstance(db, str):
        return stored_postgres(db, prefix)
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        # One statement reads one snapshot, even while late commits land.
        count, jobs = conn.execute(
            "SELECT (SELECT count(*) FROM deliveries WHERE guid LIKE ?1),"
            " (SELECT count(*) FROM jobs WHERE delivery_id LIKE ?1)",
            (prefix + "-%",),
        ).fetchone()
    finally:
        conn.close()
    if jobs != count:
        raise SystemExit(f"{prefix}: {count} deliveries but {jobs} jobs")
    return int(count)


def stored_postgres(dsn: str, prefix: str) -> int:
    import psycopg

    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM deliveries WHERE guid LIKE %(p)s),"
            " (SELECT count(*) FROM bot_jobs WHERE delivery_id LIKE %(p)s)",
            {"p": prefix + "-%"},
        ).fetchone()
    assert row is not None
    count, jobs = row
    if jobs != count:
        raise SystemExit(f"{prefix}: {count} deliveries but {jobs} jobs")
    return int(count)


def write_unsigned_script(path: Path, event: str) -> None:
    """The flood's wrk script: an unsigned POST (refused 401 before its body is read)."""
    setup = "wrk.method = 'POST'\nwrk.body = '{}'\n"
    setup += f"wrk.headers['X-GitHub-Event'] = {_lua_string(event)}\n"
    setup += "wrk.headers['Content-Type'] = 'application/json'\n"
    path.write_text(setup + LUA)


def refusals_kept(db: Path | str) -> int:
    if isinstance(db, str):
        import psycopg

        with psycopg.connect(db) as conn:
            row = conn.execute("SELECT count(*) FROM refusals").fetchone()
        return int(row[0]) if row else 0
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM refusals").fetchone()[0])
    except sqlite3.OperationalError:  # a bot before the table (PYTHONPATH at an older tree)
        return -1
    finally:
        conn.close()


@dataclass(frozen=True)
class Flood:
    alone_p99_ms: list[float]
    flooded_p99_ms: list[float]
    alone_rate: list[float]
    flooded_rate: list[float]
    refused: int
    flood_errors: int
    kept: int

    @property
    def ratio(self) -> float:
        return statistics.median(self.flooded_p99_ms) / statistics.median(self.alone_p99_ms)


def flood_run(
    url: str,
    script: Path,
    unsigned: Path,
    db: Path | str,
    count: int,
    duration: float,
    threads: int,
) -> Flood:
    """Rounds of valid deliveries at concurrency 16: alone, then while a second wrk floods
    unsigned ones, until the flood has sent `count` (three rounds at least, twenty at most);
    the medians of each kind of window are compared (the machine's own noise moves single
    windows a lot)."""
    alone: list[dict[str, int]] = []
    flooded: list[dict[str, int]] = []
    refused = errors = 0
    seconds = max(1, round(duration))
    while len(flooded) < 20 and (len(flooded) < 3 or refused < count):
        alone.append(run_wrk(url, script, f"alone{len(alone)}", 16, seconds, threads))
        flood = subprocess.Popen(
            [
                "wrk",
                f"-t{threads}",
                "-c4",
                f"-d{seconds + 1}s",
                "--timeout",
                "10s",
                "-s",
                str(unsigned),
                url,
                "--",
                f"flood{len(flooded)}",
                "401",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(0.5)  # the flood is under way before the deliveries are measured
        flooded.append(run_wrk(url, script, f"flooded{len(flooded)}", 16, seconds, threads))
        out, _ = flood.communicate()
        raw = next(json.loads(line[7:]) for line in out.splitlines() if line.startswith("RESULT "))
        refused += int(raw["accepted"])
        # The route closes the connection after each refusal: wrk counts that as a read
        # error, so only answers other than 401 are counted here.
        errors += int(raw["other"])
    time.sleep(2.5)  # the refusal log writes about once a second

    def rate(r: dict[str, int]) -> float:
        return r["accepted"] / (r["duration_us"] / 1e6)

    return Flood(
        alone_p99_ms=[r["p99_us"] / 1000 for r in alone],
        flooded_p99_ms=[r["p99_us"] / 1000 for r in flooded],
        alone_rate=[rate(r) for r in alone],
        flooded_rate=[rate(r) for r in flooded],
        refused=refused,
        flood_errors=errors,
        kept=refusals_kept(db),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per level")
    parser.add_argument("--levels", default="1,16,64", help="comma-separated concurrencies")
    parser.add_argument("--threads", type=int, default=1, help="wrk threads")
    parser.add_argument("--body", type=Path, default=DEFAULT_BODY, help="payload to send")
    parser.add_argument("--event", default="issues", help="X-GitHub-Event to send")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--flood",
        type=int,
        default=0,
        metavar="N",
        help="also measure valid deliveries under a flood of N unsigned requests",
    )
    parser.add_argument(
        "--database-url",
        help="a Postgres DSN to store into (an empty database or schema); default SQLite",
    )
    parser.add_argument(
        "--receivers", type=int, default=1, help="`bot serve --receivers` (bench/scale.py: 1 and 2)"
    )
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit(
            "wrk is not installed: BOT_SETUP_BENCH=1 bash scripts/setup (or apt-get install wrk)"
        )
    if not args.body.is_file():
        raise SystemExit(f"{args.body} not found; pass --body PATH")
    body = args.body.read_bytes()
    load = os.getloadavg()

    with tempfile.TemporaryDirectory(prefix="bench-intake-") as tmp:
        work = Path(tmp)
        script = work / "signed.lua"
        write_script(script, body, args.event)
        port = free_port()
        env = {
            **os.environ,
            "BOT_DATA_DIR": str(work / "data"),
            "BOT_WEBHOOK_SECRET": SECRET,
            "BOT_APP_SLUG": "bench-bot",
        }
        if args.database_url:
            env["BOT_DATABASE_URL"] = args.database_url
        log_file = (work / "serve.log").open("wb")
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bot.cli",
                "serve",
                "--no-worker",
                "--receivers",
                str(args.receivers),
                "--port",
                str(port),
            ],
            cwd=work,
            env=env,
            stdout=log_file,
            stderr=log_file,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            wait_ready(base + "/readyz", proc)
            url = base + "/webhooks/github"
            run_wrk(url, script, "warmup", 16, 2, args.threads)
            results: list[Level] = []
            for concurrency in (int(c) for c in args.levels.split(",") if c.strip()):
                prefix = f"c{concurrency}"
                pids = tree(proc.pid)  # with --receivers N, the receivers too
                cpu_before = sum(cpu_seconds(pid) for pid in pids)
                raw = run_wrk(url, script, prefix, concurrency, args.duration, args.threads)
                cpu = sum(cpu_seconds(pid) for pid in pids) - cpu_before
                results.append(
                    Level(
                        concurrency=concurrency,
                        requests=raw["requests"],
                        accepted=raw["accepted"],
                        other=raw["other"],
                        errors=raw["errors"],
                        seconds=raw["duration_us"] / 1e6,
                        p50_ms=raw["p50_us"] / 1000,
                        p99_ms=raw["p99_us"] / 1000,
                        max_ms=raw["max_us"] / 1000,
                        stored=stored(args.database_url or work / "data" / "bot.sqlite3", prefix),
                        cpu_us=cpu / max(1, raw["requests"]) * 1e6,
                    )
                )
            flooded: Flood | None = None
            if args.flood:
                unsigned = work / "unsigned.lua"
                write_unsigned_script(unsigned, args.event)
                db = args.database_url or work / "data" / "bot.sqlite3"
                flooded = flood_run(
                    url, script, unsigned, db, args.flood, args.duration, args.threads
                )
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            log_file.close()
            slow_commits = sum(
                1 for line in (work / "serve.log").read_text().splitlines() if "slow commit" in line
            )

    ok = True
    lines = [
        f"{'Postgres' if args.database_url else 'SQLite'}, "
        f"body {len(body)} bytes ({args.body.name}), {os.cpu_count()} CPUs, "
        f"{platform.python_implementation()} {platform.python_version()}, wrk -t{args.threads}, "
        f"load average before {load[0]:.2f}, after {os.getloadavg()[0]:.2f}",
        f"{'conc':>5} {'deliveries/s':>13} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} "
        f"{'202s':>8} {'stored':>8} {'cpu us':>7}  check",
    ]
    for r in results:
        # wrk stops with up to `concurrency` requests in flight: the server may have committed
        # those without wrk reading the 202, so stored may exceed the 202s by at most that.
        good = r.other == 0 and r.errors == 0 and 0 <= r.stored - r.accepted <= r.concurrency
        ok &= good
        lines.append(
            f"{r.concurrency:>5} {r.rate:>13.0f} {r.p50_ms:>8.2f} {r.p99_ms:>8.2f} {r.max_ms:>8.2f} "
            f"{r.accepted:>8} {r.stored:>8} {r.cpu_us:>7.0f}  {'ok' if good else 'MISMATCH'}"
        )
    lines.append(f"commits slower than 100 ms: {slow_commits}")
    if flooded is not None:
        f = flooded
        bounded = -1 <= f.kept <= 10_000 and f.refused >= args.flood
        ok &= bounded
        med = statistics.median
        lines += [
            f"flood: {f.refused} unsigned requests refused (401) over {len(f.flooded_p99_ms)} "
            f"windows ({f.flood_errors} answers other than 401), {f.kept} kept in the "
            f"refusals table ({'ok' if bounded else 'UNBOUNDED/SHORT'})",
            "valid at c16, p99 ms alone: "
            + " ".join(f"{v:.1f}" for v in f.alone_p99_ms)
            + "; flooded: "
            + " ".join(f"{v:.1f}" for v in f.flooded_p99_ms),
            f"median p99 alone {med(f.alone_p99_ms):.2f} ms, flooded {med(f.flooded_p99_ms):.2f} ms:"
            f" ratio {f.ratio:.3f}; median deliveries/s alone {med(f.alone_rate):.0f},"
            f" flooded {med(f.flooded_rate):.0f}",
        ]
    if args.json:
        print(json.dumps([{**r.__dict__, "rate": r.rate} for r in results]))
    else:
        print("\n".join(lines))
    return 0 if ok else 1


def _lua_string(text: str) -> str:
    escaped = (
        text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    )
    return f'"{escaped}"'


if __name__ == "__main__":
    sys.exit(main())
