"""Resume support: call keys, workspace identity, and the journal of replayable results."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.engine.git import GitError, run_git
from bot.engine.types import AgentType

JOURNAL_CAP = 2 * 1024 * 1024
JOURNAL_VERSION = 1


class JournalError(ValueError):
    """The previous run's journal cannot be used; the run goes ahead in full."""


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def call_key(
    *,
    prompt: str,
    schema: dict[str, Any] | None,
    agent_type: AgentType,
    model: str | None,
    provider: str | None,
    effort: str | None,
    acceptance: dict[str, Any] | None,
    workspace: str,
    mode: str,
) -> str:
    """A hash over everything that decides a read-only call's answer."""
    material = {
        "prompt": prompt,
        "schema": schema,
        "agent_type": {
            "name": agent_type.name,
            "instructions": agent_type.instructions,
            "description": agent_type.description,  # the system prompt's role line
            "tools": sorted(agent_type.tools),
        },
        "model": model,
        "provider": provider,
        "effort": effort,
        "acceptance": acceptance,
        "workspace": workspace,
        "mode": mode,
    }
    return hashlib.sha256(_canonical(material).encode("utf-8")).hexdigest()


def workspace_identity(
    repo: Path | None, commit: str | None, local_root: Path | None
) -> str | None:
    """The commit agents read; with a local work tree, its root and a hash of uncommitted
    changes and untracked files too. None when it cannot be computed safely. Blocking.

    Without a work tree the commit alone is the workspace: its id covers every byte of its
    tree, wherever the repository sits, so a run resumed on another machine (another mirror
    path) replays what the first attempt finished."""
    if commit is None:
        return "no-repository" if repo is None and local_root is None else None
    if local_root is None:
        return _canonical({"commit": commit})
    try:
        root = local_root.resolve()
        digest = hashlib.sha256()
        diff = run_git(
            ["diff", "--binary", "--no-ext-diff", "--no-textconv", commit],
            root,
            optional_locks=False,
        )
        digest.update(diff.stdout)
        listed = run_git(["ls-files", "-z", "--others", "--exclude-standard"], root)
        for name in sorted(n for n in listed.stdout.split(b"\0") if n):
            digest.update(b"\0U" + name + b"\0")
            path = root / name.decode("utf-8", "surrogateescape")
            if path.is_symlink() or not path.is_file():
                digest.update(b"special")
                continue
            with path.open("rb") as fh:  # in chunks: an untracked file can be large
                digest.update(hashlib.file_digest(fh, "sha256").digest())
    except (GitError, OSError):
        return None
    return _canonical({"root": str(root), "commit": commit, "changes": digest.hexdigest()})


@dataclass(slots=True)
class Journal:
    """Entries of this run (to write) and of the run being resumed (to replay, per key)."""

    entries: list[dict[str, Any]] = field(default_factory=list)
    dropped: int = 0
    _previous: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _cursors: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))
    carry: bool = False
    """Write the previous entries not replayed yet along with this run's (a run resuming its
    own interrupted attempt writes the same file it read: nothing recorded may be lost if it
    is interrupted again before replaying everything)."""

    @classmethod
    def resuming(cls, path: Path, *, carry: bool = False) -> Journal:
        """A journal that replays the entries recorded at `path`; raises JournalError."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise JournalError(f"journal unreadable ({type(exc).__name__})") from exc
        if not isinstance(data, dict) or data.get("version") != JOURNAL_VERSION:
            raise JournalError("journal has an unknown format")
        entries = data.get("entries")
        if not isinstance(entries, list):
            raise JournalError("journal has no entry list")
        previous: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for entry in entries:
            if isinstance(entry, dict) and isinstance(entry.get("key"), str):
                previous[entry["key"]].append(entry)
        return cls(_previous=dict(previous), carry=carry)

    def claim(self, key: str) -> dict[str, Any] | None:
        """The Nth recorded result for the Nth identical call, or None (then it runs)."""
        recorded = self._previous.get(key)
        if not recorded:
            return None
        n = self._cursors[key]
        if n >= len(recorded):
            return None
        self._cursors[key] = n + 1
        return recorded[n]

    def record(self, key: str, result: dict[str, Any]) -> None:
        self.entries.append({"key": key, **result})

    def _unclaimed(self) -> list[dict[str, Any]]:
        return [
            entry
            for key, recorded in self._previous.items()
            for entry in recorded[self._cursors[key] :]
        ]

    def to_json(self) -> dict[str, Any]:
        """The journal capped at 2 MiB of JSON, oldest entries dropped first."""
        entries = [*self.entries, *self._unclaimed()] if self.carry else self.entries
        sizes = [len(_canonical(e).encode("utf-8")) + 2 for e in entries]
        total = sum(sizes)
        start = 0
        while total > JOURNAL_CAP and start < len(sizes):
            total -= sizes[start]
            start += 1
        return {
            "version": JOURNAL_VERSION,
            "dropped": self.dropped + start,
            "entries": entries[start:],
        }
