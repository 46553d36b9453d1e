"""Where a test that drops from root to `nobody` stages the files that `nobody` must reach.

TMPDIR may be private (a home's, a `mktemp -d`): a tree made there is out of `nobody`'s reach,
whatever its own mode. The first temporary directory that every user can pass through is used.
"""

from __future__ import annotations

import stat
import tempfile
from pathlib import Path

import pytest


def _passable(path: Path) -> bool:
    """Whether every directory from / down to `path` lets other users through."""
    try:
        return path.is_dir() and all(p.stat().st_mode & stat.S_IXOTH for p in (path, *path.parents))
    except OSError:
        return False


def reachable_tmp() -> str:
    """TMPDIR when others can pass through it, else /tmp or /var/tmp."""
    for candidate in (tempfile.gettempdir(), "/tmp", "/var/tmp"):
        path = Path(candidate).resolve()
        if _passable(path):
            return str(path)
    pytest.fail("no temporary directory that other users can pass through (TMPDIR, /tmp, /var/tmp)")
