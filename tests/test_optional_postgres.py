"""The Postgres stack is the `postgres` extra: without it SQLite works, and Postgres says so.

Every process here runs with a `sitecustomize` in front of PYTHONPATH that makes psycopg,
psycopg_pool and procrastinate uninstalled (an import of them fails as it would after a bare
`pip install .`) and writes down each attempt. On SQLite, `bot serve` (its receivers too)
takes a delivery, stores it and runs it, `bot deliveries` reads it back and `bot doctor`
checks the database, and none of them tries to import the stack at all. With
BOT_DATABASE_URL naming Postgres, each command that opens the store fails at start with the
one line naming the extra, and no traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.github import make_fake_github
from tests.scripted import (
    REPO,
    REPO_FILES,
    ModelScript,
    bot_env,
    free_port,
    issues_opened,
    running_bot,
    serving_fakes,
)
from tests.test_e2e import Bot

pytestmark = pytest.mark.slow

STACK = ("psycopg", "psycopg_pool", "psycopg_binary", "procrastinate")
PASSWORD = "hunter2-not-logged"
POSTGRES_URL = f"postgresql://bot:{PASSWORD}@127.0.0.1:9/bot"
NEEDS_THE_EXTRA = (
    "BOT_DATABASE_URL names a Postgres database, which needs the postgres extra: "
    "pip install 'repo-agent-bot[postgres]'"
)

SITECUSTOMIZE = f"""\
import os
import sys
import traceback

STACK = {STACK!r}


class NotInstalled:
    \"\"\"Refuses the Postgres stack as an interpreter without it would, noting who asked.\"\"\"

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] not in STACK:
            return None
        frames = [
            f"{{f.filename}}:{{f.lineno}}"
            for f in traceback.extract_stack()
            if "importlib" not in f.filename and "sitecustomize" not in f.filename
        ]
        with open(os.environ["BLOCKED_IMPORTS"], "a") as log:
            log.write(f"{{name}} from {{' < '.join(reversed(frames[-4:]))}}\\n")
        raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)


sys.meta_path.insert(0, NotInstalled())
"""


def without_stack(root: Path) -> dict[str, str]:
    """The environment that makes a `bot` process's interpreter lack the stack."""
    site = root / "no-postgres"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    attempts = root / "blocked-imports.txt"
    attempts.touch()
    return {"PYTHONPATH": f"{site}:{REPO}", "BLOCKED_IMPORTS": str(attempts)}


def attempts(root: Path) -> list[str]:
    return (root / "blocked-imports.txt").read_text().splitlines()


def bot(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def bot_env_plain(root: Path) -> dict[str, str]:
    """A `bot` process's environment with nothing behind it: no App, no model."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOT_")}
    env.update(BOT_DATA_DIR=str(root / "data"), BOT_WEBHOOK_SECRET="s3cret-webhook")
    return env


def test_the_blocker_refuses_the_stack_and_writes_the_attempt_down(tmp_path: Path) -> None:
    env = {**bot_env_plain(tmp_path), **without_stack(tmp_path)}
    probe = "import bot.store.postgres.store"
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert "ModuleNotFoundError: No module named 'psycopg'" in done.stderr, done.stderr
    (attempt,) = attempts(tmp_path)
    assert attempt.startswith("psycopg from ") and "bot/store/postgres/store.py" in attempt


def test_sqlite_serves_stores_and_runs_without_the_postgres_stack(tmp_path: Path) -> None:
    fake = make_fake_github(tmp_path, files=REPO_FILES)
    with serving_fakes(fake, ModelScript(), extra_env=without_stack(tmp_path)) as (llm, options):
        # Two receiver processes beside the parent: the stack is missing in each of them.
        with running_bot(tmp_path, serve_args=["--receivers", "2"], **options) as running:
            served = Bot(running.url, fake, llm, running.db, running.log)
            issue = fake.add_issue("octo", "hello", title="Crash", body="It crashes.", user="u")
            assert served.post("issues", issues_opened(issue, "octo/hello", 42)).status_code == 202
            _, status = served.finished_run("e2e-0001")
            assert status == "succeeded", running.log.read_text()[-4000:]
            assert served.own(issue["number"]), "the triage was not posted"
        env = bot_env(tmp_path, **options)
    listed = bot(tmp_path, env, "deliveries", "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = [json.loads(line) for line in listed.stdout.splitlines()]
    assert row["delivery_id"] == "e2e-0001" and row["decision"] == "trigger", row
    assert attempts(tmp_path) == []


def test_bot_doctor_checks_sqlite_without_the_postgres_stack(tmp_path: Path) -> None:
    env = {**bot_env_plain(tmp_path), **without_stack(tmp_path)}
    done = bot(tmp_path, env, "doctor", "--skip-model")
    (line,) = [line for line in done.stdout.splitlines() if " database: " in line]
    assert line.startswith("ok") and "SQLite at " in line, done.stdout
    assert attempts(tmp_path) == []


STORE_COMMANDS = [
    pytest.param(["serve"], id="serve"),
    pytest.param(["worker"], id="worker"),
    pytest.param(["deliveries"], id="deliveries"),
    pytest.param(["replay", "--delivery", "x"], id="replay"),
]


@pytest.mark.parametrize("args", STORE_COMMANDS)
def test_postgres_without_the_extra_fails_at_start_with_one_line(
    tmp_path: Path, args: list[str]
) -> None:
    env = {
        **bot_env_plain(tmp_path),
        **without_stack(tmp_path),
        "BOT_DATABASE_URL": POSTGRES_URL,
        "BOT_HOST": "127.0.0.1",
        "BOT_PORT": str(free_port()),
    }
    done = bot(tmp_path, env, *args)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    errors = [line for line in out.splitlines() if NEEDS_THE_EXTRA in line]
    assert len(errors) == 1, out
    if args[0] in ("serve", "worker"):  # a log line
        assert json.loads(errors[0])["msg"] == NEEDS_THE_EXTRA, errors[0]
    else:
        assert errors[0].endswith(NEEDS_THE_EXTRA), errors[0]
    assert "Traceback" not in out and "ModuleNotFoundError" not in out, out
    assert PASSWORD not in out
    assert attempts(tmp_path), "the stack was never asked for"


def test_bot_doctor_on_postgres_without_the_extra_fails_its_database_check(
    tmp_path: Path,
) -> None:
    env = {**bot_env_plain(tmp_path), **without_stack(tmp_path), "BOT_DATABASE_URL": POSTGRES_URL}
    done = bot(tmp_path, env, "doctor", "--skip-model")
    assert done.returncode == 1, done.stdout + done.stderr
    (line,) = [line for line in done.stdout.splitlines() if " database: " in line]
    assert line == f"FAIL  database: {NEEDS_THE_EXTRA}", done.stdout
    assert "crashed" not in done.stdout and PASSWORD not in done.stdout + done.stderr


DSNS = [
    "postgresql://bot:p%40ss+w%2Frd@db.internal:5432/bot",
    "postgres://bot@/bot?host=/run/pg&password=a+b%26c-long",
    "postgresql://bot:first-one@db/bot?password=second-one",
    "postgresql://h1:5432,h2:5433/bot?password=xxxxxx&password=yyyyyy",
    "postgresql://bot@db/bot",
]


def test_the_database_password_is_redacted_alike_with_and_without_the_stack(
    tmp_path: Path,
) -> None:
    from bot.settings import load_settings

    probe = (
        "import json, sys\n"
        "from bot.settings import load_settings\n"
        "print(json.dumps([load_settings({'BOT_DATABASE_URL': dsn}, None).secret_values()"
        " for dsn in json.loads(sys.argv[1])]))\n"
    )
    env = {**bot_env_plain(tmp_path), **without_stack(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", probe, json.dumps(DSNS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert attempts(tmp_path), "psycopg was not asked for"
    with_stack = [load_settings({"BOT_DATABASE_URL": dsn}, None).secret_values() for dsn in DSNS]
    assert json.loads(done.stdout) == with_stack
    assert with_stack == [["p@ss+w/rd"], ["a+b&c-long"], ["second-one"], ["yyyyyy"], []]


# The Postgres backend itself: each imports the stack at its top, and only
# `bot.store.backend`, `bot.intake.web`, `bot.ops.doctor_database` and `bot.runs.runner`
# import them, when Postgres is chosen.
POSTGRES_MODULES = (
    "bot.store.postgres.",
    "bot.store.queue.postgres",
    "bot.store.queue.procrastinate_app",
    "bot.intake.postgres_writer",
    "bot.runs.procrastinate_pool",
)


def test_no_other_module_imports_the_stack_when_imported(tmp_path: Path) -> None:
    modules = sorted(
        ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        for package in ("bot", "policies")
        for path in (REPO / package).rglob("*.py")
    )
    plain = [m for m in modules if not m.startswith(POSTGRES_MODULES)]
    assert "bot.cli" in plain and "bot.store.backend" in plain
    assert len(plain) < len(modules)
    probe = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
    env = {**bot_env_plain(tmp_path), **without_stack(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", probe, *plain], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert attempts(tmp_path) == []
