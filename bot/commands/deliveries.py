"""`bot replay` (decide a saved payload offline, or run a stored delivery skipped for missing
settings again) and `bot deliveries` (what was received, what was decided, its job and the runs
it started).

`bot deliveries` prints a header, then one line per delivery, oldest first: when it was
received (UTC, to the second), its GUID, event, decision, job and runs, and the workflow or the
skip's reason. `--event NAME[.ACTION]`, `--repo OWNER/NAME`, `--decision` and `--since` (a
duration such as 3d or 12h, as `bot redeliver --since` reads it, or an ISO date or time) filter
it in the store (`Storage.delivery_summaries`); `--limit N` keeps the N most recent of those.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.commands.since import parse_since
from bot.events import parse_event
from bot.runs.worker import DEFAULT_APP_SLUG
from bot.settings import SettingsError, load_settings
from bot.store.backend import job_queue, open_store
from bot.store.contract import DeliverySummary, StoreError
from bot.store.queue.base import JobStatus
from bot.store.records import DECISIONS
from bot.wiring import has_credentials, has_model
from policies.config import ConfigError, parse_repo_config
from policies.event import Skip, SkipReason
from policies.interaction import resolve_run_interaction_policy
from policies.lifecycle import lifecycle_change
from policies.triggers import decide

PERMISSIONS = ("admin", "maintain", "write", "triage", "read", "none")


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    replay = subparsers.add_parser(
        "replay",
        help="print the decision for a saved webhook payload, without any network; or, with "
        "--delivery, run a stored delivery skipped not_configured again",
    )
    replay.add_argument("payload", type=Path, nargs="?", metavar="PAYLOAD.json")
    replay.add_argument("--event", help="the X-GitHub-Event name, e.g. issues (with PAYLOAD.json)")
    replay.add_argument(
        "--delivery",
        metavar="GUID",
        help="queue the stored delivery GUID again, once the settings it lacked are set "
        "(a running worker picks it up)",
    )
    replay.add_argument(
        "--permission",
        choices=PERMISSIONS,
        help="the sender's permission on the repository (default: unknown, which refuses commands)",
    )
    replay.add_argument(
        "--config", type=Path, help="a .github/bot.yml to decide with (default: all defaults)"
    )
    replay.add_argument("--json", action="store_true", help="print one JSON object")
    replay.set_defaults(func=run_replay)

    deliveries = subparsers.add_parser(
        "deliveries", help="list stored deliveries: decisions, jobs and the runs they started"
    )
    deliveries.add_argument("--limit", type=int, default=None, help="only the N most recent")
    deliveries.add_argument(
        "--event", default="", metavar="NAME[.ACTION]", help="only this event, e.g. issues.opened"
    )
    deliveries.add_argument("--repo", default="", metavar="OWNER/NAME", help="only this repository")
    deliveries.add_argument(
        "--decision", default="", choices=DECISIONS, help="only those decided so (or pending)"
    )
    deliveries.add_argument(
        "--since", default=None, help="only those received since: 3d, 12h, or a date (2024-05-01)"
    )
    deliveries.add_argument("--json", action="store_true", help="print JSON lines")
    deliveries.set_defaults(func=run_deliveries)


def _fail(message: str) -> int:
    print(f"bot: {message}", file=sys.stderr)
    return 2


def run_replay(args: argparse.Namespace) -> int:
    if args.delivery is not None:
        if args.payload is not None:
            return _fail("give either PAYLOAD.json or --delivery GUID, not both")
        return run_stored(args.delivery)
    if args.payload is None or args.event is None:
        return _fail("give PAYLOAD.json and --event EVENT, or --delivery GUID")
    try:
        settings = load_settings()
    except SettingsError as exc:
        return _fail(str(exc))
    slug = settings.app_slug
    if slug is None:
        slug = DEFAULT_APP_SLUG
        print(f"bot: BOT_APP_SLUG is not set; deciding as @{slug}", file=sys.stderr)
    try:
        payload = json.loads(args.payload.read_bytes())
    except OSError as exc:
        return _fail(f"cannot read {args.payload}: {exc.strerror}")
    except (ValueError, RecursionError) as exc:
        return _fail(f"{args.payload} is not valid JSON: {exc}")
    if not isinstance(payload, dict):
        return _fail(f"{args.payload} must hold a JSON object, the webhook payload")
    try:
        text = None if args.config is None else args.config.read_text(encoding="utf-8")
        config = parse_repo_config(text)
    except OSError as exc:
        return _fail(f"cannot read {args.config}: {exc.strerror}")
    except ConfigError as exc:
        return _fail(f"{args.config}: {exc}")

    event = parse_event(args.event, "replay", payload)
    mode = resolve_run_interaction_policy({"context": {"channel_name": "github"}}).mode.value
    change = lifecycle_change(event)
    if change is not None:
        if args.json:
            print(json.dumps({"decision": "lifecycle", "workflow": None, "reason": change.message}))
        else:
            print(f"lifecycle: {change.message}")
        return 0
    decision = decide(event, config, app_slug=slug, permission=args.permission)
    if isinstance(decision, Skip):
        result: dict[str, object] = {
            "decision": "skip",
            "workflow": None,
            "reason": decision.message,
            "mode": mode,
        }
    else:
        result = {
            "decision": "trigger",
            "workflow": decision.workflow,
            "reason": decision.command,
            "mode": mode,
            "target": f"{decision.repo_full_name}#{decision.number}",
            "actor": decision.actor,
        }
        if decision.args:
            result["args"] = decision.args
    if args.json:
        print(json.dumps(result))
    elif result["decision"] == "skip":
        print(f"skip: {result['reason']}")
    else:
        print(f"trigger {result['workflow']} on {result['target']} (mode {mode})")
    return 0


def run_stored(guid: str) -> int:
    """Queue a stored delivery that was skipped `not_configured` again: the worker decides it
    anew, as if it had just come. Any other delivery is refused (it ran, or was skipped for a
    reason settings do not change), and so is one whose job is already waiting."""
    try:
        settings = load_settings()
        store = open_store(settings)
    except (SettingsError, StoreError) as exc:
        return _fail(str(exc))
    try:
        found = store.find_delivery(guid)
        if found is None:
            return _fail(f"no delivery {guid} is stored (see `bot deliveries`)")
        delivery, _ = found
        reason = delivery.reason or ""
        if delivery.decision != "skip" or not reason.startswith(SkipReason.NOT_CONFIGURED.value):
            decided = delivery.decision or "pending"
            if reason:
                decided += f" ({reason})"
            return _fail(
                f"delivery {guid} was decided {decided}; only deliveries skipped "
                f"{SkipReason.NOT_CONFIGURED.value} are run again"
            )
        queue = job_queue(store)
        jobs = queue.jobs_for_delivery(guid)
        if any(job.status in (JobStatus.QUEUED, JobStatus.RUNNING) for job in jobs):
            return _fail(f"delivery {guid} is queued already")
        lacking = [
            name
            for name, ok in (
                ("GitHub App credentials", has_credentials(settings)),
                ("a model", has_model(settings)),
            )
            if not ok
        ]
        if lacking:
            print(
                f"bot: these settings still lack {' and '.join(lacking)}; the worker skips it "
                "again unless its own settings have them",
                file=sys.stderr,
            )
        job_id = queue.enqueue_sync(guid, kind=f"replay-{len(jobs)}")
    finally:
        store.close()
    print(f"queued {guid} again (job {job_id})")
    return 0


def _summary_json(row: DeliverySummary) -> dict[str, object]:
    d = row.delivery
    job = None
    if row.job_status is not None:
        job = {
            "status": row.job_status,
            "attempts": row.attempts,
            "max_attempts": row.max_attempts,
            "last_error": row.last_error,
        }
    return {
        "delivery_id": d.guid,
        "event": d.event,
        "action": d.action,
        "received_at": d.received_at,
        "received": _utc(d.received_at),
        "decision": d.decision,
        "workflow": d.workflow,
        "reason": d.reason,
        "job": job,
        "runs": [{"run_id": run_id, "status": status} for run_id, status in row.runs],
    }


def _utc(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _columns(received: str, guid: str, event: str, decision: str, job: str, runs: str) -> str:
    return f"{received:20}  {guid:36}  {event:32}  {decision:9}  {job:13}  {runs:26}"


HEADER = _columns("RECEIVED (UTC)", "DELIVERY", "EVENT", "DECISION", "JOB", "RUNS") + "  DETAIL"


def _summary_line(row: DeliverySummary) -> str:
    """When received, guid, event, decision, the job (status and attempts), the runs, then the
    detail, under `HEADER`."""
    d = row.delivery
    event = f"{d.event}.{d.action}" if d.action else d.event
    job = "no job"
    if row.job_status is not None:
        job = f"{row.job_status} {row.attempts}/{row.max_attempts}"
    runs = ",".join(f"{run_id}:{status}" for run_id, status in row.runs) or "-"
    detail = d.workflow or d.reason or ""
    line = _columns(_utc(d.received_at), d.guid, event, d.decision or "pending", job, runs)
    return f"{line}  {detail}"


def run_deliveries(args: argparse.Namespace) -> int:
    try:
        since = None if args.since is None else parse_since(args.since, now=time.time())
    except ValueError as exc:
        return _fail(f"--since: {exc}")
    event, _, action = args.event.partition(".")
    try:
        settings = load_settings()
        store = open_store(settings)
    except (SettingsError, StoreError) as exc:
        return _fail(str(exc))
    try:
        rows = store.delivery_summaries(
            limit=args.limit,
            event=event,
            action=action,
            decision=args.decision,
            since=since,
            repo=args.repo,
        )
    finally:
        store.close()
    if rows and not args.json:
        print(HEADER)
    for row in rows:
        if args.json:
            print(json.dumps(_summary_json(row)))
        else:
            print(_summary_line(row))
    if not rows and not args.json:
        filtered = args.event or args.repo or args.decision or args.since is not None
        print("no stored delivery matches" if filtered else "no deliveries stored", file=sys.stderr)
    return 0
