"""`bot setup`: register the GitHub App from app.yml through GitHub's manifest flow.

    bot setup --webhook-url https://smee.io/abc123 [--org my-org] [--port 3000]

1. A small page on http://127.0.0.1:<port>/ posts the manifest (app.yml, with the
   webhook URL and this page's callback filled in) to
   `<BOT_GITHUB_WEB_URL>/settings/apps/new` (or `/organizations/<org>/settings/apps/new`).
2. GitHub shows the App for confirmation and then redirects to `/callback?code=...`.
3. The callback checks the `state` it issued, exchanges the code at
   `POST <BOT_GITHUB_API_URL>/app-manifests/<code>/conversions`, writes the private
   key to `<BOT_DATA_DIR>/app.pem` (mode 0600; an older key is kept beside it), and
   merges `BOT_APP_ID`, `BOT_PRIVATE_KEY_PATH`, `BOT_WEBHOOK_SECRET` and
   `BOT_APP_SLUG` into `.env` (mode 0600; other lines kept, no key duplicated).

`missing_credentials(settings)` names what `bot serve` still lacks.
"""

from __future__ import annotations

import argparse
import html
import ipaddress
import json
import os
import secrets
import socket
import sys
import time
import webbrowser
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import anyio
import httpx
import uvicorn
import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from bot.github.models import ManifestConversion
from bot.log import configure, get_logger
from bot.settings import Settings, SettingsError, load_settings
from policies.ui_allow import callback_url, public_origin

log = get_logger(__name__)

MANIFEST_PATH = Path(__file__).resolve().parents[2] / "app.yml"
WEBHOOK_PATH = "/webhooks/github"
AUTOMATIC_EVENTS = frozenset({"installation", "installation_repositories"})
"""Delivered to every App without subscribing; GitHub refuses a manifest listing them."""
WRITTEN_KEYS = ("BOT_APP_ID", "BOT_PRIVATE_KEY_PATH", "BOT_WEBHOOK_SECRET", "BOT_APP_SLUG")


class SetupError(Exception):
    """Registration cannot go on; the message says what to do."""


def missing_credentials(settings: Settings) -> list[str]:
    """The settings `bot serve` needs to talk to GitHub that are unset or unusable."""
    missing: list[str] = []
    if settings.app_id is None:
        missing.append("BOT_APP_ID")
    if settings.private_key is None and settings.private_key_path is None:
        missing.append("BOT_PRIVATE_KEY or BOT_PRIVATE_KEY_PATH")
    elif settings.private_key is None and settings.private_key_path is not None:
        try:
            settings.private_key_pem()
        except SettingsError:
            missing.append(f"BOT_PRIVATE_KEY_PATH (cannot read {settings.private_key_path})")
    if not settings.webhook_secrets and not settings.insecure_no_signature:
        missing.append("BOT_WEBHOOK_SECRET")
    return missing


def check_webhook_url(url: str) -> str:
    """The webhook URL GitHub will post to: public http(s); a bare host gets /webhooks/github."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    hint = (
        "GitHub must be able to reach it: use a public address, a tunnel, or a smee.io channel "
        "(https://smee.io/new) forwarded with `npx smee-client --url <channel> --target "
        f"http://127.0.0.1:8000{WEBHOOK_PATH}`"
    )
    if parts.scheme not in ("https", "http") or not host:
        raise SetupError(f"--webhook-url must be an http(s) URL, got {url!r}. {hint}")
    private = host == "localhost" or host.endswith((".local", ".localhost", ".internal"))
    try:
        address = ipaddress.ip_address(host)
        private = private or not address.is_global
    except ValueError:
        pass
    if private:
        raise SetupError(f"--webhook-url {url} is not public. {hint}")
    if parts.path in ("", "/"):
        url = url.rstrip("/") + WEBHOOK_PATH
    return url


def build_manifest(
    source: Mapping[str, Any],
    *,
    webhook_url: str,
    redirect_url: str,
    name: str | None = None,
    ui_url: str | None = None,
) -> dict[str, Any]:
    """The manifest to post: app.yml with our webhook URL and callback, automatic events
    removed, and with `ui_url` the operator page's sign-in callback."""
    manifest: dict[str, Any] = json.loads(json.dumps(dict(source)))  # a deep copy
    if ui_url is not None:
        manifest["callback_urls"] = [callback_url(ui_url)]
    manifest["hook_attributes"] = {**manifest.get("hook_attributes", {}), "url": webhook_url}
    manifest["hook_attributes"].setdefault("active", True)
    manifest["redirect_url"] = redirect_url
    if name:
        manifest["name"] = name
    manifest["default_events"] = [
        e for e in manifest.get("default_events", []) if e not in AUTOMATIC_EVENTS
    ]
    return manifest


def load_manifest(path: Path = MANIFEST_PATH) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise SetupError(f"cannot read the App manifest {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise SetupError(f"{path} is not a mapping of manifest fields")
    return data


def new_app_url(web_url: str, org: str | None, state: str) -> str:
    base = web_url.rstrip("/")
    path = f"/organizations/{org}/settings/apps/new" if org else "/settings/apps/new"
    return f"{base}{path}?{urlencode({'state': state})}"


def _dotenv_value(value: str) -> str:
    """A value as python-dotenv (bot/settings_sources.py) reads it back: bare, in double
    quotes when nothing in it is an escape, else in single quotes with `\\` and `'` escaped.
    python-dotenv expands `${NAME}` whatever the quotes, so such a value is refused."""
    if "\n" in value or "\r" in value:
        raise SetupError("a .env value cannot span lines")
    if "${" in value:
        raise SetupError("a .env value cannot hold `${` (it would be expanded when read)")
    if value and all(c.isalnum() or c in "-_./:@+=," for c in value):
        return value
    if not any(c in value for c in '\\"$'):
        return f'"{value}"'
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def merge_dotenv(path: Path, values: Mapping[str, str], *, remove: tuple[str, ...] = ()) -> None:
    """Set `values` in the .env at `path`, keeping every other line; written 0600, atomically."""
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    out: list[str] = []
    written: set[str] = set()
    for line in lines:
        key = line.split("=", 1)[0].strip().removeprefix("export ").strip() if "=" in line else ""
        if key in remove and not line.lstrip().startswith("#"):
            out.append(f"# {key} replaced by `bot setup` on {time.strftime('%Y-%m-%d')}")
            continue
        if key in values and not line.lstrip().startswith("#"):
            if key not in written:
                out.append(f"{key}={_dotenv_value(values[key])}")
                written.add(key)
            continue
        out.append(line)
    out.extend(f"{k}={_dotenv_value(v)}" for k, v in values.items() if k not in written)
    _write_private(path, ("\n".join(out) + "\n").encode())


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


@dataclass(frozen=True, slots=True)
class Registered:
    """What registration produced (no secrets)."""

    app_id: int
    slug: str
    html_url: str
    env_path: Path
    key_path: Path
    webhook_secret_generated: bool


async def exchange_code(
    code: str,
    *,
    api_url: str,
    env_path: Path,
    data_dir: Path,
    transport: httpx.AsyncBaseTransport | None = None,
    ui_url: str | None = None,
) -> Registered:
    """Trade the manifest code for the App's credentials and store them."""
    if not code or not all(c.isalnum() or c in "-_" for c in code):
        raise SetupError("GitHub sent no usable code; start `bot setup` again")
    async with httpx.AsyncClient(
        base_url=api_url,
        transport=transport,
        timeout=30,
        headers={"Accept": "application/json"},
        trust_env=transport is None,
    ) as client:
        try:
            response = await client.post(f"/app-manifests/{code}/conversions")
        except httpx.HTTPError as exc:
            raise SetupError(f"could not reach {api_url}: {type(exc).__name__}") from exc
    if response.status_code != 201:
        raise SetupError(
            f"GitHub refused the code ({response.status_code}); codes expire after an hour and "
            "work once: start `bot setup` again"
        )
    try:
        app = ManifestConversion.model_validate(response.json())
    except ValueError:  # not JSON, or not the App: the text could hold a key, so it is not shown
        raise SetupError(
            f"GitHub's answer to the code is not a new App's credentials; "
            f"check BOT_GITHUB_API_URL ({api_url}) and start `bot setup` again"
        ) from None
    key_path = (data_dir / "app.pem").resolve()
    if key_path.exists():
        backup = key_path.with_name(f"app.pem.{time.strftime('%Y%m%d%H%M%S')}.bak")
        os.replace(key_path, backup)
    _write_private(key_path, app.pem.encode())
    generated = not app.webhook_secret
    webhook_secret = app.webhook_secret or secrets.token_hex(32)
    merge_dotenv(
        env_path,
        {
            "BOT_APP_ID": str(app.id),
            "BOT_PRIVATE_KEY_PATH": str(key_path),
            "BOT_WEBHOOK_SECRET": webhook_secret,
            "BOT_APP_SLUG": app.slug,
            # The App's OAuth client: the operator's page signs people in with it.
            **({"BOT_OAUTH_CLIENT_ID": app.client_id} if app.client_id else {}),
            **({"BOT_OAUTH_CLIENT_SECRET": app.client_secret} if app.client_secret else {}),
            **({"BOT_UI_URL": ui_url} if ui_url else {}),
        },
        remove=("BOT_PRIVATE_KEY",),
    )
    log.info("github app registered", extra={"app_id": app.id, "slug": app.slug})
    return Registered(app.id, app.slug, app.html_url, env_path, key_path, generated)


def next_steps(done: Registered, webhook_url: str) -> str:
    lines = [
        f"Registered the GitHub App {done.slug} (id {done.app_id}).",
        f"  credentials: {done.env_path} and {done.key_path} (owner-only)",
        f"1. Install it on your repositories: {done.html_url or 'https://github.com/apps/' + done.slug}"
        "/installations/new",
        "2. Start the app: bot serve",
        f"3. Webhooks go to {webhook_url}; if that is a smee.io channel, forward it with",
        f"   npx smee-client --url {webhook_url} --target http://127.0.0.1:8000{WEBHOOK_PATH}",
        "4. Check everything: bot doctor",
    ]
    if done.webhook_secret_generated:
        lines.append(
            "GitHub returned no webhook secret: a new one is in .env as BOT_WEBHOOK_SECRET; "
            "paste it into the App's settings page (Webhook secret)."
        )
    return "\n".join(lines)


def setup_app(
    *,
    manifest: Mapping[str, Any],
    target: str,
    state: str,
    on_code: Callable[[str], Any],
) -> Starlette:
    """The local page: `/` posts the manifest to GitHub, `/callback` receives the code."""

    async def start(request: Request) -> Response:
        payload = html.escape(json.dumps(manifest), quote=True)
        page = (
            "<!doctype html><title>Register the GitHub App</title>"
            f'<form id="f" method="post" action="{html.escape(target, quote=True)}">'
            f'<input type="hidden" name="manifest" value="{payload}">'
            "<p>Sending the App manifest to GitHub...</p>"
            '<button type="submit">Continue to GitHub</button></form>'
            "<script>document.getElementById('f').submit()</script>"
        )
        return HTMLResponse(page)

    async def callback(request: Request) -> Response:
        if not secrets.compare_digest(request.query_params.get("state", ""), state):
            return HTMLResponse("<p>Unexpected request: the state does not match.</p>", 400)
        try:
            message = await on_code(request.query_params.get("code", ""))
        except SetupError as exc:
            return HTMLResponse(f"<p>{html.escape(str(exc))}</p>", 502)
        return HTMLResponse(f"<pre>{html.escape(str(message))}</pre>")

    return Starlette(routes=[Route("/", start), Route("/callback", callback)])


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser(
        "setup", help="register the GitHub App from app.yml (GitHub's manifest flow)"
    )
    parser.add_argument(
        "--webhook-url",
        required=True,
        help="public URL GitHub posts webhooks to (a tunnel or https://smee.io/<channel>)",
    )
    parser.add_argument("--org", help="register the App under this organization")
    parser.add_argument(
        "--ui-url",
        help="the app's public address (https://bot.example.com): registers the operator "
        "page's GitHub sign-in callback and sets BOT_UI_URL",
    )
    parser.add_argument("--name", help="the App's name (default: app.yml's)")
    parser.add_argument("--port", type=int, default=3000, help="local port (default 3000)")
    parser.add_argument("--env-file", type=Path, default=Path(".env"), help="default ./.env")
    parser.add_argument(
        "--manifest",
        type=Path,
        default=Path("app.yml") if Path("app.yml").is_file() else MANIFEST_PATH,
        help="the App manifest (default: ./app.yml)",
    )
    parser.add_argument(
        "--code",
        help="finish with the `code` from GitHub's redirect URL (when the browser ran elsewhere)",
    )
    parser.add_argument("--no-browser", action="store_true", help="print the URL only")
    parser.set_defaults(func=run_setup)


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _exchange_only(
    code: str, settings: Settings, env_file: Path, webhook_url: str, ui_url: str | None
) -> int:
    """`--code`: finish a registration whose redirect reached another machine."""

    async def exchange() -> Registered:
        return await exchange_code(
            code,
            api_url=settings.github_api_url,
            env_path=env_file,
            data_dir=settings.data_dir,
            ui_url=ui_url,
        )

    try:
        done = anyio.run(exchange)
    except SetupError as exc:
        print(f"bot setup: {exc}", file=sys.stderr)
        return 1
    print(next_steps(done, webhook_url))
    return 0


def run_setup(args: argparse.Namespace) -> int:
    configure()
    try:
        settings = load_settings(dotenv=args.env_file)
        webhook_url = check_webhook_url(args.webhook_url)
        source = load_manifest(args.manifest)
        ui_url = None if args.ui_url is None else public_origin(args.ui_url)
    except (SetupError, SettingsError, ValueError) as exc:
        print(f"bot setup: {exc}", file=sys.stderr)
        return 2
    if args.code:
        return _exchange_only(args.code, settings, args.env_file, webhook_url, ui_url)
    if not _port_free(args.port):
        print(
            f"bot setup: port {args.port} on 127.0.0.1 is in use; pick another with --port",
            file=sys.stderr,
        )
        return 2
    state = secrets.token_urlsafe(24)
    redirect = f"http://127.0.0.1:{args.port}/callback"
    manifest = build_manifest(
        source, webhook_url=webhook_url, redirect_url=redirect, name=args.name, ui_url=ui_url
    )
    target = new_app_url(settings.github_web_url, args.org, state)
    result: list[Registered] = []

    async def on_code(code: str) -> str:
        done = await exchange_code(
            code,
            api_url=settings.github_api_url,
            env_path=args.env_file,
            data_dir=settings.data_dir,
            ui_url=ui_url,
        )
        result.append(done)
        server.should_exit = True
        return next_steps(done, webhook_url)

    page = setup_app(manifest=manifest, target=target, state=state, on_code=on_code)
    server = uvicorn.Server(
        uvicorn.Config(page, host="127.0.0.1", port=args.port, log_level="warning", lifespan="off")
    )
    local = f"http://127.0.0.1:{args.port}/"
    print(f"Open {local} to register the App on GitHub (Ctrl-C to give up).")
    if not args.no_browser:
        webbrowser.open(local)
    try:
        anyio.run(server.serve)
    except KeyboardInterrupt:
        return 130
    if not result:
        print("bot setup: stopped before GitHub sent the App back; nothing written.")
        return 1
    print(next_steps(result[0], webhook_url))
    return 0
