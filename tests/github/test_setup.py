"""`bot setup`: the manifest page, the callback's code exchange against the fake GitHub, .env."""

from __future__ import annotations

import json
import re
import socket
import stat
import threading
import time
from html import unescape
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from bot.cli import build_parser
from bot.cli import main as cli_main
from bot.github.client import GitHubApp
from bot.github.setup import (
    SetupError,
    build_manifest,
    check_webhook_url,
    exchange_code,
    load_manifest,
    merge_dotenv,
    missing_credentials,
    new_app_url,
    next_steps,
    setup_app,
)
from bot.settings import Settings, load_settings
from tests.fakes.github import FakeGitHub, serve_fake_github

pytestmark = pytest.mark.anyio
API = "http://github.test"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_the_callback_exchanges_the_code_and_writes_credentials(tmp_path: Path) -> None:
    fake = FakeGitHub()
    fake.register_manifest_code("code123")
    env_path = tmp_path / ".env"
    env_path.write_text("# mine\nBOT_PORT=9000\nBOT_PRIVATE_KEY=old-inline-key\nBOT_APP_ID=1\n")
    data_dir = tmp_path / "data"
    manifest = build_manifest(
        load_manifest(),
        webhook_url="https://smee.io/abc",
        redirect_url="http://127.0.0.1:3000/callback",
    )
    target = new_app_url("https://github.com", None, "st4te")

    async def on_code(code: str) -> str:
        done = await exchange_code(
            code,
            api_url=API,
            env_path=env_path,
            data_dir=data_dir,
            transport=httpx.ASGITransport(fake.app),
        )
        return next_steps(done, "https://smee.io/abc")

    page = setup_app(manifest=manifest, target=target, state="st4te", on_code=on_code)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(page), base_url="http://t", trust_env=False
    ) as c:
        start = await c.get("/")
        forged = await c.get("/callback", params={"code": "code123", "state": "guess"})
        done = await c.get("/callback", params={"code": "code123", "state": "st4te"})
        again = await c.get("/callback", params={"code": "code123", "state": "st4te"})

    action = re.search(r'action="([^"]+)"', start.text)
    assert action is not None
    assert unescape(action.group(1)) == "https://github.com/settings/apps/new?state=st4te"
    posted = re.search(r'name="manifest" value="([^"]+)"', start.text)
    assert posted is not None
    sent = json.loads(unescape(posted.group(1)))
    assert sent["hook_attributes"] == {"url": "https://smee.io/abc", "active": True}
    assert sent["redirect_url"] == "http://127.0.0.1:3000/callback"
    assert "installation" not in sent["default_events"]
    assert sent["default_permissions"]["checks"] == "write"

    assert forged.status_code == 400
    assert done.status_code == 200 and "bot serve" in done.text
    assert again.status_code == 502 and "start `bot setup` again" in again.text

    key_path = (data_dir / "app.pem").resolve()
    assert key_path.read_text() == fake.private_key_pem
    assert mode(key_path) == 0o600 and mode(env_path) == 0o600
    text = env_path.read_text()
    assert text.startswith("# mine\nBOT_PORT=9000\n")
    assert "BOT_PRIVATE_KEY=" not in text
    assert text.count("BOT_APP_ID=") == 1

    settings = load_settings(environ={}, dotenv=env_path)
    assert settings.app_id == fake.app_id
    assert settings.app_slug == fake.slug
    assert settings.private_key_path == key_path
    assert settings.webhook_secrets == [fake.webhook_secret.encode()]
    assert settings.port == 9000
    assert missing_credentials(settings) == []
    app = GitHubApp.from_settings(
        settings.model_copy(update={"github_api_url": API}),
        transport=httpx.ASGITransport(fake.app),
    )
    assert (await app.get_app()).id == fake.app_id
    assert app.sender.policy.mutation_interval_s == 1.0  # GitHub's guidance, by default
    paced = GitHubApp.from_settings(settings.model_copy(update={"github_write_interval": 0.25}))
    assert paced.sender.policy.mutation_interval_s == 0.25


async def test_a_second_registration_keeps_the_old_key(tmp_path: Path) -> None:
    fake = FakeGitHub()
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "app.pem").write_text("old key")
    fake.register_manifest_code("c1")
    transport = httpx.ASGITransport(fake.app)
    env_path = tmp_path / ".env"
    await exchange_code(
        "c1", api_url=API, env_path=env_path, data_dir=data_dir, transport=transport
    )
    backups = list(data_dir.glob("app.pem.*.bak"))
    assert [b.read_text() for b in backups] == ["old key"]
    with pytest.raises(SetupError, match="again"):
        await exchange_code(
            "c1", api_url=API, env_path=env_path, data_dir=data_dir, transport=transport
        )
    with pytest.raises(SetupError, match="no usable code"):
        await exchange_code(
            "../x", api_url=API, env_path=env_path, data_dir=data_dir, transport=transport
        )


@pytest.mark.parametrize(
    "answer",
    [
        {"raw_body": b"<html>a proxy's page</html>"},
        {"json_body": {"id": 7, "slug": "x", "client_secret": "secret-that-must-not-show"}},
    ],
)
async def test_an_answer_that_is_not_the_app_is_a_clear_error(
    tmp_path: Path, answer: dict[str, object]
) -> None:
    fake = FakeGitHub()
    fake.fail_next("POST", "/app-manifests/*/conversions", 201, **answer)  # type: ignore[arg-type]
    with pytest.raises(SetupError, match="not a new App's credentials") as caught:
        await exchange_code(
            "c1",
            api_url=API,
            env_path=tmp_path / ".env",
            data_dir=tmp_path,
            transport=httpx.ASGITransport(fake.app),
        )
    assert "secret-that-must-not-show" not in str(caught.value)
    assert not (tmp_path / ".env").exists() and not (tmp_path / "app.pem").exists()


def test_merge_dotenv_updates_in_place_without_duplicates(tmp_path: Path) -> None:
    env_path = tmp_path / ".env"
    env_path.write_text("A=1\nBOT_APP_ID=5\n# BOT_APP_ID=commented\nBOT_APP_ID=6\n")
    merge_dotenv(env_path, {"BOT_APP_ID": "7", "BOT_APP_SLUG": "my bot"})
    assert env_path.read_text() == (
        'A=1\nBOT_APP_ID=7\n# BOT_APP_ID=commented\nBOT_APP_SLUG="my bot"\n'
    )
    assert mode(env_path) == 0o600
    assert load_settings(environ={}, dotenv=env_path).app_slug == "my bot"


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("http://localhost:8000/webhooks/github", id="localhost"),
        pytest.param("https://127.0.0.1/hook", id="loopback"),
        pytest.param("https://10.1.2.3/hook", id="private"),
        pytest.param("ftp://example.com/hook", id="scheme"),
        pytest.param("not a url", id="garbage"),
    ],
)
def test_webhook_url_must_be_public(url: str) -> None:
    with pytest.raises(SetupError, match=r"smee\.io"):
        check_webhook_url(url)


def test_webhook_url_gets_the_default_path_when_bare() -> None:
    assert check_webhook_url("https://smee.io/abc") == "https://smee.io/abc"
    assert check_webhook_url("https://bot.example.com") == "https://bot.example.com/webhooks/github"


def test_org_registration_url() -> None:
    url = new_app_url("https://github.example.com/", "acme", "s")
    assert url == "https://github.example.com/organizations/acme/settings/apps/new?state=s"


def test_missing_credentials_names_each_setting(tmp_path: Path) -> None:
    assert missing_credentials(Settings()) == [
        "BOT_APP_ID",
        "BOT_PRIVATE_KEY or BOT_PRIVATE_KEY_PATH",
        "BOT_WEBHOOK_SECRET",
    ]
    unreadable = Settings.model_validate(
        {"app_id": 1, "private_key_path": tmp_path / "nope.pem", "webhook_secret": "s"}
    )
    assert missing_credentials(unreadable) == [
        f"BOT_PRIVATE_KEY_PATH (cannot read {tmp_path / 'nope.pem'})"
    ]


def test_setup_is_a_cli_command() -> None:
    args = build_parser().parse_args(["setup", "--webhook-url", "https://smee.io/x", "--org", "a"])
    assert args.command == "setup" and args.org == "a" and callable(args.func)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("/data dir/app.pem", id="space"),
        pytest.param('it"s', id="double-quote"),
        pytest.param("it's", id="single-quote"),
        pytest.param("a#b", id="hash"),
        pytest.param("a\\b\\n", id="backslashes"),
        pytest.param("a$b", id="dollar"),
        pytest.param("p\\", id="trailing-backslash"),
        pytest.param('it\'s "both"', id="both-quotes"),
    ],
)
def test_dotenv_values_read_back_unchanged(tmp_path: Path, value: str) -> None:
    env_path = tmp_path / ".env"
    merge_dotenv(env_path, {"BOT_APP_SLUG": value})
    assert load_settings(environ={}, dotenv=env_path).app_slug == value


def test_dotenv_values_that_cannot_be_written_are_refused(tmp_path: Path) -> None:
    with pytest.raises(SetupError):
        merge_dotenv(tmp_path / ".env", {"BOT_APP_SLUG": "two\nlines"})
    with pytest.raises(SetupError, match=r"\$\{"):  # python-dotenv would expand it
        merge_dotenv(tmp_path / ".env", {"BOT_APP_SLUG": "x${HOME}y"})
    assert not (tmp_path / ".env").exists()


def test_setup_with_a_code_finishes_without_the_local_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeGitHub()
    fake.register_manifest_code("handcopied")
    env_path = tmp_path / ".env"
    monkeypatch.setenv("BOT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with serve_fake_github(fake) as base_url:
        monkeypatch.setenv("BOT_GITHUB_API_URL", base_url)
        argv = ["setup", "--webhook-url", "https://smee.io/x", "--code", "handcopied"]
        code = cli_main([*argv, "--env-file", str(env_path)])
        again = cli_main([*argv, "--env-file", str(env_path)])
    out = capsys.readouterr()
    assert code == 0 and "bot serve" in out.out
    assert again == 1 and "start `bot setup` again" in out.err
    assert f"BOT_APP_ID={fake.app_id}" in env_path.read_text()
    assert fake.private_key_pem not in out.out + out.err


def test_the_whole_local_flow_through_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeGitHub()
    fake.register_manifest_code("from-github")
    env_path = tmp_path / ".env"
    monkeypatch.setenv("BOT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = ["setup", "--webhook-url", "https://smee.io/x", "--no-browser", "--port", str(port)]
    result: list[int] = []
    with serve_fake_github(fake) as base_url:
        monkeypatch.setenv("BOT_GITHUB_API_URL", base_url)
        thread = threading.Thread(
            target=lambda: result.append(cli_main([*argv, "--env-file", str(env_path)]))
        )
        thread.start()
        local = f"http://127.0.0.1:{port}"
        page = None
        for _ in range(500):
            try:
                page = httpx.get(f"{local}/", timeout=5, trust_env=False)
                break
            except httpx.ConnectError:
                time.sleep(0.01)
        assert page is not None and page.status_code == 200
        action = re.search(r'action="([^"]+)"', page.text)
        assert action is not None
        state = parse_qs(urlsplit(unescape(action.group(1))).query)["state"][0]
        done = httpx.get(
            f"{local}/callback",
            params={"code": "from-github", "state": state},
            trust_env=False,
        )
        thread.join(timeout=20)
    assert done.status_code == 200 and result == [0]
    assert f"BOT_APP_SLUG={fake.slug}" in env_path.read_text()
    assert "Install it on your repositories" in capsys.readouterr().out
