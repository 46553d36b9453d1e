"""`bot replay` (decide a saved payload offline) and `bot deliveries` (what was received)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bot.backend import job_queue, open_store
from bot.events import parse_event
from bot.settings import SettingsError, load_settings
from bot.storage import StoreError
from bot.worker import DEFAULT_APP_SLUG
from policies.config import ConfigError, parse_repo_config
from policies.event import Skip
from policies.interaction import resolve_run_interaction_policy
from policies.triggers import decide

PERMISSIONS = ("admin", "maintain", "write", "triage", "read", "none")


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    replay = subparsers.add_parser(
        "replay", help="print the decision for a saved webhook payload, without any network"
    )
    replay.add_argument("payload", type=Path, metavar="PAYLOAD.json")
    replay.add_argument("--event", required=True, help="the X-GitHub-Event name, e.g. issues")
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
        "deliveries",
        help="list stored deliveries: decision, job state and attempts, runs started",
    )
    deliveries.add_argument("--limit", type=int, default=None, help="only the N most recent")
    deliveries.add_argument("--json", action="store_true", help="print JSON lines")
    deliveries.set_defaults(func=run_deliveries)


def _fail(message: str) -> int:
    print(f"bot: {message}", file=sys.stderr)
    return 2


def run_replay(args: argparse.Namespace) -> int:

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
    decision = decide(event, config, app_slug=slug, permission=args.permission)
    mode = resolve_run_interaction_policy({"context": {"channel_name": "github"}}).mode.value
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


def run_deliveries(args: argparse.Namespace) -> int:
    try:
        settings = load_settings()
        store = open_store(settings)
    except (SettingsError, StoreError) as exc:
        return _fail(str(exc))
    try:
        rows = store.list_deliveries(limit=args.limit, bodies=False)
        guids = [row.guid for row in rows]
        jobs = job_queue(store).jobs_for_deliveries(guids)
        runs = store.runs_for_deliveries(guids)
    finally:
        store.close()
    for row in rows:
        job = jobs[row.guid][-1] if row.guid in jobs else None
        run_ids = [run.id for run in runs.get(row.guid, [])]
        item = {
            "delivery_id": row.guid,
            "event": row.event,
            "action": row.action,
            "received_at": row.received_at,
            "decision": row.decision,
            "workflow": row.workflow,
            "reason": row.reason,
            "job": None
            if job is None
            else {
                "state": job.status.value,
                "attempts": job.attempts,
                "max_attempts": job.max_attempts,
                "last_error": job.last_error,
            },
            "runs": run_ids,
        }
        if args.json:
            print(json.dumps(item))
        else:
            event = f"{row.event}.{row.action}" if row.action else row.event
            outcome = row.decision or "pending"
            state = "-" if job is None else f"{job.status.value} {job.attempts}/{job.max_attempts}"
            detail = row.workflow or row.reason or ""
            print(
                f"{row.guid}  {event:40}  {outcome:8}  {state:10}  {' '.join(run_ids) or '-':16}  {detail}"
            )
    if not rows and not args.json:
        print("no deliveries stored", file=sys.stderr)
    return 0
