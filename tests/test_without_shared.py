"""The project alone in a directory, with no ../shared beside it: the suite still collects,
the tests that read payloads use the project's own fixtures, and corpus tests skip."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow

# Tests that read GitHub payloads; each must pass or skip on the project's files alone.
PAYLOAD_TESTS = [
    "tests/bot/test_events.py",
    "tests/bot/test_segments.py",
    "tests/bot/test_cli_intake.py",
    "tests/bot/test_worker.py",
]


def project_files() -> list[str]:
    """What a clone holds, plus files not committed yet (tracked or not, never ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return sorted({name for name in listed.split("\0") if name})


@pytest.fixture(scope="module")
def alone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the project in an otherwise empty directory."""
    copy = tmp_path_factory.mktemp("alone") / "project"
    for name in project_files():
        source = ROOT / name
        if source.is_file() and not source.is_symlink():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    assert not (copy.parent / "shared").exists()
    return copy


def pytest_in(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TESTS_"))}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_whole_suite_collects_without_shared(alone: Path) -> None:
    result = pytest_in(alone, "--collect-only", "-q")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_payload_tests_pass_or_skip_with_a_reason_without_shared(alone: Path) -> None:
    result = pytest_in(alone, "-q", "-rs", *PAYLOAD_TESTS)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    skipped = [line for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    assert skipped, result.stdout[-2000:]
    # The only other skip allowed: the Postgres backend's tests, when no server is given.
    reasons = ("../shared/github-payloads", "needs a Postgres server")
    assert all(any(r in line for r in reasons) for line in skipped), skipped
