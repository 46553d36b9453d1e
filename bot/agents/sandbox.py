"""Run an agent's shell command in a bubblewrap sandbox: no network, no secrets, one writable tree."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream, Process

from bot.agents.sandbox_limits import MIB, POLL_SECONDS, Confinement, SandboxLimits, describe

SANDBOX_ROOT = "/workspace"
DEFAULT_TIMEOUT = 180.0
OUTPUT_CAP = 64 * 1024
_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Only what ordinary programs need from /etc; no certificates, since there is no network.
_ETC_FILES = ("/etc/ld.so.cache", "/etc/alternatives", "/etc/localtime", "/etc/nsswitch.conf")
DEFAULT_LIMITS = SandboxLimits()


@dataclass(frozen=True, slots=True)
class SandboxStatus:
    """Whether commands can run sandboxed here; `reason` says why not (and how to fix it)."""

    ok: bool
    reason: str = ""
    limits: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CommandResult:
    exit_code: int | None
    output: str
    truncated: bool = False
    timed_out: bool = False
    total_bytes: int = 0
    cap: int = OUTPUT_CAP
    limit: str = ""

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
        if self.limit:
            parts.append(self.limit)
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
    bwrap: str,
    worktree: Path,
    argv: list[str],
    *,
    extra_env: dict[str, str] | None = None,
    limits: SandboxLimits = DEFAULT_LIMITS,
    hold_fds: tuple[int, int] | None = None,
) -> list[str]:
    """The full bwrap command line that runs `argv` with `worktree` at /workspace.

    `hold_fds` (info, block): bwrap writes the sandbox's first pid to the first and holds
    that process, before it forks anything, until a byte arrives on the second.
    """
    tmp_size = ["--size", str(limits.tmp_mb * MIB)] if limits.tmp_mb else []
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
    # /tmp and /dev/shm are memory: sized. The root and /dev would be too, so they are
    # read-only; the worktree is the one other place a command writes.
    cmd += ["--proc", "/proc", "--dev", "/dev", *tmp_size, "--tmpfs", "/dev/shm"]
    cmd += ["--remount-ro", "/dev", *tmp_size, "--tmpfs", "/tmp"]
    cmd += ["--bind", str(worktree), SANDBOX_ROOT]
    dotgit = worktree / ".git"
    if dotgit.exists() and not dotgit.is_symlink():
        # Git runs on the host in this tree after the command (commit, handoff, push): a
        # rewritten `.git` could point it at another repository or at hostile config.
        cmd += ["--ro-bind", str(dotgit), f"{SANDBOX_ROOT}/.git"]
    cmd += ["--remount-ro", "/", "--chdir", SANDBOX_ROOT]
    if hold_fds is not None:
        cmd += ["--info-fd", str(hold_fds[0]), "--block-fd", str(hold_fds[1])]
    return [*cmd, "--", *argv]


def probe_sandbox(
    timeout: float = 10.0, *, limits: SandboxLimits = DEFAULT_LIMITS
) -> SandboxStatus:
    """Actually run `true` in the sandbox (with its mounts as `limits` set them); where it
    fails, say why and how to fix it; where it works, which limits hold and how."""
    bwrap = bwrap_path()
    if bwrap is None:
        return SandboxStatus(
            False,
            "bubblewrap (bwrap) is not installed; install it (e.g. `apt-get install bubblewrap`)",
        )
    with tempfile.TemporaryDirectory(prefix="bot-probe-") as tmp:
        try:
            done = subprocess.run(
                bwrap_command(bwrap, Path(tmp), ["true"], limits=limits),
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
            "kernel.apparmor_restrict_unprivileged_userns=0), or the container lacks the rights "
            "(bubblewrap 0.5 or later is needed for sized tmpfs mounts)",
        )
    return SandboxStatus(True, limits=describe(limits))


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
    limits: SandboxLimits = DEFAULT_LIMITS,
) -> CommandResult:
    """Run `command` with /bin/sh -c inside the sandbox, under `limits`; kill the whole tree
    past `time_limit` or when the launcher's watch sees a limit broken.

    bwrap runs in its own process group; killing it takes down the sandbox's PID namespace
    (its init dies with its parent, and every process in the namespace with the init).
    """
    bwrap = bwrap_path()
    if bwrap is None:
        raise RuntimeError("bubblewrap is not installed")
    confinement = Confinement(limits, worktree) if limits.active else None
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    hold = (info_w, block_r) if confinement is not None else None
    argv = bwrap_command(bwrap, worktree, ["/bin/sh", "-c", command], limits=limits, hold_fds=hold)
    sink = bytearray()
    counter = [0]
    timed_out = False
    failure = ""
    try:
        process = await anyio.open_process(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={"PATH": _PATH},
            pass_fds=hold or (),
        )
    except BaseException:
        for fd in (info_r, block_w):
            os.close(fd)
        if confinement is not None:
            with anyio.CancelScope(shield=True):
                await confinement.close()
        raise
    finally:
        os.close(info_w)
        os.close(block_r)
    try:
        assert process.stdout is not None
        with anyio.move_on_after(time_limit) as scope:
            if confinement is not None:
                failure = await _confine(confinement, info_r, block_w, process.pid)
            else:
                os.close(block_w)
            block_w = -1
            if failure:
                _kill_group(process.pid)
            async with anyio.create_task_group() as tasks:
                if confinement is not None and not failure:
                    tasks.start_soon(_watch, confinement, process)
                await _drain(process.stdout, sink, output_cap, counter)
                await process.wait()
                tasks.cancel_scope.cancel()
        if scope.cancelled_caught:
            timed_out = True
    finally:
        os.close(info_r)
        if block_w != -1:
            os.close(block_w)
        if process.returncode is None:
            _kill_group(process.pid)
            with anyio.CancelScope(shield=True):
                await process.wait()
        with anyio.CancelScope(shield=True):
            await process.aclose()
            if confinement is not None:
                if not failure and confinement.breaches.grew is None:
                    await anyio.to_thread.run_sync(_final_growth_check, confinement)
                await confinement.close()
    output = sink.decode("utf-8", "replace")
    exit_code = None if timed_out else process.returncode
    limit = failure
    if confinement is not None and not failure:
        limit = confinement.breaches.render(limits, exit_code, output)
    return CommandResult(
        exit_code=exit_code,
        output=output,
        truncated=counter[0] > output_cap,
        timed_out=timed_out,
        total_bytes=counter[0],
        cap=output_cap,
        limit=limit,
    )


async def _confine(confinement: Confinement, info_r: int, block_w: int, outer: int) -> str:
    """Read the held process's pid, confine it, let it go. Returns why it could not be
    confined ("" when it was); the command must then not run."""
    info = bytearray()
    while True:
        await anyio.wait_readable(info_r)
        chunk = os.read(info_r, 4096)
        if not chunk:
            break
        info.extend(chunk)
    try:
        child = int(json.loads(info)["child-pid"]) if info else None
    except (ValueError, KeyError, TypeError):
        child = None
    try:
        if child is not None:  # otherwise bwrap failed early, and says why in its output
            # Off the event loop: joining a cgroup waits for the kernel (about 8 ms with v1).
            await anyio.to_thread.run_sync(confinement.attach, child)
    except OSError as exc:
        os.close(block_w)
        return f"[the sandbox could not apply its limits ({exc}); the command did not run]"
    with contextlib.suppress(BrokenPipeError):
        os.write(block_w, b"1")
    os.close(block_w)
    return ""


async def _watch(confinement: Confinement, process: Process) -> None:
    """Poll what the limits need watched; kill the sandbox when one is broken."""
    while process.returncode is None:
        await anyio.sleep(POLL_SECONDS)
        broken = confinement.over_process_cap()
        if not broken and confinement.growth_due():
            broken = await anyio.to_thread.run_sync(lambda: confinement.check_growth(running=True))
        if broken:
            _kill_group(process.pid)
            return


def _final_growth_check(confinement: Confinement) -> None:
    if confinement.growth_due():
        confinement.check_growth(running=False)
