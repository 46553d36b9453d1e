"""bot/wiring.py with App credentials: config from the default branch with `_extends`, permissions,
the learned slug, and the redactor in the logs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from bot.runs.execute import RunExecutor
from bot.settings import Settings
from bot.store.sqlite import Store
from bot.wiring import build_worker_hooks
from policies.config import ConfigError
from policies.event import Event
from tests.fakes.github import (
    FakeGitHub,
    commit_files,
    init_bare_repo,
    make_fake_github,
    serve_fake_github,
)


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[tuple[FakeGitHub, str]]:
    fake = make_fake_github(tmp_path)
    shared = init_bare_repo(tmp_path / "remote" / "octo" / "shared.git", {"README.md": "x\n"})
    fake.add_repo("octo", "shared", shared)
    fake.installations[42].repos.append("octo/shared")
    fake.set_permission("octo", "hello", "maint", "write")
    with serve_fake_github(fake) as url:
        yield fake, url


def settings_for(fake: FakeGitHub, url: str, data_dir: Path, **extra: object) -> Settings:
    values: dict[str, object] = {
        "app_id": fake.app_id,
        "private_key": fake.private_key_pem,
        "github_api_url": url,
        "github_web_url": url,
        "data_dir": data_dir,
        "app_slug": fake.slug,
        **extra,
    }
    return Settings.model_validate(values)


def event() -> Event:
    return Event(
        name="issues",
        delivery_id="d",
        repo_full_name="octo/hello",
        installation_id=42,
        sender_login="maint",
    )


def write_config(fake: FakeGitHub, repo: str, text: str, path: str = ".github/bot.yml") -> None:
    commit_files(fake.repos[f"octo/{repo}"].git_dir, "main", {path: text}, "config")


@pytest.mark.anyio
async def test_config_follows_extends_and_local_values_win(
    fake: tuple[FakeGitHub, str], data_dir: Path
) -> None:
    gh, url = fake
    store = Store.open(data_dir / "bot.sqlite3")
    hooks = build_worker_hooks(settings_for(gh, url, data_dir), store)
    assert isinstance(hooks.executor, RunExecutor)
    assert hooks.skip_handler == hooks.executor.answer_skip
    assert [
        f"{getattr(job, 'func', job).__module__}.{getattr(job, 'func', job).__name__}"
        for job in hooks.background
    ] == [
        "bot.git.checkout.sweep_forever",
        "bot.runs.leftovers.sweep_forever",
        "bot.wiring.close_when_stopped",
        # App credentials are set, so the redelivery sweep is on by default.
        "bot.ops.redeliver.redeliver_forever",
    ]
    assert (await hooks.config_loader(event())).triage.enabled is True  # no file: defaults
    write_config(gh, "shared", "slash_commands: true\ntriage:\n  enabled: false\n")
    write_config(gh, "hello", "_extends: shared\ntriage:\n  enabled: true\n")
    config = await hooks.config_loader(event())
    assert config.slash_commands is True
    assert config.triage.enabled is True
    assert await hooks.permission_lookup(event()) == "write"
    other = Event(
        name="issues",
        delivery_id="d",
        repo_full_name="octo/hello",
        installation_id=42,
        sender_login="nobody",
    )
    assert await hooks.permission_lookup(other) == "none"
    store.close()


@pytest.mark.anyio
async def test_config_errors_name_the_problem(fake: tuple[FakeGitHub, str], data_dir: Path) -> None:
    gh, url = fake
    store = Store.open(data_dir / "bot.sqlite3")
    hooks = build_worker_hooks(settings_for(gh, url, data_dir), store)
    write_config(gh, "hello", "_extends: shared\n")
    write_config(gh, "shared", "_extends: hello\n")
    with pytest.raises(ConfigError, match="_extends loops back to octo/hello"):
        await hooks.config_loader(event())
    write_config(gh, "hello", "_extends: missing-repo\n")
    with pytest.raises(ConfigError, match="does not exist"):
        await hooks.config_loader(event())
    write_config(gh, "hello", "triage:\n  enabled: sometimes\n")
    with pytest.raises(ConfigError, match="line 2"):
        await hooks.config_loader(event())
    store.close()


def test_slug_is_learned_from_the_app_when_not_set(
    fake: tuple[FakeGitHub, str], data_dir: Path
) -> None:
    gh, url = fake
    store = Store.open(data_dir / "bot.sqlite3")
    hooks = build_worker_hooks(settings_for(gh, url, data_dir, app_slug=None), store)
    assert hooks.app_slug == gh.slug
    assert gh.calls_to("GET", "/app")
    store.close()


def test_without_credentials_nothing_is_posted(data_dir: Path) -> None:
    store = Store.open(data_dir / "bot.sqlite3")
    hooks = build_worker_hooks(Settings(app_slug="x", webhook_secret="wh-secret-1"), store)
    assert hooks.executor is None
    store.close()


@pytest.mark.anyio
async def test_the_github_client_is_closed_when_the_pool_stops() -> None:
    from bot.wiring import close_when_stopped

    closed: list[bool] = []

    class Client:
        async def aclose(self) -> None:
            await anyio.lowlevel.checkpoint()  # a real close awaits, even while being cancelled
            closed.append(True)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(close_when_stopped, Client())
        await anyio.sleep(0.01)
        assert closed == []
        tasks.cancel_scope.cancel()
    assert closed == [True]
