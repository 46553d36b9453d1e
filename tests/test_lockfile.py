"""The image installs exactly what requirements.lock pins, each file checked against its hash,
and its build context holds the app and nothing secret. `bash scripts/lock --check` (run by
.ci/run) says whether the lock is what pyproject.toml resolves to; these tests say that the
lock covers every runtime dependency and that the Dockerfile and .dockerignore use it right."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")
HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}\b")


def pyproject() -> dict[str, object]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def runtime_requirements() -> list[Requirement]:
    project = pyproject()["project"]
    assert isinstance(project, dict)
    return [Requirement(text) for text in project["dependencies"]]


def dev_requirements() -> list[Requirement]:
    project = pyproject()["project"]
    assert isinstance(project, dict)
    extras = project["optional-dependencies"]
    return [Requirement(text) for group in extras.values() for text in group]


def locked() -> dict[str, tuple[str, list[str]]]:
    """requirements.lock as {canonical name: (version, hashes)}."""
    pins: dict[str, tuple[str, list[str]]] = {}
    current: str | None = None
    for line in (REPO / "requirements.lock").read_text().splitlines():
        match = PIN.match(line)
        if match:
            current = canonicalize_name(match.group(1))
            assert current not in pins, f"{current} is pinned twice"
            pins[current] = (match.group(2), [])
        elif line.startswith(" ") and (found := HASH.search(line)) and current is not None:
            pins[current][1].append(found.group(0))
        elif not line.startswith(" ") and line.strip() and not line.startswith("#"):
            raise AssertionError(f"requirements.lock: not a pin: {line!r}")
    return pins


def test_every_runtime_dependency_is_pinned_with_its_hashes() -> None:
    pins = locked()
    for requirement in runtime_requirements():
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is not in requirements.lock: run scripts/lock"
        version, hashes = pins[name]
        assert requirement.specifier.contains(version, prereleases=True), (
            f"requirements.lock pins {name}=={version}, outside {requirement}: run scripts/lock"
        )
        assert hashes, f"{name} has no hash in requirements.lock"
    # psycopg[binary]: an extra's own package is pinned too.
    assert "psycopg-binary" in pins


def test_every_locked_package_has_an_exact_version_and_a_hash() -> None:
    pins = locked()
    assert len(pins) > len(runtime_requirements())  # their dependencies too
    for name, (version, hashes) in pins.items():
        assert re.fullmatch(r"[0-9][0-9A-Za-z.+!-]*", version), (name, version)
        assert hashes, f"{name} has no hash"


def test_the_lock_holds_runtime_dependencies_only() -> None:
    pins = locked()
    runtime = {canonicalize_name(r.name) for r in runtime_requirements()}
    extras_only = {canonicalize_name(r.name) for r in dev_requirements()} - runtime
    assert extras_only & pins.keys() == set()
    assert "uv" in {canonicalize_name(r.name) for r in dev_requirements()}  # scripts/lock's


def dockerfile_instructions() -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments left out."""
    joined = re.sub(r"\\\n\s*", " ", (REPO / "Dockerfile").read_text())
    return [
        line.strip() for line in joined.splitlines() if line.strip() and not line.startswith("#")
    ]


def pip_command(step: str) -> list[str]:
    """The words of the `pip install` command in a RUN instruction (of several joined by &&)."""
    (command,) = [part for part in step.removeprefix("RUN").split("&&") if "pip install" in part]
    return command.split()


def test_the_image_installs_the_lock_with_hashes_then_the_app_without_dependencies() -> None:
    steps = dockerfile_instructions()
    installs = [i for i, step in enumerate(steps) if "pip install" in step]
    assert len(installs) == 2, [steps[i] for i in installs]
    locked_step, app_step = (pip_command(steps[i]) for i in installs)
    assert "--require-hashes" in locked_step
    assert locked_step[locked_step.index("-r") + 1] == "requirements.lock"
    assert "--no-deps" in app_step and app_step[-1] in (".", "./")
    copies = [
        i for i, step in enumerate(steps) if step.startswith("COPY") and "requirements.lock" in step
    ]
    assert copies and copies[0] < installs[0]


def test_the_image_checks_its_own_health_over_http() -> None:
    (check,) = [step for step in dockerfile_instructions() if step.startswith("HEALTHCHECK")]
    assert "urllib.request" in check and "/healthz" in check
    assert "curl" not in check and "wget" not in check  # not in python:3.11-slim


def dockerignore_rules() -> list[tuple[bool, re.Pattern[str]]]:
    """.dockerignore as (excludes, pattern) pairs, in order: the last match decides."""
    rules = []
    for raw in (REPO / ".dockerignore").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line.removeprefix("!").strip().strip("/")
        rules.append((not negated, re.compile(_glob(pattern))))
    return rules


def _glob(pattern: str) -> str:
    """Docker's pattern syntax (Go's filepath.Match, plus `**` for any number of folders)."""
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return f"^{out}$"


def excluded(path: str) -> bool:
    """Whether Docker leaves `path` out of the build context: a rule counts when it matches
    the path or one of the folders above it."""
    parts = path.split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    verdict = False
    for excludes, pattern in dockerignore_rules():
        if any(pattern.match(candidate) for candidate in candidates):
            verdict = excludes
    return verdict


@pytest.mark.parametrize(
    "path",
    [
        ".venv/bin/python",
        ".env",
        ".env.local",
        "app.pem",
        ".bot/app.pem",
        ".bot/bot.sqlite3",
        "secrets/app.pem",
        "bot/github/stray.pem",
        ".git/config",
        "bot/__pycache__/cli.cpython-311.pyc",
        "tests/test_lockfile.py",
        "bench/out/results.json",
    ],
)
def test_the_build_context_leaves_out(path: str) -> None:
    assert excluded(path)


@pytest.mark.parametrize(
    "path",
    [
        "pyproject.toml",
        "README.md",
        "requirements.lock",
        "bot/cli.py",
        "bot/ui/templates/run.html",
        "bot/ui/static/ui.css",
        "policies/triggers.py",
    ],
)
def test_the_build_context_keeps(path: str) -> None:
    assert not excluded(path)


def test_the_build_context_holds_every_file_the_dockerfile_copies() -> None:
    for step in dockerfile_instructions():
        if step.startswith("COPY") and "--from" not in step:
            *sources, _ = step.split()[1:]
            for source in sources:
                assert (REPO / source).exists(), source
                assert not excluded(source.rstrip("/")), source
