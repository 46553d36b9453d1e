"""`scripts/setup`, run for real on a copy of the checkout: it fails loudly or leaves a working bot.

Every run skips the system packages (`BOT_SETUP_SYSTEM=0`) and keeps pip off the network
(`PIP_NO_INDEX=1`, no pip configuration file): a test that needs pip to install the app stands
in for pip with one that reports success and installs nothing, inside a real virtualenv.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# An interpreter the app accepts: the one running the tests (pyproject asks for >= 3.11).
GOOD_PYTHON = sys.executable
GOOD_VERSION = ".".join(map(str, sys.version_info[:3]))
# The names the script tries, in its order, when PYTHON is unset.
CANDIDATES = ("python3", "python3.14", "python3.13", "python3.12", "python3.11")
FAKE_310 = (
    "#!/bin/sh\n# Answers any question the way a Python 3.10 reports its version.\necho 3.10.13\n"
)


def _version_of(python: str) -> str:
    probe = 'import sys; print("%d.%d.%d" % sys.version_info[:3])'
    out = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=60)
    return out.stdout.strip() if out.returncode == 0 else ""


def _python_310(tmp_path: Path) -> Path:
    """A real Python 3.10 where this machine has one, else a script that reports 3.10."""
    found = [shutil.which("python3.10"), *glob.glob("/root/.pyenv/versions/3.10*/bin/python3.10")]
    for path in filter(None, found):
        if _version_of(path).startswith("3.10."):
            return Path(path)
    fake = tmp_path / "fake-python3.10"
    fake.write_text(FAKE_310)
    fake.chmod(0o755)
    return fake


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """The project's files as git sees them (tracked and new, not ignored), in a fresh folder."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.split(b"\0")
    dest = tmp_path / "checkout"
    for raw in filter(None, listed):
        name = os.fsdecode(raw)
        source = ROOT / name
        if source.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return dest


def _run_setup(checkout: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PIP_", "PYTHON", "VIRTUAL_ENV", "BOT_"))
    }
    base.update(
        BOT_SETUP_SYSTEM="0",
        PIP_NO_INDEX="1",
        PIP_CONFIG_FILE=os.devnull,
        PIP_NO_CACHE_DIR="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    base.update(env)
    return subprocess.run(
        ["bash", str(checkout / "scripts" / "setup")],
        cwd=checkout,
        env=base,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _venv_with_standin_pip(
    checkout: Path, bot_script: str | None = None, record: Path | None = None
) -> Path:
    """A real virtualenv made by the good Python, whose `pip` reports success and installs
    nothing (writing each command line to `record`, one JSON list a line, when given); with
    `bot_script`, a `bin/bot` like the one an install leaves."""
    venv = checkout / ".venv"
    subprocess.run([GOOD_PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    (site,) = venv.glob("lib/python3*/site-packages")
    (site / "pip").mkdir()
    (site / "pip" / "__init__.py").write_text("")
    main = "raise SystemExit(0)\n"
    if record is not None:
        main = (
            "import json, sys\n"
            f"with open({str(record)!r}, 'a') as out:\n"
            "    out.write(json.dumps(sys.argv[1:]) + '\\n')\n" + main
        )
    (site / "pip" / "__main__.py").write_text(main)
    if bot_script is not None:
        bot = venv / "bin" / "bot"
        bot.write_text(bot_script)
        bot.chmod(0o755)
    return venv


def _output(done: subprocess.CompletedProcess[str]) -> str:
    return done.stdout + done.stderr


def test_a_python_older_than_3_11_is_refused_by_name_with_how_to_pick_another(
    checkout: Path, tmp_path: Path
) -> None:
    old = _python_310(tmp_path)
    done = _run_setup(checkout, PYTHON=str(old))
    out = _output(done)
    assert done.returncode != 0, out
    assert str(old) in out and "3.10.13" in out, out
    assert "PYTHON=python3.12 bash scripts/setup" in out, out
    assert not (checkout / ".venv").exists()


def test_no_python_3_11_on_the_path_names_each_one_found(checkout: Path, tmp_path: Path) -> None:
    fakes = tmp_path / "bin"
    fakes.mkdir()
    for name in CANDIDATES:
        (fakes / name).write_text(FAKE_310)
        (fakes / name).chmod(0o755)
    done = _run_setup(checkout, PATH=f"{fakes}:/usr/bin:/bin")
    out = _output(done)
    assert done.returncode != 0, out
    for name in CANDIDATES:
        assert f"{fakes / name} (Python 3.10.13)" in out, out
    assert "PYTHON=python3.12 bash scripts/setup" in out, out
    assert not (checkout / ".venv").exists()


def test_a_venv_made_by_an_old_python_is_replaced_and_a_failing_pip_is_shown(
    checkout: Path, tmp_path: Path
) -> None:
    old = _python_310(tmp_path)
    venv = checkout / ".venv"
    if _version_of(str(old)).startswith("3.10."):
        subprocess.run(
            [str(old), "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
        )
    else:  # the stand-in: a .venv whose python reports 3.10
        (venv / "bin").mkdir(parents=True)
        (venv / "bin" / "python").write_text(FAKE_310)
        (venv / "bin" / "python").chmod(0o755)
    (venv / "made-by-3.10").write_text("")

    # A real pip, kept off the network: it cannot find the first locked package and says so.
    done = _run_setup(checkout, PYTHON=GOOD_PYTHON)
    out = _output(done)
    assert done.returncode != 0, out
    assert "replacing .venv" in out and "3.10.13" in out, out
    first = (ROOT / "requirements-dev.lock").read_text().split("\n\n")[0]
    pin = next(line for line in first.splitlines() if line[:1].isalnum()).split()[0]
    assert f"No matching distribution found for {pin}" in out, out  # pip's own error
    assert "could not install requirements-dev.lock" in out, out
    assert not (venv / "made-by-3.10").exists()
    assert _version_of(str(venv / "bin" / "python")) == GOOD_VERSION


def test_a_pip_that_installs_nothing_fails_the_setup(checkout: Path) -> None:
    # The checkout holds `bot` and `policies`: only the installed command can tell.
    _venv_with_standin_pip(checkout)
    done = _run_setup(checkout, PYTHON=GOOD_PYTHON)
    out = _output(done)
    assert done.returncode != 0, out
    assert ".venv/bin/bot --version" in out, out


def test_the_installed_bot_is_run_from_outside_the_checkout(checkout: Path, tmp_path: Path) -> None:
    record = tmp_path / "bot-ran"
    script = (
        "#!/bin/sh\n"
        f'printf \'%s\\n\' "$PWD" "${{PYTHONPATH-unset}}" "$*" > {record}\n'
        "echo 'bot 0.1.0'\n"
    )
    _venv_with_standin_pip(checkout, bot_script=script)
    done = _run_setup(checkout, PYTHON=GOOD_PYTHON, PYTHONPATH=str(checkout))
    out = _output(done)
    assert done.returncode == 0, out
    cwd, pythonpath, args = record.read_text().splitlines()
    assert not Path(cwd).resolve().is_relative_to(checkout.resolve()), cwd
    assert pythonpath == "unset"  # PYTHONPATH=$PWD would import the checkout, installed or not
    assert args == "--version"
    assert "bot 0.1.0" in out, out


@pytest.mark.parametrize(
    ("bench", "app"),
    [
        pytest.param("0", ["--no-deps", "-e", "."], id="dev"),
        pytest.param("1", ["-e", ".[bench]"], id="bench"),
    ],
)
def test_the_lock_is_installed_with_its_hashes_then_the_app(
    checkout: Path, tmp_path: Path, bench: str, app: list[str]
) -> None:
    record = tmp_path / "pip-commands"
    _venv_with_standin_pip(checkout, bot_script="#!/bin/sh\necho 'bot 0.1.0'\n", record=record)
    done = _run_setup(checkout, PYTHON=GOOD_PYTHON, BOT_SETUP_BENCH=bench)
    assert done.returncode == 0, _output(done)
    commands = [json.loads(line) for line in record.read_text().splitlines()]
    installs = [c for c in commands if c[:1] == ["install"] and "--upgrade" not in c]
    assert len(installs) == 2, commands
    locked, the_app = installs
    assert locked[-3:] == ["--require-hashes", "-r", "requirements-dev.lock"], locked
    assert the_app[-len(app) :] == app, the_app


def test_the_header_documents_how_to_skip_the_system_packages() -> None:
    header = (ROOT / "scripts" / "setup").read_text().split("set -euo pipefail")[0]
    assert "BOT_SETUP_SYSTEM=0" in header and "PYTHON=" in header
