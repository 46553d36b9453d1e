"""Run an agent's shell command in a bubblewrap sandbox: no network, no secrets, one writable tree."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream

SANDBOX_ROOT = "/workspace"
DEFAULT_TIMEOUT = 180.0
OUTPUT_CAP = 64 * 1024
_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Only what ordinary programs need from /etc; no certificates, since there is no network.
_ETC_FILES = ("/etc/ld.so.cache", "/etc/alternatives", "/etc/localtime", "/etc/nsswitch.conf")


@dataclass(frozen=True, slots=True)
class SandboxStatus:
    """Whether commands can run sandboxed here; `reason` says why not (and how to fix it)."""

    ok: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class CommandResult:
    exit_code: int | None
    output: str
    truncated: bool = False
    timed_out: bool = False
    total_bytes: int = 0
    cap: int = OUTPUT_CAP

    def render(self) -> str:
        """The result as the text an agent sees."""
        parts = [self.output.rstrip("\n")] if self.output else []
        if self.truncated:
            parts.append(
                f"[output truncated: showing the first {self.cap} of {self.total_bytes} bytes]"
            )
        if self.timed_out:
            parts.append("[command killed: it ran past its time limit]")
        else:
            parts.append(f"[exit code {self.exit_code}]")
        return "\n".join(parts)


def bwrap_path() -> str | None:
    return shutil.which("bwrap") or ("/usr/bin/bwrap" if Path("/usr/bin/bwrap").exists() else None)


_IDENTITY: dict[int, Path] = {}


def _identity_dir() -> Path:
    """A private directory (made once per process, random name) with passwd/group files
    naming the sandbox's one user: the caller's own uid and gid."""
    uid, gid = os.getuid(), os.getgid()
    root = _IDENTITY.get(uid)
    if root is None or not root.is_dir():
        root = Path(tempfile.mkdtemp(prefix="bot-sandbox-etc-"))
        root.chmod(0o755)
        name = "root" if uid == 0 else "agent"
        (root / "passwd").write_text(f"{name}:x:{uid}:{gid}:sandbox:/tmp:/bin/sh\n")
        (root / "group").write_text(f"{name}:x:{gid}:\n")
        _IDENTITY[uid] = root
        atexit.register(shutil.rmtree, root, True)
    return root


def bwrap_command(
    bwrap: str, worktree: Path, argv: list[str], *, extra_env: dict[str, str] | None = None
) -> list[str]:
    """The full bwrap command line that runs `argv` with `worktree` at /workspace."""
    cmd = [
        bwrap,
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--clearenv",
        "--setenv",
        "PATH",
        _PATH,
        "--setenv",
        "HOME",
        "/tmp",
        "--setenv",
        "LANG",
        "C.UTF-8",
    ]
    for key, value in (extra_env or {}).items():
        cmd += ["--setenv", key, value]
    for path in _SYSTEM_DIRS:
        p = Path(path)
        if p.is_symlink():
            cmd += ["--symlink", os.readlink(p), path]
        elif p.is_dir():
            cmd += ["--ro-bind", path, path]
    for path in _ETC_FILES:
        if Path(path).exists():
            cmd += ["--ro-bind", path, path]
    ident = _identity_dir()
    cmd += ["--ro-bind", str(ident / "passwd"), "/etc/passwd"]
    cmd += ["--ro-bind", str(ident / "group"), "/etc/group"]
    cmd += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    cmd += ["--bind", str(worktree), SANDBOX_ROOT]
    dotgit = worktree / ".git"
    if dotgit.exists() and not dotgit.is_symlink():
        # Git runs on the host in this tree after the command (commit, handoff, push): a
        # rewritten `.git` could point it at another repository or at hostile config.
        cmd += ["--ro-bind", str(dotgit), f"{SANDBOX_ROOT}/.git"]
    cmd += ["--chdir", SANDBOX_ROOT]
    return [*cmd, "--", *argv]


def probe_sandbox(timeout: float = 10.0) -> SandboxStatus:
    """Actually run `true` in the sandbox; where it fails, say why and how to fix it."""
    bwrap = bwrap_path()
    if bwrap is None:
        return SandboxStatus(
            False,
            "bubblewrap (bwrap) is not installed; install it (e.g. `apt-get install bubblewrap`)",
        )
    with tempfile.TemporaryDirectory(prefix="bot-probe-") as tmp:
        try:
            done = subprocess.run(
                bwrap_command(bwrap, Path(tmp), ["true"]),
                capture_output=True,
                timeout=timeout,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return SandboxStatus(False, f"bwrap could not start: {exc}")
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip()[:300]
        return SandboxStatus(
            False,
            f"bwrap failed ({detail or f'exit {done.returncode}'}); unprivileged user namespaces "
            "may be disabled (sysctl kernel.unprivileged_userns_clone=1, or "
            "kernel.apparmor_restrict_unprivileged_userns=0), or the container lacks the rights",
        )
    return SandboxStatus(True)


async def _drain(stream: ByteReceiveStream, sink: bytearray, cap: int, counter: list[int]) -> None:
    async for data in stream:
        counter[0] += len(data)
        room = cap - len(sink)
        if room > 0:
            sink.extend(data[:room])


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def run_sandboxed(
    worktree: Path,
    command: str,
    *,
    time_limit: float = DEFAULT_TIMEOUT,
    output_cap: int = OUTPUT_CAP,
) -> CommandResult:
    """Run `command` with /bin/sh -c inside the sandbox; kill the whole tree past `time_limit`.

    bwrap runs in its own process group; killing it takes down the sandbox's PID namespace
    (its init dies with its parent, and every process in the namespace with the init).
    """
    bwrap = bwrap_path()
    if bwrap is None:
        raise RuntimeError("bubblewrap is not installed")
    argv = bwrap_command(bwrap, worktree, ["/bin/sh", "-c", command])
    sink = bytearray()
    counter = [0]
    timed_out = False
    process = await anyio.open_process(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={"PATH": _PATH},
    )
    try:
        assert process.stdout is not None
        with anyio.move_on_after(time_limit) as scope:
            await _drain(process.stdout, sink, output_cap, counter)
            await process.wait()
        if scope.cancelled_caught:
            timed_out = True
    finally:
        if process.returncode is None:
            _kill_group(process.pid)
            with anyio.CancelScope(shield=True):
                await process.wait()
        with anyio.CancelScope(shield=True):
            await process.aclose()
    return CommandResult(
        exit_code=None if timed_out else process.returncode,
        output=sink.decode("utf-8", "replace"),
        truncated=counter[0] > output_cap,
        timed_out=timed_out,
        total_bytes=counter[0],
        cap=output_cap,
    )
