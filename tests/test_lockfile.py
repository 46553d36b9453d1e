"""The image installs exactly what requirements.lock pins, and scripts/setup (so CI) what
requirements-dev.lock pins, each file checked against its hash; the image's build context holds
the app and nothing secret. `bash scripts/lock --check` (run by .ci/run) says whether both locks
are what pyproject.toml resolves to; these tests say that each lock covers what it should, that
the two agree, that pyproject.toml bounds every dependency, and that the Dockerfile and
.dockerignore use the lock right."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)(?:\s*;\s*([^\\]+?))?\s*\\?$")
HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}\b")
IMAGE_EXTRAS = ("postgres",)
DEV_EXTRAS = ("postgres", "dev")


def pyproject() -> dict[str, object]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def declared(*extras: str, runtime: bool = True) -> list[str]:
    """pyproject's runtime dependencies (unless `runtime` is False) and those of `extras`, as
    written there."""
    project = pyproject()["project"]
    assert isinstance(project, dict)
    texts = list(project["dependencies"]) if runtime else []
    for extra in extras:
        texts += project["optional-dependencies"][extra]
    return texts


def requirements(*extras: str, runtime: bool = True) -> list[Requirement]:
    return [Requirement(text) for text in declared(*extras, runtime=runtime)]


def every_extra() -> list[str]:
    project = pyproject()["project"]
    assert isinstance(project, dict)
    return list(project["optional-dependencies"])


class Pin:
    def __init__(self, version: str, marker: str | None) -> None:
        self.version = version
        self.marker = marker
        self.hashes: list[str] = []


def locked(name: str = "requirements.lock") -> dict[str, Pin]:
    """A lock file as {canonical name: its pin (version, marker, hashes)}."""
    pins: dict[str, Pin] = {}
    current: str | None = None
    for line in (REPO / name).read_text().splitlines():
        match = PIN.match(line)
        if match:
            current = canonicalize_name(match.group(1))
            assert current not in pins, f"{name}: {current} is pinned twice"
            pins[current] = Pin(match.group(2), match.group(3))
        elif line.startswith(" ") and (found := HASH.search(line)) and current is not None:
            pins[current].hashes.append(found.group(0))
        elif not line.startswith(" ") and line.strip() and not line.startswith("#"):
            raise AssertionError(f"{name}: not a pin: {line!r}")
    return pins


@pytest.mark.parametrize(
    ("lock", "extras"),
    [
        pytest.param("requirements.lock", IMAGE_EXTRAS, id="image"),
        pytest.param("requirements-dev.lock", DEV_EXTRAS, id="dev"),
    ],
)
def test_every_dependency_is_pinned_with_its_hashes(lock: str, extras: tuple[str, ...]) -> None:
    pins = locked(lock)
    for requirement in requirements(*extras):
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is not in {lock}: run scripts/lock"
        pin = pins[name]
        assert requirement.specifier.contains(pin.version, prereleases=True), (
            f"{lock} pins {name}=={pin.version}, outside {requirement}: run scripts/lock"
        )
        assert pin.hashes, f"{name} has no hash in {lock}"
    # psycopg[binary]: an extra's own package is pinned too.
    assert "psycopg-binary" in pins


@pytest.mark.parametrize("lock", ["requirements.lock", "requirements-dev.lock"])
def test_every_locked_package_has_an_exact_version_and_a_hash(lock: str) -> None:
    pins = locked(lock)
    assert len(pins) > len(requirements(*DEV_EXTRAS))  # their dependencies too
    for name, pin in pins.items():
        assert re.fullmatch(r"[0-9][0-9A-Za-z.+!-]*", pin.version), (name, pin.version)
        assert pin.hashes, f"{name} has no hash"


def test_the_image_lock_holds_the_runtime_and_postgres_only() -> None:
    pins = locked()
    image = {canonicalize_name(r.name) for r in requirements(*IMAGE_EXTRAS)}
    others = [extra for extra in every_extra() if extra not in IMAGE_EXTRAS]
    extras_only = {canonicalize_name(r.name) for r in requirements(*others, runtime=False)}
    assert (extras_only - image) & pins.keys() == set()
    assert {"procrastinate", "psycopg", "psycopg-pool"} <= pins.keys()
    assert "uv" in {canonicalize_name(r.name) for r in requirements("dev")}  # scripts/lock's


def test_the_dev_lock_has_every_image_package_at_the_image_version() -> None:
    image, dev = locked(), locked("requirements-dev.lock")
    for name, pin in image.items():
        assert name in dev, f"{name} is in requirements.lock, not in requirements-dev.lock"
        assert dev[name].version == pin.version, (name, pin.version, dev[name].version)


def test_the_bench_extra_is_in_no_lock() -> None:
    bench = {canonicalize_name(r.name) for r in requirements("bench", runtime=False)}
    assert bench
    for lock in ("requirements.lock", "requirements-dev.lock"):
        assert bench & locked(lock).keys() == set(), lock


def test_the_postgres_stack_is_an_extra_not_a_runtime_dependency() -> None:
    runtime = {canonicalize_name(r.name) for r in requirements()}
    postgres = {canonicalize_name(r.name) for r in requirements("postgres", runtime=False)}
    assert postgres == {"procrastinate", "psycopg", "psycopg-pool"}
    assert runtime & postgres == set()


def reason_beside(text: str) -> str:
    """The comment beside a dependency in pyproject.toml: on its line, or the comment lines
    right above it (the list's own, for a list on one line)."""
    lines = (REPO / "pyproject.toml").read_text().splitlines()
    (index,) = [i for i, line in enumerate(lines) if f'"{text}"' in line]
    comments = [lines[index].partition("#")[2]]
    above = index - 1
    while above >= 0 and lines[above].strip().startswith("#"):
        comments.insert(0, lines[above].strip())
        above -= 1
    return " ".join(c for c in comments if c)


def test_every_dependency_has_an_upper_bound_and_an_exact_pin_a_reason() -> None:
    for text in declared(*every_extra()):
        operators = {spec.operator for spec in Requirement(text).specifier}
        assert operators & {"<", "<=", "==", "~="}, f"{text} has no upper bound"
        if "==" in operators:
            assert "pinned" in reason_beside(text).lower(), f"{text}: pinned with no reason"


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
