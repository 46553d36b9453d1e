"""Shared test set-up: anyio on asyncio, no real network, a data dir per test, ../shared or a skip."""

from __future__ import annotations

import os
import secrets
import socket
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import anyio
import psycopg
import pytest
from hypothesis import settings

from tests.fakes.github import take_openapi_violations

# The property tests explore the same examples on every run: a failure on CI is reproducible
# (and no run is red by the luck of the draw). `HYPOTHESIS_PROFILE=explore` draws fresh ones.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("explore", deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# anyio imports its API lazily, on first use, and under pytest that import goes through the
# assertion rewriter (anyio is a pytest plugin), which builds and compiles an AST. Two server
# threads of a test using, say, `anyio.open_file` for the first time at once then compile at
# once, and CPython 3.11 can fail that with "AST constructor recursion depth mismatch". Every
# name is resolved here, once, in the main thread.
for _name in dir(anyio):
    if not _name.startswith("_"):
        getattr(anyio, _name)

SHARED = Path(__file__).resolve().parents[2] / "shared"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# The few real octokit payloads the default run reads, laid out like ../shared/github-payloads.
PAYLOADS = FIXTURES / "github-payloads"


def shared_dir(name: str) -> Path:
    """`../shared/<name>`, or skip the test when it is absent (fail instead under
    TESTS_REQUIRE_SHARED=1, which CI sets: there the folder is always beside the project)."""
    path = SHARED / name
    if path.is_dir():
        return path
    reason = f"needs ../shared/{name} beside the project (absent in a clone of the project alone)"
    if os.environ.get("TESTS_REQUIRE_SHARED") == "1":
        pytest.fail(f"{reason}; TESTS_REQUIRE_SHARED=1 asks for it")
    pytest.skip(reason)


# Read once, at start-up: tests that scrub BOT_* variables from their environment still reach it.
TEST_DATABASE_URL = os.environ.get("BOT_TEST_DATABASE_URL", "")


def postgres_url() -> str:
    """The test server's DSN from BOT_TEST_DATABASE_URL (`scripts/postgres start` prints one),
    or skip the test when it is unset (fail instead under TESTS_REQUIRE_POSTGRES=1, which CI
    sets: there a server runs)."""
    if TEST_DATABASE_URL:
        return TEST_DATABASE_URL
    reason = (
        "needs a Postgres server: set BOT_TEST_DATABASE_URL "
        '(eval "$(bash scripts/postgres start)" starts one)'
    )
    if os.environ.get("TESTS_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"{reason}; TESTS_REQUIRE_POSTGRES=1 asks for it")
    pytest.skip(reason)


def with_search_path(url: str, schema: str) -> str:
    """`url` with its connections' tables in `schema` (a libpq `options` parameter)."""
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qsl(parts.query)
    query.append(("options", f"-c search_path={schema}"))
    return urllib.parse.urlunsplit(
        parts._replace(query=urllib.parse.urlencode(query, quote_via=urllib.parse.quote))
    )


CHROMIUM = Path("/usr/bin/chromium")


def chromium_path() -> Path:
    """Debian's chromium (scripts/setup installs it), with Playwright for Python to drive it;
    or skip the test when either is missing (fail instead under TESTS_REQUIRE_BROWSER=1, which
    CI sets: there both are installed)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        reason = "needs Playwright for Python (the dev extra: pip install -e '.[dev]')"
    else:
        if CHROMIUM.is_file():
            return CHROMIUM
        reason = f"needs a headless Chromium at {CHROMIUM} (apt-get install chromium)"
    if os.environ.get("TESTS_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{reason}; TESTS_REQUIRE_BROWSER=1 asks for it")
    pytest.skip(reason)


@pytest.fixture
def postgres_dsn() -> Iterator[str]:
    """A DSN whose tables live in a fresh schema of the test database, dropped afterwards: each
    test starts from an empty database without paying for a new one."""
    base = postgres_url()
    schema = f"test_{secrets.token_hex(6)}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield with_search_path(base, schema)
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture(scope="session")
def shared_payloads_dir() -> Path:
    """The whole corpus of real webhook payloads (273 files, 60 events) from ../shared."""
    return shared_dir("github-payloads")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


_real_connect = socket.socket.connect


def _guarded_connect(self: socket.socket, address: object) -> None:
    """Refuse any connection that leaves this machine: tests talk to fakes only."""
    if isinstance(address, tuple) and address:
        host = str(address[0])
        if not (host.startswith("127.") or host in ("::1", "localhost", "0.0.0.0")):
            raise OSError(f"tests may not reach the network ({host})")
    _real_connect(self, address)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    yield


@pytest.fixture(autouse=True)
def _github_requests_follow_openapi() -> Iterator[None]:
    """Fail a test after which a fake GitHub holds a request that GitHub's OpenAPI description
    refuses (the fake answered it 422 or 404; code that swallowed that answer must not pass)."""
    take_openapi_violations()  # a fake kept from an earlier test answers for that test only
    yield
    violations = take_openapi_violations()
    if violations:
        listed = "\n".join(f"  {v}" for v in violations)
        pytest.fail(f"requests GitHub's OpenAPI description refuses:\n{listed}", pytrace=False)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    return d
