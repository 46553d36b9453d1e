"""Bare mirrors of the repositories the bot works on, fetched with the installation token.

    mirrors = Mirrors(settings.data_dir, web_url=settings.github_web_url)
    git_dir = await mirrors.ensure_commit(gh, head_sha, pull_number=7)   # gh: InstallationClient
    # read-only agents read `head_sha` from `git_dir`; writing agents get worktrees from it
    removed = await mirrors.sweep()            # or: task_group.start_soon(mirrors.sweep_forever)

One bare mirror per repository at `<data_dir>/repos/<owner>/<repo>.git`, fetched
from `<web_url>/<owner>/<repo>.git` as given now (so a changed BOT_GITHUB_WEB_URL
applies to existing mirrors). A fetch brings only what is asked: a pull request's
`refs/pull/<n>/head` (which works for pulls from forks too, read-only) with the
default branch, a named branch, or else the commit itself. `ensure_commit` does
not touch the network when the commit is already there. `push_branch` pushes a
commit to a `bot/...` branch, never to any other and never forced; a refusal by the remote
(branch protection, a non-fast-forward) raises `PushRefused` with git's lines.

The token reaches git only through the environment: `GIT_CONFIG_COUNT`/`KEY`/`VALUE`
set `http.extraHeader: Authorization: Basic <base64(x-access-token:TOKEN)>` for the
one git process. It is never in a URL, argv, the mirror's config, FETCH_HEAD or a
log; git's error text is scrubbed of it before it is raised. git runs through `bot.git.hostgit`
(a clean environment plus proxy settings only: no GIT_TRACE*, no user or system config, no
credential helpers, no prompts; no hooks, no fsmonitor, no filter drivers), with no redirects,
hooks also disabled in the mirror's config (`core.hooksPath=/dev/null`) so worktrees made from
it run none, submodules never fetched, and only the `https` transport allowed (`http` too when
`allow_http` is set, for a local test server).

Fetches of one repository are serialised by an anyio lock in the process and an
`flock` on `<repo>.git.lock` across processes. `sweep()` deletes mirrors unused
for `mirror_max_age_days` and worktrees older than `worktree_max_age_days` (a quarantined
one without running git in it), then runs `git worktree prune`.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import os
import re
import shutil
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Protocol

import anyio
import anyio.to_thread

from bot.git import gitguard, hostgit
from bot.log import get_logger
from bot.store.queue.fence import check_fence

log = get_logger(__name__)

_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
_BRANCH_PART = re.compile(r"^[A-Za-z0-9._-]+$")
_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
_PROXY_VARIABLES = (
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "all_proxy",
)
LAST_USED = "bot-last-used"
WORKTREES = gitguard.WORKTREES_DIR
DEFAULT_HEAD = "refs/remotes/origin/HEAD"
"""Where the remote's default branch tip is kept (fetched along with every pull head)."""


class CheckoutError(RuntimeError):
    """A mirror could not be created or fetched; the message says what git said (no token)."""


class PushRefused(CheckoutError):
    """The remote (or git, for a non-fast-forward) refused a push; `lines` are git's words."""

    def __init__(self, branch: str, lines: Sequence[str]) -> None:
        self.branch = branch
        self.lines = tuple(lines)
        detail = "; ".join(self.lines) or "no output"
        super().__init__(f"the push to {branch} was refused: {detail}")


def check_bot_branch(branch: str) -> None:
    """Raise `CheckoutError` unless `branch` is a branch name the bot may push to.

    `bot/` and then parts of letters, digits, `.`, `_` and `-`, none starting with `.` or `-`
    or ending with `.lock`; no `..`, no empty part, at most 200 characters. That leaves out
    every character git or a refspec reads specially (`+`, `:`, `~`, `^`, `@{`, spaces,
    control characters).
    """
    parts = branch.split("/")
    ok = (
        len(branch) <= 200
        and len(parts) >= 2
        and parts[0] == "bot"
        and ".." not in branch
        and all(
            _BRANCH_PART.fullmatch(part)
            and not part.startswith((".", "-"))
            and not part.endswith((".lock", "."))
            for part in parts[1:]
        )
    )
    if not ok:
        raise CheckoutError(
            f"the bot pushes only to bot/* branches with plain names, not {branch!r}"
        )


def _refusal_lines(stderr: str) -> list[str]:
    """What git said about a refused push: the remote's errors and the refused refs."""
    keep = []
    for line in stderr.splitlines():
        text = " ".join("".join(ch for ch in line if ch.isprintable()).split())
        if text.startswith(("remote: error", "!", "error:", "fatal:", "hint: Updates")):
            keep.append(text[:300])
    if not keep and stderr.strip():
        keep.append(stderr.strip().splitlines()[-1][:300])
    return keep[:8]


class RepoSource(Protocol):
    """What a mirror needs from a GitHub client: the repository's name and a token."""

    owner: str
    repo: str

    async def token(self) -> str: ...


class Mirrors:
    """The mirrors under one data directory."""

    def __init__(
        self,
        data_dir: Path,
        *,
        web_url: str = "https://github.com",
        allow_http: bool = False,
        mirror_max_age_days: float = 14,
        worktree_max_age_days: float = 7,
        timeout_s: float = 600,
    ) -> None:
        """`web_url` is where repositories are cloned from (BOT_GITHUB_WEB_URL).

        `allow_http` permits plain-http remotes; only for a test server on 127.0.0.1.
        """
        if not web_url.startswith("https://") and not (
            allow_http and web_url.startswith("http://")
        ):
            raise ValueError(f"mirrors need an https:// web URL, got {web_url!r}")
        self.root = Path(data_dir) / "repos"
        self.web_url = web_url.rstrip("/")
        self.allow_http = allow_http
        self.mirror_max_age_days = mirror_max_age_days
        self.worktree_max_age_days = worktree_max_age_days
        self.timeout_s = timeout_s
        self._locks: dict[str, anyio.Lock] = {}

    def path_for(self, owner: str, repo: str) -> Path:
        """`<data_dir>/repos/<owner>/<repo>.git`; odd names are refused, not escaped."""
        for part in (owner, repo):
            if not _NAME.fullmatch(part) or part in (".", ".."):
                raise CheckoutError(f"not a repository name: {part!r}")
        return self.root / owner / f"{repo}.git"

    def remote_url(self, owner: str, repo: str) -> str:
        return f"{self.web_url}/{owner}/{repo}.git"

    async def ensure_commit(
        self,
        source: RepoSource,
        sha: str,
        *,
        pull_number: int | None = None,
        branch: str | None = None,
    ) -> Path:
        """The mirror's git dir, holding `sha`; fetched only when the commit is missing.

        With `pull_number`, `refs/pull/<n>/head` and the default branch (into
        `refs/remotes/origin/HEAD`) are fetched; with `branch`, that branch; with neither,
        the commit by its id (also the fallback when a ref no longer leads to `sha`).
        """
        if not _SHA.fullmatch(sha):
            raise CheckoutError(f"not a commit id: {sha!r}")
        git_dir = self.path_for(source.owner, source.repo)
        if git_dir.is_dir() and await self._has_commit(git_dir, sha):
            _touch(git_dir)
            return git_dir
        refspecs: list[str] = []
        if pull_number is not None:
            refspecs.append(f"+refs/pull/{int(pull_number)}/head:refs/pull/{int(pull_number)}/head")
            # The default branch too, so the pull's merge base with it is at hand.
            refspecs.append(f"+HEAD:{DEFAULT_HEAD}")
        if branch is not None:
            if branch.startswith("-") or ".." in branch:
                raise CheckoutError(f"not a branch name: {branch!r}")
            refspecs.append(f"+refs/heads/{branch}:refs/heads/{branch}")
        if not refspecs:
            refspecs.append(sha)
        await self.fetch(source, refspecs, unless_present=sha)
        if sha not in refspecs and not await self._has_commit(git_dir, sha):
            # The ref moved on (a force-push, a newer push): ask for the commit itself.
            refspecs.append(sha)
            with contextlib.suppress(CheckoutError):  # "not our ref": reported below
                await self.fetch(source, [sha], unless_present=sha)
        if not await self._has_commit(git_dir, sha):
            raise CheckoutError(
                f"{source.owner}/{source.repo}: commit {sha[:12]} not found after fetching "
                f"{', '.join(refspecs)}"
            )
        return git_dir

    async def fetch(
        self, source: RepoSource, refspecs: Sequence[str], *, unless_present: str | None = None
    ) -> Path:
        """Create the mirror if needed and fetch `refspecs` into it, under the repository lock.

        With `unless_present`, nothing is fetched when that commit arrived meanwhile (a
        concurrent fetch for the same commit finished while this one waited for the lock).
        """
        git_dir = self.path_for(source.owner, source.repo)
        async with self._locked(git_dir):
            if not (git_dir / "HEAD").is_file():
                await self._init(git_dir, source)
            elif unless_present is not None and await self._has_commit(git_dir, unless_present):
                return git_dir
            token = await source.token()
            started = time.monotonic()
            await self._git(
                git_dir,
                [
                    "fetch",
                    "--no-tags",
                    "--no-recurse-submodules",
                    "--no-write-fetch-head",
                    "--quiet",
                    self.remote_url(source.owner, source.repo),
                    *refspecs,
                ],
                token=token,
            )
            _touch(git_dir)
            log.info(
                "mirror fetched",
                extra={
                    "repo": f"{source.owner}/{source.repo}",
                    "refs": len(refspecs),
                    "seconds": round(time.monotonic() - started, 3),
                },
            )
        return git_dir

    async def borrow(self, source: RepoSource, objects: Path) -> Path:
        """Let the mirror read objects from another repository's `objects` directory (a job's
        checkout of the same repository) before fetching; git checks each object it reads by
        its id, so a borrowed object is the one its id names. Creates the mirror if needed."""
        git_dir = self.path_for(source.owner, source.repo)
        async with self._locked(git_dir):
            if not (git_dir / "HEAD").is_file():
                await self._init(git_dir, source)
            if not objects.is_absolute():
                raise CheckoutError(f"not an absolute objects directory: {objects}")
            info = git_dir / "objects" / "info"
            info.mkdir(parents=True, exist_ok=True)
            (info / "alternates").write_text(f"{objects}\n")
        return git_dir

    async def push_branch(
        self,
        source: RepoSource,
        sha: str,
        branch: str,
        *,
        default_branch: str | None = None,
    ) -> str:
        """Push commit `sha` from the mirror to `refs/heads/<branch>`; return `sha`.

        Only a `bot/...` branch (see `check_bot_branch`), never `default_branch`, and never
        forced: the refspec has no `+`, so git refuses a commit that does not descend from the
        branch's tip. All of that is checked before any network call. Worktrees share the
        mirror's object database, so a commit made in an agent's worktree is pushed from here,
        with only the objects the remote lacks. A push the remote refuses (branch protection,
        a non-fast-forward) raises `PushRefused` naming the branch and git's own lines.
        """
        if not _SHA.fullmatch(sha):
            raise CheckoutError(f"not a commit id: {sha!r}")
        check_bot_branch(branch)
        if default_branch is not None and branch == default_branch:
            raise CheckoutError(f"the bot never pushes to the default branch ({branch})")
        git_dir = self.path_for(source.owner, source.repo)
        if not git_dir.is_dir() or not await self._has_commit(git_dir, sha):
            raise CheckoutError(f"{sha[:12]} is not in the mirror of {source.owner}/{source.repo}")
        async with self._locked(git_dir):
            token = await source.token()
            await check_fence()  # a push is a GitHub write: only while the job's lease holds
            code, stderr = await self._git(
                git_dir,
                [
                    "push",
                    "--quiet",
                    "--no-verify",
                    "--no-recurse-submodules",
                    "--no-follow-tags",
                    self.remote_url(source.owner, source.repo),
                    f"{sha}:refs/heads/{branch}",
                ],
                token=token,
                check=False,
            )
            _touch(git_dir)
        if code != 0:
            raise PushRefused(branch, _refusal_lines(stderr))
        log.info("branch pushed", extra={"repo": f"{source.owner}/{source.repo}", "branch": branch})
        return sha

    async def remote_branches(self, source: RepoSource, prefix: str) -> dict[str, str]:
        """The remote's branches under `refs/heads/<prefix>`, name -> commit, by `ls-remote`.

        One round trip that lists refs only (no objects); `prefix` must be a plain `bot/...`
        path, since it becomes a ref pattern.
        """
        if not re.fullmatch(r"bot/[A-Za-z0-9._/-]*", prefix) or ".." in prefix:
            raise CheckoutError(f"not a branch prefix the bot lists: {prefix!r}")
        git_dir = self.path_for(source.owner, source.repo)
        token = await source.token()
        _, stdout, _ = await self._git_output(
            git_dir if git_dir.is_dir() else None,
            ["ls-remote", "--heads", self.remote_url(source.owner, source.repo)],
            token=token,
        )
        found: dict[str, str] = {}
        for line in stdout.splitlines():
            sha, _, ref = line.partition("\t")
            name = ref.removeprefix("refs/heads/")
            if _SHA.fullmatch(sha) and ref.startswith("refs/heads/") and name.startswith(prefix):
                found[name] = sha
        return found

    async def sweep(self, now: float | None = None) -> list[Path]:
        """Delete mirrors unused for too long and stale worktrees; return what was removed."""
        now = time.time() if now is None else now
        removed: list[Path] = []
        if not self.root.is_dir():
            return removed
        for git_dir in sorted(self.root.glob("*/*.git")):
            async with self._locked(git_dir):
                marker = git_dir / LAST_USED
                used = marker.stat().st_mtime if marker.exists() else git_dir.stat().st_mtime
                if now - used > self.mirror_max_age_days * 86400:
                    await anyio.to_thread.run_sync(shutil.rmtree, git_dir)
                    removed.append(git_dir)
                    log.info("mirror swept", extra={"path": str(git_dir)})
                    continue
                removed.extend(await self._sweep_worktrees(git_dir, now))
        return removed

    async def sweep_forever(self, every_s: float = 6 * 3600) -> None:
        """`sweep()` now and every `every_s` seconds; start it in the worker's task group.

        A failed sweep is logged and tried again at the next interval, never raised.
        """
        while True:
            try:
                removed = await self.sweep()
            except Exception as exc:  # a broken mirror must not stop the worker
                log.warning("mirror sweep failed", extra={"error": str(exc)})
            else:
                if removed:
                    log.info("mirrors swept", extra={"removed": len(removed)})
            await anyio.sleep(every_s)

    # -- internals -------------------------------------------------------------------------

    async def _sweep_worktrees(self, git_dir: Path, now: float) -> list[Path]:
        removed: list[Path] = []
        base = git_dir / WORKTREES
        if base.is_dir():
            for path in sorted(p for p in base.glob("*/*") if p.is_dir()):
                if now - path.stat().st_mtime > self.worktree_max_age_days * 86400:
                    if gitguard.quarantined(path) is None:
                        await self._git(
                            git_dir, ["worktree", "remove", "--force", str(path)], check=False
                        )
                    # A quarantined worktree is deleted without git; `prune` drops its entry.
                    if path.exists():
                        await anyio.to_thread.run_sync(shutil.rmtree, path)
                    path.with_name(path.name + gitguard.QUARANTINE_SUFFIX).unlink(missing_ok=True)
                    gitguard.forget(path)
                    removed.append(path)
            for run_dir in base.iterdir():
                if run_dir.is_dir() and not any(run_dir.iterdir()):
                    run_dir.rmdir()
        await self._git(git_dir, ["worktree", "prune"], check=False)
        return removed

    async def _init(self, git_dir: Path, source: RepoSource) -> None:
        git_dir.parent.mkdir(parents=True, exist_ok=True)
        await self._git(None, ["init", "--bare", "--quiet", str(git_dir)])
        settings = [
            ("remote.origin.url", self.remote_url(source.owner, source.repo)),
            ("core.hooksPath", "/dev/null"),
            ("submodule.recurse", "false"),
            ("fetch.recurseSubmodules", "false"),
            ("protocol.file.allow", "never"),
            ("gc.auto", "0"),
        ]
        for key, value in settings:
            await self._git(git_dir, ["config", key, value])

    async def _has_commit(self, git_dir: Path, sha: str) -> bool:
        code, _ = await self._git(git_dir, ["cat-file", "-e", f"{sha}^{{commit}}"], check=False)
        return code == 0

    def _env(self, token: str | None) -> tuple[dict[str, str], list[tuple[str, str]]]:
        """The extras this git process gets on top of `bot.git.hostgit`'s clean environment:
        proxy settings, and config for the transport (https only, the token as a header)."""
        env = {name: os.environ[name] for name in _PROXY_VARIABLES if name in os.environ}
        config = [
            ("protocol.allow", "never"),
            ("protocol.https.allow", "always"),
            ("http.followRedirects", "false"),  # the header must never follow to another host
        ]
        if self.allow_http:
            config.append(("protocol.http.allow", "always"))
        if token is not None:
            basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
            config.append(("http.extraHeader", f"Authorization: Basic {basic}"))
        return env, config

    async def _git(
        self,
        git_dir: Path | None,
        args: Sequence[str],
        *,
        token: str | None = None,
        check: bool = True,
    ) -> tuple[int, str]:
        code, _, stderr = await self._git_output(git_dir, args, token=token, check=check)
        return code, stderr

    async def _git_output(
        self,
        git_dir: Path | None,
        args: Sequence[str],
        *,
        token: str | None = None,
        check: bool = True,
    ) -> tuple[int, str, str]:
        """Run git with the transport's settings; (exit code, stdout, stderr), token-free."""
        env, config = self._env(token)
        try:
            with anyio.fail_after(self.timeout_s):
                result = await hostgit.run_async(
                    args, git_dir=git_dir, extra_env=env, config=config
                )
        except TimeoutError:
            raise CheckoutError(f"git {args[0]} took longer than {self.timeout_s:.0f} s") from None
        stderr = result.stderr.decode("utf-8", errors="replace")
        stdout = result.stdout.decode("utf-8", errors="replace")
        if token:
            stderr = stderr.replace(token, "***")
        if check and result.returncode != 0:
            detail = stderr.strip().splitlines()[-1] if stderr.strip() else "no output"
            raise CheckoutError(f"git {args[0]} failed ({result.returncode}): {detail}")
        return result.returncode, stdout, stderr

    @asynccontextmanager
    async def _locked(self, git_dir: Path) -> AsyncIterator[None]:
        lock = self._locks.setdefault(str(git_dir), anyio.Lock())
        async with lock:
            git_dir.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(f"{git_dir}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                await anyio.to_thread.run_sync(fcntl.flock, fd, fcntl.LOCK_EX)
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)


def _touch(git_dir: Path) -> None:
    (git_dir / LAST_USED).touch()
