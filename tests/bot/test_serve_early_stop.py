"""A receiver told to stop before its server has started exits cleanly, with JSON lines only."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# SIGTERM lands after the server coroutine exists but before any loop has run it: the moment a
# supervisor stopping a receiver that is still starting can hit.
SCRIPT = textwrap.dedent(
    """
    import os, signal, uvicorn
    from starlette.applications import Starlette
    from bot.commands.serve import _run_uvicorn
    from bot.log import configure

    configure(json_lines=True)
    original = uvicorn.Config.get_loop_factory

    def stop_now(self):
        os.kill(os.getpid(), signal.SIGTERM)
        return original(self)

    uvicorn.Config.get_loop_factory = stop_now
    try:
        _run_uvicorn(Starlette(), host="127.0.0.1", port=0)
    finally:
        import gc; gc.collect()
    """
)


def test_a_stop_before_the_server_starts_is_clean_and_leaves_no_stray_line() -> None:
    done = subprocess.run(
        [sys.executable, "-W", "always", "-c", SCRIPT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    for line in (done.stdout + done.stderr).splitlines():
        assert json.loads(line), line  # nothing but log lines
    assert "never awaited" not in done.stderr


def test_warnings_are_written_as_log_lines() -> None:
    script = (
        "import warnings; from bot.log import configure; configure(json_lines=True);"
        " warnings.warn('an old call', DeprecationWarning)"
    )
    done = subprocess.run(
        [sys.executable, "-W", "always", "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    assert any("an old call" in str(line["msg"]) for line in lines), done.stderr
