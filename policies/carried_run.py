"""A BLOCKED run carried in its own comment, for a deployment that keeps no store between
events (`bot action`: each job has a store of its own).

`decide` answers the newest BLOCKED run on the issue or pull request, and it needs that run's
record: its workflow, its recorded outcome (the question, its options and what the app itself
asked about: the risks an option approves) and the arguments its workflow was given. A server
finds them in its store. A job finds them here: a hidden line the app appends to the BLOCKED
comment, signed like the review memory (HMAC over the repository, the number and the text,
with the app's state key), so a copy in anyone else's comment, or a line changed by hand,
is not a run the app will resume. The record's arguments are dropped when the line would
grow past `MAX_CHARS` (the `decide` then says it cannot resume); the question never is.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_CHARS", "CarriedRun", "carried_line", "read_carried"]

PREFIX = "<!-- bot:blocked-run "
SUFFIX = " -->"
MAX_CHARS = 20_000
"""The line's text at most: it shares a comment (65,536 characters) with a review's memory."""
_LINE = re.compile(r"<!-- bot:blocked-run ([0-9a-f]{64}) ([A-Za-z0-9+/]+=*) -->")
_LABEL = b"bot:blocked-run:v1"
_FIELDS = ("id", "workflow", "target_kind", "number", "repo", "mode")


@dataclass(frozen=True, slots=True)
class CarriedRun:
    """What the store would hold of a BLOCKED run."""

    id: str
    workflow: str
    target_kind: str
    number: int
    repo: str
    mode: str
    outcome: dict[str, Any]
    args: dict[str, Any] | None


def _mac(key: bytes, repo: str, number: int, text: str) -> str:
    message = b"\0".join([_LABEL, repo.lower().encode(), str(number).encode(), text.encode()])
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def _pack(data: Mapping[str, Any]) -> str:
    raw = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str).encode()
    return base64.b64encode(zlib.compress(raw, 9)).decode("ascii")


def carried_line(run: CarriedRun, *, key: bytes) -> str:
    """The signed hidden line for the BLOCKED comment of `run`."""
    data: dict[str, Any] = {name: getattr(run, name) for name in _FIELDS}
    data["outcome"] = run.outcome
    text = _pack({**data, "args": run.args})
    if len(text) > MAX_CHARS:
        text = _pack({**data, "args": None})
    return f"{PREFIX}{_mac(key, run.repo, run.number, text)} {text}{SUFFIX}"


def read_carried(body: str | None, *, key: bytes, repo: str, number: int) -> CarriedRun | None:
    """The run a line of `body` carries, when the app signed it for this repository and
    number; None for anything else (no line, a bad signature, an unreadable record)."""
    for match in _LINE.finditer(body or ""):
        mac, text = match.group(1), match.group(2)
        if len(text) > MAX_CHARS * 2 or not hmac.compare_digest(mac, _mac(key, repo, number, text)):
            continue
        try:
            raw = zlib.decompressobj().decompress(base64.b64decode(text, validate=True), 4_000_000)
            data = json.loads(raw)
            run = CarriedRun(
                id=str(data["id"]),
                workflow=str(data["workflow"]),
                target_kind=str(data["target_kind"]),
                number=int(data["number"]),
                repo=str(data["repo"]),
                mode=str(data["mode"]),
                outcome=dict(data["outcome"]),
                args=dict(data["args"]) if isinstance(data.get("args"), dict) else None,
            )
        except (binascii.Error, zlib.error, ValueError, KeyError, TypeError):
            continue
        if run.repo.lower() == repo.lower() and run.number == number:
            return run
    return None
