"""`bot doctor`: check the settings, the model endpoint, the sandbox, the data dir, the database and git.

Each check is an async function `(DoctorContext) -> CheckResult`, listed in `CHECKS`;
`default_checks()` adds the GitHub App check (a real `GET /app`, bot/ops/doctor_checks.py).
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

from bot.agents.models import ModelError
from bot.agents.runtime import build_model
from bot.agents.sandbox import probe_sandbox
from bot.agents.sandbox_limits import SandboxLimits
from bot.ops.checks import Check, CheckResult, DoctorContext
from bot.ops.doctor_checks import make_github_check
from bot.ops.doctor_database import check_database
from bot.ops.settings_check import check_unknown_settings, credentials_gap, model_gap
from bot.settings import Settings, SettingsError, load_settings, read_variables

MIN_FREE_BYTES = 1 << 30
MIN_GIT = (2, 35)


def _is_set(settings: Settings, name: str) -> bool:
    """Set explicitly (environment or .env), not merely defaulted, and not empty."""
    key = name.lower()
    value: Any = getattr(settings, key, None)
    return key in settings.model_fields_set and value not in (None, "", {})


async def check_settings(ctx: DoctorContext) -> CheckResult:
    if ctx.settings is None:
        return CheckResult(
            "settings",
            "fail",
            ctx.settings_error or "unreadable",
            "fix the BOT_* value named above",
        )
    s = ctx.settings
    shown = [
        n
        for n in ("APP_ID", "PRIVATE_KEY", "PRIVATE_KEY_PATH", "WEBHOOK_SECRET", "APP_SLUG")
        if _is_set(s, n)
    ]
    shown += [
        n
        for n in ("MODEL", "LLM_BASE_URL", "LLM_API_KEY", "ANTHROPIC_API_KEY", "DATA_DIR")
        if _is_set(s, n)
    ]
    model, credentials = model_gap(s), credentials_gap(s)
    missing = [*(credentials.missing if credentials else ()), *(model.missing if model else ())]
    detail = "set: " + (", ".join(f"BOT_{n}" for n in shown) or "none")
    if missing:
        detail += f"; missing: {', '.join(missing)}"
    if model is not None:
        fix = f"{model.fix} in .env" + (f"; {credentials.fix}" if credentials else "")
        return CheckResult("settings", "fail", detail, fix)
    if credentials is not None:
        return CheckResult(
            "settings", "warn", detail, f"needed to serve webhooks: {credentials.fix}"
        )
    return CheckResult("settings", "ok", detail)


async def check_model(ctx: DoctorContext) -> CheckResult:
    s = ctx.settings
    if ctx.skip_model:
        return CheckResult("model", "warn", "not checked (--skip-model)")
    if s is None or not s.model:
        fix = "set BOT_MODEL and BOT_LLM_BASE_URL"
        gap = None if s is None else model_gap(s)
        return CheckResult("model", "fail", "no model configured", gap.fix if gap else fix)
    model = build_model(s)
    if model is None:
        return CheckResult("model", "fail", "no endpoint configured", "set BOT_LLM_BASE_URL")
    where = s.llm_base_url or "the Anthropic API"
    try:
        with anyio.fail_after(ctx.model_timeout + 5):
            turn = await model.complete(
                [{"role": "user", "content": "Reply with the single word: ready"}],
                [],
                model=s.model,
                first_response_timeout=ctx.model_timeout,
            )
    except ModelError as exc:
        return CheckResult(
            "model",
            "fail",
            f"{s.model} at {where}: {exc}",
            "check BOT_LLM_BASE_URL (it usually ends in /v1), BOT_LLM_API_KEY and BOT_MODEL",
        )
    except TimeoutError:
        return CheckResult("model", "fail", f"{where} did not answer", "check the endpoint")
    finally:
        await model.aclose()
    tokens = turn.usage.total
    return CheckResult("model", "ok", f"{s.model} at {where} answered ({tokens} tokens)")


async def check_sandbox(ctx: DoctorContext) -> CheckResult:
    limits = SandboxLimits() if ctx.settings is None else SandboxLimits.from_settings(ctx.settings)
    status = await anyio.to_thread.run_sync(lambda: probe_sandbox(limits=limits))
    if status.ok:
        return CheckResult(
            "sandbox",
            "ok",
            "bubblewrap runs commands isolated (no network); per command: "
            + ", ".join(status.limits),
        )
    return CheckResult(
        "sandbox",
        "warn",
        f"unavailable, so agents get no run_command tool: {status.reason}",
        "install bubblewrap and allow user namespaces to let agents run checks",
    )


def _data_dir_result(path: Path) -> CheckResult:
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".doctor-") as handle:
            handle.write(b"ok")
    except OSError as exc:
        return CheckResult(
            "data dir",
            "fail",
            f"{path} is not writable ({exc.strerror})",
            "set BOT_DATA_DIR to a writable directory",
        )
    free = shutil.disk_usage(path).free
    detail = f"{path.resolve()} writable, {free / (1 << 30):.1f} GiB free"
    if free < MIN_FREE_BYTES:
        return CheckResult(
            "data dir", "warn", detail, "free some space: mirrors and worktrees grow"
        )
    return CheckResult("data dir", "ok", detail)


async def check_data_dir(ctx: DoctorContext) -> CheckResult:
    path = ctx.settings.data_dir if ctx.settings is not None else Path(".bot")
    return await anyio.to_thread.run_sync(_data_dir_result, path)


def git_version(output: str) -> tuple[int, int] | None:
    match = re.search(r"(\d+)\.(\d+)", output)
    return (int(match.group(1)), int(match.group(2))) if match else None


async def check_git(ctx: DoctorContext) -> CheckResult:
    git = shutil.which("git")
    if git is None:
        return CheckResult("git", "fail", "git is not installed", "install git 2.35 or newer")
    done = await anyio.run_process([git, "--version"], check=False)
    text = done.stdout.decode().strip()
    version = git_version(text)
    if version is None or version < MIN_GIT:
        return CheckResult(
            "git", "fail", f"{text or 'unknown version'}", "install git 2.35 or newer"
        )
    return CheckResult("git", "ok", text)


async def check_ui(ctx: DoctorContext) -> CheckResult:
    """Whether `bot serve` serves the operator's page, and how one signs in (never shows the
    token or the OAuth client's secret)."""
    s = ctx.settings
    problem = None if s is None else s.sign_in_problem()
    if problem is not None:
        return CheckResult(
            "operator page", "fail", problem, "set the rest, or unset the GitHub sign-in keys"
        )
    if s is not None and s.github_sign_in and (s.app_id is None or s.private_key_pem() is None):
        return CheckResult(
            "operator page",
            "fail",
            "signing in with GitHub asks GitHub with the App's credentials, which are missing",
            "set BOT_APP_ID and BOT_PRIVATE_KEY_PATH (`bot setup` writes them)",
        )
    if s is None or (s.ui_token is None and not s.github_sign_in):
        return CheckResult("operator page", "ok", "off (set BOT_UI_TOKEN to serve it under /ui/)")
    ways = []
    if s.github_sign_in:
        ways.append(f"GitHub, for {s.ui_allow}")
    if s.ui_token is not None:
        token = s.ui_token.get_secret_value()
        if len(token) < 16:
            return CheckResult(
                "operator page",
                "warn",
                f"on at /ui/, but BOT_UI_TOKEN is only {len(token)} characters",
                "use a long random token, e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`",
            )
        ways.append("BOT_UI_TOKEN")
    where = f"{s.ui_url}/ui/" if s.ui_url else f"http://{s.host}:{s.port}/ui/"
    return CheckResult("operator page", "ok", f"on at {where} (sign in with {' or '.join(ways)})")


CHECKS: list[Check] = [
    check_settings,
    check_model,
    check_sandbox,
    check_data_dir,
    check_database,
    check_git,
    check_ui,
    check_unknown_settings,
]


def default_checks() -> list[Check]:
    """CHECKS plus the GitHub App check (a real `GET /app`)."""
    return [*CHECKS, make_github_check()]


async def run_checks(ctx: DoctorContext, checks: list[Check] | None = None) -> list[CheckResult]:
    results: list[CheckResult] = []
    for check in checks if checks is not None else CHECKS:
        try:
            results.append(await check(ctx))
        except Exception as exc:  # a broken check must not hide the others
            name = check.__name__.removeprefix("check_")
            results.append(CheckResult(name, "fail", f"the check crashed: {exc!r}"))
    return results


def load_context(environ: dict[str, str] | None = None) -> DoctorContext:
    try:
        variables = read_variables(environ)
    except SettingsError:
        variables = {}  # a source that cannot be read: the settings check names it
    try:
        return DoctorContext(settings=load_settings(environ), variables=variables)
    except SettingsError as exc:
        return DoctorContext(settings=None, settings_error=str(exc), variables=variables)


def cmd_doctor(args: argparse.Namespace) -> int:
    ctx = load_context()
    ctx.skip_model = bool(args.skip_model)
    ctx.model_timeout = float(args.timeout)
    results = anyio.run(run_checks, ctx, default_checks())
    for result in results:
        print(result.line())
    failed = [r.name for r in results if r.status == "fail"]
    if failed:
        print(f"{len(failed)} check(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("doctor", help="check settings, model, sandbox and disk")
    parser.add_argument("--skip-model", action="store_true", help="do not call the model")
    parser.add_argument("--timeout", type=float, default=20.0, help="model check timeout (s)")
    parser.set_defaults(func=cmd_doctor)


__all__ = ["CHECKS", "Check", "CheckResult", "DoctorContext", "register", "run_checks"]
