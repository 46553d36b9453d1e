"""Every git command the app runs on the host is built here, so that no repository can steer it.

    proc = run_sync(["status", "--porcelain"], cwd=worktree)                # engine threads
    out = await run_async(["grep", "-e", "x", sha], git_dir=mirror)          # agent tools
    process = await open_async(["cat-file", "--batch"], git_dir=mirror)      # long-lived reader

What every command gets:
- A clean environment (`host_env`): PATH, a HOME that does not exist, no system or global
  config, C.UTF-8 messages, no prompts or pager, the commit identity, and only the extras the
  caller passes (checkout's proxy settings). Nothing else of the app's environment reaches git:
  no `BOT_*` secret, no API key, no `GIT_DIR` or `GIT_CONFIG_PARAMETERS`.
- Hardened config, passed as `GIT_CONFIG_COUNT`/`KEY`/`VALUE` (command-line scope, so it wins
  over any repository file, and a key is never parsed out of a `-c` argument): no hooks, no
  fsmonitor, no untracked cache, no submodule recursion (`diff.ignoreSubmodules=all`), no
  `file://` transport, no signing, no automatic gc or maintenance, no credential helper.
- No filter or diff drivers. git has no switch that turns attributes' drivers off, so before a
  command that could run one, the driver names the repository's config defines are read with
  `git config --get-regexp` (which runs nothing) and each is overridden: a filter's clean,
  smudge and process commands become empty (git then stores and checks out the bytes as they
  are), a diff driver's textconv becomes `cat` and its external command `false`. `diff`,
  `show`, `log` and `grep` also get `--no-ext-diff`/`--no-textconv`, and `diff` and `status`
  `--ignore-submodules=all`.
- When the command's directory is inside a writing agent's worktree, `bot.git.gitguard.check`
  first verifies that the worktree's `.git` file is the one the engine made (else the worktree
  is quarantined and WorktreeQuarantined is raised), and git stops looking for a repository
  above the worktree.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import Process

from bot.git import gitguard

_DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"

SAFE_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.untrackedCache", "false"),
    ("diff.ignoreSubmodules", "all"),
    ("submodule.recurse", "false"),
    ("fetch.recurseSubmodules", "false"),
    ("push.recurseSubmodules", "no"),
    ("status.submoduleSummary", "false"),
    ("protocol.file.allow", "never"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("credential.helper", ""),
)
"""Config every host git command runs with, whatever the repository says."""

# Commands that touch only objects, refs and config: they never run a filter or diff driver,
# so they skip the extra `git config` read.
_NO_DRIVERS = frozenset(
    {
        "cat-file",
        "config",
        "fetch",
        "for-each-ref",
        "init",
        "ls-tree",
        "merge-base",
        "push",
        "rev-list",
        "rev-parse",
        "symbolic-ref",
        "update-ref",
    }
)
_NO_DRIVER_FLAGS = ("--no-ext-diff", "--no-textconv")
_SUBCOMMAND_FLAGS: dict[str, tuple[str, ...]] = {
    "diff": (*_NO_DRIVER_FLAGS, "--ignore-submodules=all"),
    "show": _NO_DRIVER_FLAGS,
    "log": _NO_DRIVER_FLAGS,
    "grep": ("--no-textconv",),
    "status": ("--ignore-submodules=all",),
}
_DRIVER_KEYS = r"^(filter|diff|merge)\."


def identity() -> dict[str, str]:
    """The author and committer of commits the app makes (BOT_GIT_NAME, BOT_GIT_EMAIL)."""
    name = os.environ.get("BOT_GIT_NAME", "bot")
    email = os.environ.get("BOT_GIT_EMAIL", "bot@localhost")
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }


def host_env(
    extra: Mapping[str, str] | None = None, config: Sequence[tuple[str, str]] = ()
) -> dict[str, str]:
    """The whole environment of a host git process: clean, with `config` after SAFE_CONFIG
    as command-line-scope settings, and `extra` variables on top."""
    env = {
        "PATH": os.environ.get("PATH", _DEFAULT_PATH),
        "HOME": "/nonexistent",
        "XDG_CONFIG_HOME": "/nonexistent",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "/bin/false",
        "GIT_PAGER": "cat",
        "PAGER": "cat",
        "LC_ALL": "C.UTF-8",
        **identity(),
        **(extra or {}),
    }
    # The caller's settings first, so that the safe ones (later, so they win) cannot be undone.
    pairs = [*config, *SAFE_CONFIG]
    env["GIT_CONFIG_COUNT"] = str(len(pairs))
    for i, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def subcommand(args: Sequence[str]) -> str | None:
    """The git command in `args` (the first word that is not an option)."""
    return next((a for a in args if not a.startswith("-")), None)


def harden_args(args: Sequence[str]) -> list[str]:
    """`args` with the driver and submodule switches its command needs, right after it."""
    out = list(args)
    name = subcommand(out)
    flags = _SUBCOMMAND_FLAGS.get(name or "")
    if name is None or not flags:
        return out
    at = out.index(name) + 1
    return [*out[:at], *flags, *out[at:]]


def driver_overrides(listing: bytes) -> list[tuple[str, str]]:
    """Settings that disarm every filter, diff and merge driver named in `listing` (the
    output of `git config -z --get-regexp`)."""
    filters: set[str] = set()
    diffs: set[str] = set()
    merges: set[str] = set()
    for record in listing.split(b"\0"):
        key = record.partition(b"\n")[0].decode("utf-8", "surrogateescape")
        section, _, rest = key.partition(".")
        name, dot, _ = rest.rpartition(".")
        if not dot or not name:
            continue  # `diff.external` and the like: no subsection, no driver
        {"filter": filters, "diff": diffs, "merge": merges}.get(section.lower(), set()).add(name)
    pairs: list[tuple[str, str]] = []
    for name in sorted(filters):
        pairs += [(f"filter.{name}.{k}", "") for k in ("clean", "smudge", "process")]
        pairs.append((f"filter.{name}.required", "false"))
    for name in sorted(diffs):
        pairs += [(f"diff.{name}.textconv", "cat"), (f"diff.{name}.cachetextconv", "false")]
        pairs.append((f"diff.{name}.command", "false"))
    for name in sorted(merges):
        pairs.append((f"merge.{name}.driver", "false"))
    return pairs


@dataclass(frozen=True, slots=True)
class Prepared:
    """A command ready to run: its argv, its environment."""

    argv: list[str]
    env: dict[str, str]


def _base_argv(cwd: Path | None, git_dir: Path | None) -> list[str]:
    argv = ["git", "--no-pager"]
    if cwd is not None:
        argv += ["-C", str(cwd)]
    if git_dir is not None:
        argv += ["--git-dir", str(git_dir)]
    return argv


def _guarded_extra(cwd: Path | None, extra: Mapping[str, str] | None) -> dict[str, str]:
    """Check the worktree `cwd` is in (raises WorktreeQuarantined); keep git inside it."""
    env = dict(extra or {})
    if cwd is not None:
        worktree = gitguard.guard(cwd)
        if worktree is not None:
            env["GIT_CEILING_DIRECTORIES"] = str(worktree.parent)
    return env


def _listing_command(cwd: Path | None, git_dir: Path | None, env: dict[str, str]) -> Prepared:
    argv = [*_base_argv(cwd, git_dir), "config", "-z", "--get-regexp", _DRIVER_KEYS]
    return Prepared(argv, env)


def _finish(
    args: Sequence[str],
    cwd: Path | None,
    git_dir: Path | None,
    extra: dict[str, str],
    config: Sequence[tuple[str, str]],
    listing: bytes,
) -> Prepared:
    pairs = [*config, *driver_overrides(listing)]
    return Prepared([*_base_argv(cwd, git_dir), *harden_args(args)], host_env(extra, pairs))


def prepare_sync(
    args: Sequence[str],
    *,
    cwd: Path | None = None,
    git_dir: Path | None = None,
    extra_env: Mapping[str, str] | None = None,
    config: Sequence[tuple[str, str]] = (),
) -> Prepared:
    """The argv and environment for one host git command (blocking: may run `git config`)."""
    extra = _guarded_extra(cwd, extra_env)
    listing = b""
    if subcommand(args) not in _NO_DRIVERS:
        probe = _listing_command(cwd, git_dir, host_env(extra, config))
        listing = subprocess.run(probe.argv, env=probe.env, capture_output=True, check=False).stdout
    return _finish(args, cwd, git_dir, extra, config, listing)


async def prepare_async(
    args: Sequence[str],
    *,
    cwd: Path | None = None,
    git_dir: Path | None = None,
    extra_env: Mapping[str, str] | None = None,
    config: Sequence[tuple[str, str]] = (),
) -> Prepared:
    """`prepare_sync` for the event loop."""
    extra = _guarded_extra(cwd, extra_env)
    listing = b""
    if subcommand(args) not in _NO_DRIVERS:
        probe = _listing_command(cwd, git_dir, host_env(extra, config))
        done = await anyio.run_process(probe.argv, env=probe.env, check=False)
        listing = done.stdout
    return _finish(args, cwd, git_dir, extra, config, listing)


def run_sync(
    args: Sequence[str],
    *,
    cwd: Path | None = None,
    git_dir: Path | None = None,
    stdin: bytes | None = None,
    extra_env: Mapping[str, str] | None = None,
    config: Sequence[tuple[str, str]] = (),
) -> subprocess.CompletedProcess[bytes]:
    """Run one host git command and collect its output (never raises for git's exit status)."""
    cmd = prepare_sync(args, cwd=cwd, git_dir=git_dir, extra_env=extra_env, config=config)
    return subprocess.run(cmd.argv, input=stdin, capture_output=True, env=cmd.env, check=False)


async def run_async(
    args: Sequence[str],
    *,
    cwd: Path | None = None,
    git_dir: Path | None = None,
    stdin: bytes | None = None,
    extra_env: Mapping[str, str] | None = None,
    config: Sequence[tuple[str, str]] = (),
) -> subprocess.CompletedProcess[bytes]:
    """`run_sync` for the event loop."""
    cmd = await prepare_async(args, cwd=cwd, git_dir=git_dir, extra_env=extra_env, config=config)
    return await anyio.run_process(cmd.argv, input=stdin, env=cmd.env, check=False)


async def open_async(
    args: Sequence[str], *, git_dir: Path | None = None, cwd: Path | None = None
) -> Process:
    """Start a long-lived host git process with piped stdin and stdout (stderr discarded)."""
    cmd = await prepare_async(args, cwd=cwd, git_dir=git_dir)
    return await anyio.open_process(
        cmd.argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=cmd.env,
    )
