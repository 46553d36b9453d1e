"""What a run's writing agents left in a mirror after their worker died, and its removal.

An agent's worktree lives at `<mirror>/bot-worktrees/<run id>/<n>` on a branch
`bot/<label>-<run suffix>-<n>`; the engine reclaims both when the agent ends. A worker killed
mid-run leaves them. `clear_interrupted` removes one run's leftovers when its next attempt
starts (that attempt owns the run, so nothing of it is in use); `sweep_leftovers` removes, at
start-up and then now and again, those of runs that have ended or that the store does not
know. A run still `running` is left to its own next attempt: it may be running elsewhere.
Directories are removed by path, never through git inside them (a tampered worktree cannot
steer the host), and branches only by their exact `bot/...` names.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from bot.agents.gitread import run_git
from bot.git.gitguard import WORKTREES_DIR
from bot.log import get_logger
from bot.workflows.review.suggest import reclaim
from policies.outcome import OUTCOME_STATUSES

if TYPE_CHECKING:
    from bot.store.contract import Storage

log = get_logger(__name__)

_RUN_DIR = re.compile(r"wf_[0-9a-f]{12}")


async def clear_interrupted(git_dir: Path, run_id: str) -> None:
    """Delete what earlier attempts of `run_id` left in the mirror at `git_dir`."""
    suffix = run_id.removeprefix("wf_")[-6:]
    root = git_dir / WORKTREES_DIR / run_id
    paths = [str(p) for p in root.iterdir() if p.is_dir()] if root.is_dir() else []
    listed = await run_git(
        ["for-each-ref", "--format=%(refname:short)", "refs/heads/bot/"], git_dir=git_dir
    )
    names = listed.stdout.decode("utf-8", "replace").split()
    branches = [n for n in names if re.fullmatch(rf"bot/.+-{suffix}-\d+(?:-[0-9a-f]{{6}})?", n)]
    if paths or branches:
        log.info(
            "clearing what an interrupted attempt left",
            extra={"stopped_run": run_id, "worktrees": len(paths), "branches": len(branches)},
        )
        await reclaim(git_dir, paths, branches)
    if root.is_dir() and not any(root.iterdir()):
        root.rmdir()


async def sweep_leftovers(mirrors_root: Path, store: Storage) -> list[str]:
    """Clear the leftovers of every run that has ended, in every mirror; the run ids."""
    cleared: list[str] = []
    for git_dir, run_id in await anyio.to_thread.run_sync(_run_dirs, mirrors_root):
        record = await anyio.to_thread.run_sync(store.get_run, run_id)
        if record is not None and record.status not in OUTCOME_STATUSES:
            continue  # running somewhere, or to be resumed: its own attempt clears it
        await clear_interrupted(git_dir, run_id)
        cleared.append(run_id)
    return cleared


def _run_dirs(mirrors_root: Path) -> list[tuple[Path, str]]:
    """(mirror, run id) for every run with worktrees in any mirror (blocking)."""
    found: list[tuple[Path, str]] = []
    for git_dir in sorted(mirrors_root.glob("*/*.git")):
        base = git_dir / WORKTREES_DIR
        if base.is_dir():
            found += [
                (git_dir, p.name) for p in sorted(base.iterdir()) if _RUN_DIR.fullmatch(p.name)
            ]
    return found


async def sweep_forever(mirrors_root: Path, store: Storage, every_s: float = 3600.0) -> None:
    """`sweep_leftovers` at start-up and every `every_s` seconds (a worker's background task)."""
    while True:
        try:
            cleared = await sweep_leftovers(mirrors_root, store)
        except Exception as exc:  # a broken mirror must not stop the worker
            log.warning("sweeping leftovers failed", extra={"error": str(exc)})
        else:
            if cleared:
                log.info("leftovers of ended runs cleared", extra={"runs": len(cleared)})
        await anyio.sleep(every_s)
