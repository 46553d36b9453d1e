"""Intake scale-out: `bot serve --receivers 1` and `--receivers 2`, default and fsync durability,
side by side with Probot, all loaded by wrk the way bench/intake.py does.

Each round starts every server in turn on a fresh data directory on 127.0.0.1, warms it up
for 2 s and loads `POST /webhooks/github` with wrk at one concurrency (16 by default) for
`--duration` seconds, with bench/intake.py's script: one signed body (issues/opened, 13.5 KB),
a distinct X-GitHub-Delivery per request. For the bot, every 202 must be a stored delivery
with one job. Rounds alternate the servers, so that a change in the machine's load falls on
all of them; the figures printed are medians over the rounds, with their range.

Probot (14.3.2, the `probot run` setup: one Node process, the webhook middleware verifying the
signature and dispatching to an app whose handler does nothing) is installed into bench/out/
with npm on first use. It answers 200 once its handlers are done and stores nothing; the bot
answers 202 once the delivery and its job are committed.

    .venv/bin/python bench/scale.py [--duration 8] [--rounds 3] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.intake import (  # noqa: E402
    DEFAULT_BODY,
    SECRET,
    cpu_seconds,
    free_port,
    run_wrk,
    stored,
    tree,
    wait_ready,
    write_script,
)

PROBOT_VERSION = "14.3.2"
PROBOT_DIR = ROOT / "bench" / "out" / "probot"


@dataclass(frozen=True)
class Server:
    key: str
    name: str
    receivers: int = 0  # 0: Probot
    durability: str = "normal"


SERVERS = (
    Server("probot", "probot"),
    Server("r1", "bot, 1 receiver", 1),
    Server("r2", "bot, 2 receivers", 2),
    Server("r1-fsync", "bot, 1 receiver, fsync", 1, "fsync"),
    Server("r2-fsync", "bot, 2 receivers, fsync", 2, "fsync"),
)


@dataclass(frozen=True)
class Result:
    rate: float
    p50_ms: float
    p99_ms: float
    cpu_us: float
    ok: bool
    slow_commits: int


def install_probot() -> bool:
    """Probot in bench/out/probot (npm, once); False when Node or npm is missing."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        return False
    PROBOT_DIR.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "bench" / "probot_server.mjs", PROBOT_DIR / "server.mjs")
    if not (PROBOT_DIR / "node_modules" / "probot").is_dir():
        (PROBOT_DIR / "package.json").write_text(
            json.dumps({"name": "probot-bench", "private": True, "type": "module"})
        )
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", f"probot@{PROBOT_VERSION}"],
            cwd=PROBOT_DIR,
            check=True,
            capture_output=True,
        )
    key = PROBOT_DIR / "app.pem"
    if not key.exists():  # never used to sign anything: Probot wants one to start
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        pem = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
        key.write_bytes(pem)
    return True


def measure(
    server: Server, work: Path, script: Path, args: argparse.Namespace, label: str
) -> Result:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    data = work / f"data-{label}"
    log_file = (work / f"{label}.log").open("wb")
    if server.receivers:
        command = [sys.executable, "-m", "bot.cli", "serve", "--no-worker"]
        command += ["--receivers", str(server.receivers), "--port", str(port)]
        env = {
            **os.environ,
            "BOT_DATA_DIR": str(data),
            "BOT_WEBHOOK_SECRET": SECRET,
            "BOT_APP_SLUG": "bench-bot",
            "BOT_DURABILITY": server.durability,
            "PYTHONPATH": str(ROOT),
        }
        ready, expected = base + "/readyz", 202
    else:
        command = ["node", "server.mjs", str(port), SECRET, "app.pem"]
        env = {**os.environ, "NODE_ENV": "production"}
        ready, expected = base + "/webhooks/github", 0
    proc = subprocess.Popen(
        command,
        cwd=work if server.receivers else PROBOT_DIR,
        env=env,
        stdout=log_file,
        stderr=log_file,
    )
    try:
        if server.receivers:
            wait_ready(ready, proc)
        else:
            _wait_listening(port, proc)
            expected = 200
        url = base + "/webhooks/github"
        run_wrk(url, script, f"warmup{label}", args.concurrency, 2, args.threads, expected)
        pids = tree(proc.pid)
        before = sum(cpu_seconds(pid) for pid in pids)
        prefix = f"m{label}"
        raw = run_wrk(url, script, prefix, args.concurrency, args.duration, args.threads, expected)
        cpu = sum(cpu_seconds(pid) for pid in pids) - before
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        log_file.close()
    ok = raw["other"] == 0 and raw["errors"] == 0
    log_text = (work / f"{label}.log").read_text(errors="replace")
    if server.receivers:
        count = stored(data / "bot.sqlite3", prefix)
        ok &= 0 <= count - raw["accepted"] <= args.concurrency
    return Result(
        rate=raw["accepted"] / (raw["duration_us"] / 1e6),
        p50_ms=raw["p50_us"] / 1000,
        p99_ms=raw["p99_us"] / 1000,
        cpu_us=cpu / max(1, raw["requests"]) * 1e6,
        ok=ok,
        slow_commits=sum(1 for line in log_text.splitlines() if "slow commit" in line),
    )


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"probot exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("probot did not start")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="measurements of each server")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1, help="wrk threads")
    parser.add_argument("--body", type=Path, default=DEFAULT_BODY, help="payload to send")
    parser.add_argument("--event", default="issues", help="X-GitHub-Event to send")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--servers",
        default=",".join(s.key for s in SERVERS),
        help="comma-separated, of " + ", ".join(s.key for s in SERVERS),
    )
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit(
            "wrk is not installed: BOT_SETUP_BENCH=1 bash scripts/setup (or apt-get install wrk)"
        )
    wanted = args.servers.split(",")
    servers = [s for s in SERVERS if s.key in wanted]
    note = ""
    if "probot" in wanted and not install_probot():
        servers = [s for s in servers if s.receivers]
        note = "Probot skipped: Node.js and npm are needed (apt-get install nodejs npm)"
    body = args.body.read_bytes()
    load = os.getloadavg()
    results: dict[str, list[Result]] = {s.name: [] for s in servers}
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        work = Path(tmp)
        script = work / "signed.lua"
        write_script(script, body, args.event)
        for round_ in range(args.rounds):
            for n, server in enumerate(servers):
                label = f"{round_}-{n}"
                results[server.name].append(measure(server, work, script, args, label))
    after = os.getloadavg()

    if args.json:
        print(json.dumps({name: [r.__dict__ for r in rs] for name, rs in results.items()}))
        return 0 if all(r.ok for rs in results.values() for r in rs) else 1
    print(
        f"body {len(body)} bytes ({args.body.name}), {os.cpu_count()} CPUs, "
        f"{platform.python_implementation()} {platform.python_version()}, wrk -t{args.threads} "
        f"-c{args.concurrency} {args.duration:g} s x {args.rounds} rounds, "
        f"load average before {load[0]:.2f}, after {after[0]:.2f}"
    )
    if note:
        print(note)
    print("cpu us: CPU time of every process of the server per request; slow: commits over 100 ms")
    print(
        f"{'server':<26} {'deliveries/s':>13} {'(range)':>15} {'p50 ms':>7} {'p99 ms':>7} "
        f"{'(range)':>13} {'cpu us':>7} {'slow':>5}  check"
    )
    medians: dict[str, tuple[float, float]] = {}
    for name, rs in results.items():
        rate = statistics.median(r.rate for r in rs)
        p99 = statistics.median(r.p99_ms for r in rs)
        medians[name] = (rate, p99)
        print(
            f"{name:<26} {rate:>13.0f} {_range([r.rate for r in rs], '.0f'):>15} "
            f"{statistics.median(r.p50_ms for r in rs):>7.2f} {p99:>7.2f} "
            f"{_range([r.p99_ms for r in rs], '.1f'):>13} "
            f"{statistics.median(r.cpu_us for r in rs):>7.0f} "
            f"{sum(r.slow_commits for r in rs):>5}  "
            f"{'ok' if all(r.ok for r in rs) else 'MISMATCH'}"
        )
    for top, bottom in (
        ("bot, 2 receivers", "probot"),
        ("bot, 2 receivers", "bot, 1 receiver"),
        ("bot, 1 receiver, fsync", "bot, 1 receiver"),
        ("bot, 2 receivers, fsync", "bot, 2 receivers"),
    ):
        if top in medians and bottom in medians:
            print(f"{top} / {bottom}, deliveries/s: {medians[top][0] / medians[bottom][0]:.2f}")
    return 0 if all(r.ok for rs in results.values() for r in rs) else 1


def _range(values: list[float], fmt: str) -> str:
    return f"{min(values):{fmt}}-{max(values):{fmt}}"


if __name__ == "__main__":
    sys.exit(main())
