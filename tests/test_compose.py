"""compose.yaml and the Dockerfile, checked without a Docker engine: every `bot` service gets
the App's key as a file secret and its settings over .env's, and the health checks that
compose and the image run pass against a real `bot serve` and `bot worker` (and fail where
nothing answers)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.fakes.github import make_fake_github
from tests.scripted import REPO_FILES, ModelScript, free_port, running_bot, serving_fakes
from tests.test_worker_http import answers, running_worker, wait

REPO = Path(__file__).resolve().parents[1]
KEY_IN_CONTAINER = "/run/secrets/github_app_key"


def compose() -> dict[str, Any]:
    loaded = yaml.safe_load((REPO / "compose.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def bot_services() -> dict[str, dict[str, Any]]:
    return {
        name: service
        for name, service in compose()["services"].items()
        if (service.get("command") or [None])[0] == "bot"
    }


def test_every_bot_service_reads_the_key_from_its_file_secret() -> None:
    spec = compose()
    assert spec["secrets"] == {"github_app_key": {"file": "./secrets/app.pem"}}
    for name, service in bot_services().items():
        assert service["secrets"] == ["github_app_key"], name
        assert service["environment"]["BOT_PRIVATE_KEY_PATH"] == KEY_IN_CONTAINER, name
        # No other way in: a bind mount of a key would bypass the secret (and its README step).
        assert not any(".pem" in str(volume) for volume in service.get("volumes", [])), name


def test_compose_sets_what_a_local_env_file_must_not_decide() -> None:
    """`bot setup`'s .env names the key's path on the host, and a local one may listen on
    127.0.0.1 or keep data in ./.bot: compose's `environment` wins over `env_file`."""
    for name, service in bot_services().items():
        environment = service["environment"]
        assert service["env_file"] == ".env", name
        assert environment["BOT_DATA_DIR"] == "/data", name
        assert environment["BOT_HOST"] == "0.0.0.0", name
        assert environment["BOT_DATABASE_URL"].startswith("postgresql://"), name


def test_every_bot_service_has_a_readiness_check_on_the_port_it_serves() -> None:
    for name, service in bot_services().items():
        test = service["healthcheck"]["test"]
        assert test[:3] == ["CMD", "python", "-c"], name
        variable = "BOT_WORKER_PORT" if service["command"][1] == "worker" else "BOT_PORT"
        assert f"os.environ['{variable}']" in test[3] and "/readyz" in test[3], name
        assert variable in service["environment"], name


def dockerfile_healthcheck() -> list[str]:
    text = re.sub(r"\\\n\s*", " ", (REPO / "Dockerfile").read_text())
    (line,) = [line for line in text.splitlines() if line.startswith("HEALTHCHECK")]
    command = json.loads(line.split(" CMD ", 1)[1])
    assert isinstance(command, list)
    return [str(part) for part in command]


def check_passes(command: list[str], env: dict[str, str]) -> bool:
    """Run a health check's command as the image would, with this interpreter for `python`."""
    assert command[0] == "python"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("BOT_")}
    done = subprocess.run(
        [sys.executable, *command[1:]], env={**environ, **env}, capture_output=True, timeout=30
    )
    return done.returncode == 0


@pytest.mark.slow
def test_the_health_checks_pass_against_a_receiver_and_a_worker(tmp_path: Path) -> None:
    services = bot_services()
    receiver_check = services["receiver-1"]["healthcheck"]["test"][1:]
    worker_check = services["worker-1"]["healthcheck"]["test"][1:]
    image_check = dockerfile_healthcheck()
    nothing_there = str(free_port())
    assert not check_passes(receiver_check, {"BOT_PORT": nothing_there})
    assert not check_passes(worker_check, {"BOT_WORKER_PORT": nothing_there})
    assert not check_passes(image_check, {"BOT_PORT": nothing_there})

    fake = make_fake_github(tmp_path, files=REPO_FILES)
    worker_port = str(free_port())
    with (
        serving_fakes(fake, ModelScript()) as (_, options),
        running_bot(tmp_path, serve_args=["--no-worker", "--receivers", "1"], **options) as intake,
        running_worker(tmp_path, options, [], {"BOT_WORKER_PORT": worker_port}) as (proc, log),
    ):
        receiver_port = intake.url.rsplit(":", 1)[1]
        url = f"http://127.0.0.1:{worker_port}/readyz"
        wait("the worker's /readyz", lambda: answers(url) == 200, log, proc)
        assert check_passes(receiver_check, {"BOT_PORT": receiver_port})
        assert check_passes(image_check, {"BOT_PORT": receiver_port})
        assert check_passes(worker_check, {"BOT_WORKER_PORT": worker_port})
        # The image's own check passes for a worker whose BOT_WORKER_PORT is its BOT_PORT.
        assert check_passes(image_check, {"BOT_PORT": worker_port})
        assert httpx.get(f"http://127.0.0.1:{worker_port}/healthz", timeout=5).text == "ok"
