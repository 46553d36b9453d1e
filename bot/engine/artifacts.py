"""Run artifacts: run ids, the run folder, atomic JSON and text writes, lookups.

A run's artifacts are files in its folder. When the engine is given an `ArtifactMirror` (the
bot's database), every artifact written is also put there, so that a run resumed on another
machine finds its journal (`RunStore.restore`) and a page on any machine can read what a run
did without that run's disk.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
import tempfile
from pathlib import Path
from typing import Any, Protocol

from bot.engine.details import RunDetails
from bot.store.queue.fence import fence_holds_now

log = logging.getLogger(__name__)

JOURNAL = "journal.json"
DETAILS = "workflow.json"

RUN_ID = re.compile(r"^wf_[0-9a-f]{12}$")
_RUN_REF = re.compile(r"^(?:wf_[0-9a-f]{0,12}|wf|[0-9a-f_]{1,12})$")


class RunNotFound(LookupError):
    """No run matches the id or suffix given (or more than one does)."""


def new_run_id() -> str:
    """`wf_` + 12 hex."""
    return "wf_" + secrets.token_hex(6)


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temporary file in the same folder and os.replace it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _json_default(value: object) -> object:
    to_dict = getattr(value, "to_dict", None) or getattr(value, "to_json", None)
    if callable(to_dict):
        return to_dict()
    raise TypeError(f"{type(value).__name__} is not JSON-serializable")


def _lenient_default(value: object) -> object:
    try:
        return _json_default(value)
    except TypeError:
        if isinstance(value, set | frozenset | tuple):
            return list(value)
        return repr(value)


def dumps(value: Any, *, pretty: bool = False, strict: bool = True) -> str:
    """JSON text; objects with `to_dict()`/`to_json()` are converted. Not `strict`: anything
    else becomes a list (sets) or its repr, so an artifact write never fails on odd data."""
    indent = 1 if pretty else None  # compact JSON takes the C encoder: much faster
    default = _json_default if strict else _lenient_default
    return json.dumps(value, ensure_ascii=False, indent=indent, default=default)


def json_safe(value: Any) -> Any:
    """`value` as plain JSON data (lenient conversion, see `dumps`)."""
    return json.loads(dumps(value, strict=False))


def atomic_write_json(path: Path, value: Any, *, pretty: bool = False) -> None:
    atomic_write_text(path, dumps(value, pretty=pretty, strict=False))


class ArtifactMirror(Protocol):
    """Where a copy of each run artifact is kept beside the run folder (the bot's database)."""

    def put_artifact(self, run_id: str, name: str, text: str) -> None: ...

    def get_artifact(self, run_id: str, name: str) -> str | None: ...


_ARTIFACT_NAME = re.compile(r"^(?:[a-z]+\.(?:json|md)|worktrees/agent-[0-9]+\.json)$")


class RunStore:
    """The `<data_dir>/runs/` folder: one sub-folder per run id; and its mirror, if any."""

    def __init__(self, data_dir: Path, *, mirror: ArtifactMirror | None = None) -> None:
        self.root = data_dir / "runs"
        self.mirror = mirror

    def write_text(self, run_id: str, name: str, text: str) -> None:
        """Write artifact `name` of the run (a file name, or `worktrees/agent-N.json`).

        The file comes first; the mirror's copy is best effort: a database that cannot take
        it now costs the copy (logged), never the run.
        """
        if not _ARTIFACT_NAME.match(name):
            raise ValueError(f"not an artifact name: {name!r}")
        if not fence_holds_now():
            # This attempt's job is another worker's now (`bot.store.queue.fence`): what it would
            # write (a stale journal, "aborted" as it unwinds) must not replace the new
            # holder's.
            return
        atomic_write_text(self.run_dir(run_id) / name, text)
        if self.mirror is not None:
            try:
                self.mirror.put_artifact(run_id, name, text)
            except Exception as exc:  # any database error: the file is written
                log.warning(
                    "cannot copy a run artifact to the database",
                    extra={"run_id": run_id, "artifact": name, "error": type(exc).__name__},
                )

    def write_json(self, run_id: str, name: str, value: Any, *, pretty: bool = False) -> None:
        self.write_text(run_id, name, dumps(value, pretty=pretty, strict=False))

    def restore(self, run_id: str, name: str) -> bool:
        """Make sure artifact `name` of the run is on this disk, fetching the mirror's copy
        when the file is missing (the run started on another machine). True when it is."""
        path = self.run_dir(run_id) / name
        if path.is_file():
            return True
        if self.mirror is None:
            return False
        try:
            text = self.mirror.get_artifact(run_id, name)
        except Exception as exc:
            log.warning(
                "cannot read a run artifact from the database",
                extra={"run_id": run_id, "artifact": name, "error": type(exc).__name__},
            )
            return False
        if text is None:
            return False
        atomic_write_text(path, text)
        return True

    def run_dir(self, run_id: str) -> Path:
        if not RUN_ID.match(run_id):
            raise RunNotFound(f"not a run id: {run_id!r}")
        return self.root / run_id

    def run_ids(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if RUN_ID.match(p.name))

    def recent_ids(self, limit: int) -> list[str]:
        """The `limit` runs whose workflow.json changed last, oldest first."""

        def mtime(rid: str) -> float:
            try:
                return (self.root / rid / "workflow.json").stat().st_mtime
            except OSError:
                return 0.0

        return sorted(self.run_ids(), key=mtime)[-limit:] if limit > 0 else []

    def resolve(self, ref: str, candidates: list[str] | None = None) -> str:
        """An exact run id or a unique suffix of one; nothing else (no paths)."""
        ref = ref.strip()
        if not _RUN_REF.match(ref):
            raise RunNotFound(f"{ref!r} is not a run id or a run id suffix (wf_ + 12 hex)")
        ids = self.run_ids() if candidates is None else candidates
        if ref in ids:
            return ref
        matches = [rid for rid in ids if rid.endswith(ref)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise RunNotFound(f"no run matches {ref!r}")
        raise RunNotFound(f"{ref!r} matches {len(matches)} runs; give more characters")

    def write_details(self, details: RunDetails) -> None:
        self.write_json(details.run_id, DETAILS, details.to_json())

    def read_details(self, run_id: str) -> RunDetails:
        """The run's details from its folder, else from the mirror (a run of another
        machine's). The mirror's copy is not written here: this machine does not own it."""
        path = self.run_dir(run_id) / DETAILS
        try:
            if path.is_file() or self.mirror is None:
                text = path.read_text(encoding="utf-8")
            else:
                try:
                    found = self.mirror.get_artifact(run_id, DETAILS)
                except Exception as exc:  # any database error
                    raise RunNotFound(
                        f"run {run_id} cannot be read from the database ({type(exc).__name__})"
                    ) from exc
                if found is None:
                    raise RunNotFound(f"no run {run_id} here or in the database")
                text = found
            return RunDetails.from_json(json.loads(text))
        except (OSError, ValueError, TypeError, AttributeError) as exc:  # not our shape
            raise RunNotFound(f"run {run_id} has no readable workflow.json ({exc})") from exc
