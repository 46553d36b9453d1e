"""The GitHub App check for `bot doctor`: a real `GET /app` with the JWT, then the installations."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import httpx
import jwt

from bot.github.client import GitHubApp, RetryPolicy
from bot.github.errors import AuthError, GitHubError
from bot.github.setup import missing_credentials
from bot.ops.checks import CheckResult
from bot.settings import SettingsError

if TYPE_CHECKING:
    from bot.ops.checks import Check, DoctorContext

TIMEOUT_S = 30.0
SHOWN_INSTALLATIONS = 10


def make_github_check(transport: httpx.AsyncBaseTransport | None = None) -> Check:
    """The check, talking to BOT_GITHUB_API_URL (or through `transport`, for tests)."""

    async def check_github_app(ctx: DoctorContext) -> CheckResult:
        settings = ctx.settings
        if settings is None:
            return CheckResult(
                "github app", "fail", "settings unreadable", "fix the settings first"
            )
        missing = [m for m in missing_credentials(settings) if "WEBHOOK" not in m]
        if missing:
            return CheckResult(
                "github app",
                "warn",
                f"not checked: {', '.join(missing)} missing",
                "run `bot setup` to register the App",
            )
        policy = RetryPolicy(attempts=2, backoff_s=0.5, max_sleep_s=5, timeout_s=TIMEOUT_S)
        try:
            app = GitHubApp.from_settings(settings, transport=transport, policy=policy)
        except (ValueError, SettingsError) as exc:
            return CheckResult("github app", "fail", str(exc), "check BOT_PRIVATE_KEY_PATH")
        try:
            with anyio.fail_after(TIMEOUT_S * 2):
                info = await app.get_app()
                installations = await app.list_installations()
        except AuthError as exc:
            return CheckResult(
                "github app",
                "fail",
                f"GitHub refused the App's JWT ({exc.message})",
                "BOT_APP_ID and the private key must belong to the same App; "
                "check the machine's clock too",
            )
        except GitHubError as exc:
            return CheckResult(
                "github app",
                "fail",
                str(exc),
                f"check BOT_GITHUB_API_URL ({settings.github_api_url}) and the network",
            )
        except (jwt.PyJWTError, ValueError, TypeError) as exc:
            return CheckResult(
                "github app",
                "fail",
                f"the private key cannot sign a JWT ({type(exc).__name__})",
                "point BOT_PRIVATE_KEY_PATH at the .pem GitHub gave you",
            )
        except TimeoutError:
            return CheckResult("github app", "fail", f"{settings.github_api_url} did not answer")
        finally:
            await app.aclose()
        names = [
            f"{i.account.login if i.account else '?'} (id {i.id}, {i.repository_selection})"
            for i in installations[:SHOWN_INSTALLATIONS]
        ]
        more = len(installations) - len(names)
        listed = ", ".join(names) + (f" and {more} more" if more > 0 else "")
        detail = f"App {info.slug} (id {info.id}); {len(installations)} installation(s)"
        if settings.app_slug and settings.app_slug.lower() != info.slug.lower():
            return CheckResult(
                "github app",
                "warn",
                f"{detail}; BOT_APP_SLUG is {settings.app_slug!r} but GitHub says {info.slug!r}",
                "unset BOT_APP_SLUG or fix it: mentions of the App would not be recognised",
            )
        if not installations:
            return CheckResult(
                "github app",
                "warn",
                f"{detail}: not installed anywhere",
                f"install it: {info.html_url or 'https://github.com/apps/' + info.slug}"
                "/installations/new",
            )
        return CheckResult("github app", "ok", f"{detail}: {listed}")

    return check_github_app


check_github_app = make_github_check()
