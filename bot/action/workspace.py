"""The job's checkout, lent to the app's mirror so that a review fetches little or nothing.

`actions/checkout` leaves the event's repository in `GITHUB_WORKSPACE`. When that checkout
is of the same repository and holds its whole history (`fetch-depth: 0`), the mirror reads
objects from it (git alternates) and fetches only what it lacks; a shallow checkout would
lend commits without their parents, so the mirror then fetches on its own, as it does with
no checkout at all. Nothing in the checkout is run or trusted: its `.git/config` is read as
text for the remote's address, never by git, and the code is never checked out for an agent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from bot.action.env import ActionEnv
from bot.log import get_logger
from bot.settings import Settings

log = get_logger(__name__)

__all__ = ["lend_workspace", "origin_url", "same_repository"]

_ORIGIN = re.compile(r'^\s*\[remote\s+"origin"\]\s*$')
_SECTION = re.compile(r"^\s*\[")
_URL = re.compile(r"^\s*url\s*=\s*(\S+)\s*$")
SHALLOW_NOTE = (
    "the job's checkout is shallow, so the app fetched the history it needed itself; "
    "`fetch-depth: 0` on actions/checkout lets it reuse the checkout"
)


@dataclass(slots=True)
class _Named:
    owner: str
    repo: str

    async def token(self) -> str:  # borrowing asks GitHub for nothing
        raise RuntimeError("no token is needed to borrow a checkout's objects")


def origin_url(git_dir: Path) -> str | None:
    """`remote.origin.url` from `git_dir/config`, read as text."""
    try:
        lines = (git_dir / "config").read_text(errors="replace").splitlines()
    except OSError:
        return None
    inside = False
    for line in lines:
        if _SECTION.match(line):
            inside = bool(_ORIGIN.match(line))
        elif inside and (match := _URL.match(line)):
            return match.group(1)
    return None


def same_repository(url: str, server_url: str, full_name: str) -> bool:
    parts, server = urlsplit(url), urlsplit(server_url)
    path = parts.path.strip("/").removesuffix(".git")
    return parts.hostname == server.hostname and path.lower() == full_name.lower()


async def lend_workspace(env: ActionEnv, settings: Settings) -> str | None:
    """Lend the checkout's objects to the mirror; a note for the summary when it cannot."""
    from bot.git.checkout import Mirrors

    workspace = env.github_workspace
    git_dir = workspace / ".git" if workspace is not None else None
    if git_dir is None or not (git_dir / "objects").is_dir():
        return None  # no checkout: the mirror fetches, as a server's does
    url = origin_url(git_dir)
    if url is None or not same_repository(url, env.github_server_url, env.github_repository):
        log.info("the job's checkout is of another repository; not borrowing from it")
        return None
    if (git_dir / "shallow").exists():
        return SHALLOW_NOTE
    owner, repo = env.github_repository.split("/", 1)
    host = urlsplit(settings.github_web_url).hostname
    mirrors = Mirrors(
        settings.data_dir,
        web_url=settings.github_web_url,
        allow_http=host in ("127.0.0.1", "localhost", "::1"),
    )
    await mirrors.borrow(_Named(owner, repo), git_dir / "objects")
    log.info("the mirror reads objects from the job's checkout")
    return None
