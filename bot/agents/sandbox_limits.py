"""Per-command limits of the sandbox, and how each is enforced on this machine.

Every limit is set on the sandbox's first process while bubblewrap holds it before it forks
(`--block-fd`): the launcher reads its pid (`--info-fd`), moves it into the command's cgroups
and lowers its rlimits with prlimit(2), then lets it go. No shell and no extra program run in
between, and everything the command starts inherits the limits.

- memory: a memory cgroup where the app can make one (bot/agents/sandbox_cgroups.py); it counts
  what the command holds in /tmp, shared memory and memfds too, and the kernel's OOM killer stops
  the command at the cap. Otherwise RLIMIT_AS (address space): allocations past it fail, but
  memory held in files (memfd, SysV shared memory) escapes it, and programs that reserve large
  address ranges up front (JVMs, some JIT runtimes) may refuse to start under it.
- processes: a pids cgroup. Otherwise RLIMIT_NPROC, which binds per user *and* user namespace:
  set on the sandbox's first process, inside the namespace bubblewrap made for it, it counts
  that sandbox's processes alone (checked with concurrent sandboxes). Root ignores RLIMIT_NPROC,
  so an app running as root without a writable pids cgroup counts the sandbox's processes every
  50 ms instead and kills the command above the cap: a fork bomb then runs for at most one
  interval, its processes die with the sandbox's PID namespace.
- file size: RLIMIT_FSIZE (SIGXFSZ, or EFBIG where the signal is ignored). No core dumps.
- CPU time: RLIMIT_CPU per process (SIGXCPU; SIGKILL 5 s later), under the wall-clock limit.
- /tmp and /dev/shm: tmpfs with a size; the sandbox's own root and /dev are read-only, so the
  worktree is the only other place it can write.
- the worktree: RLIMIT_FSIZE caps each file; what a command adds in all is watched while it runs.
  Every 50 ms the launcher reads the filesystem's used blocks and inodes (statvfs, one syscall);
  only when they rose by more than the cap since the command started does it walk the worktree,
  charging every entry created or changed since then (by ctime, which a process cannot set back)
  with its allocated size, at least 4 KiB. Past the cap the command is killed; the same check
  runs once after it ends. Growth elsewhere on the disk costs a walk, never a wrong kill.
"""

from __future__ import annotations

import contextlib
import os
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from bot.agents.sandbox_cgroups import CommandCgroups, usable_places

if TYPE_CHECKING:
    from bot.settings import Settings

MIB = 1 << 20
POLL_SECONDS = 0.05
ENTRY_MIN_BYTES = 4096
_CLOCK_REALTIME_COARSE = 5  # Linux; the clock the kernel stamps ctime from
_CPU_GRACE = 5


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """Per-command limits; 0 turns one off. `use_cgroups=False` keeps to rlimits."""

    memory_mb: int = 2048
    pids: int = 256
    file_mb: int = 256
    cpu_seconds: int = 120
    tmp_mb: int = 256
    grow_mb: int = 512
    use_cgroups: bool = True

    @classmethod
    def off(cls) -> SandboxLimits:
        return cls(0, 0, 0, 0, 0, 0, use_cgroups=False)

    @classmethod
    def from_settings(cls, settings: Settings) -> SandboxLimits:
        return cls(
            memory_mb=settings.sandbox_memory_mb,
            pids=settings.sandbox_pids,
            file_mb=settings.sandbox_file_mb,
            cpu_seconds=settings.sandbox_cpu_seconds,
            tmp_mb=settings.sandbox_tmp_mb,
            grow_mb=settings.sandbox_grow_mb,
        )

    @property
    def active(self) -> bool:
        """Whether a command needs confining at start (the /tmp size is a mount option)."""
        return any((self.memory_mb, self.pids, self.file_mb, self.cpu_seconds, self.grow_mb))


def _root() -> bool:
    return os.geteuid() == 0


def describe(limits: SandboxLimits) -> tuple[str, ...]:
    """What is enforced here and how, for `bot doctor`."""
    if not limits.active and not limits.tmp_mb:
        return ("no limits",)
    places = usable_places(limits.use_cgroups)
    out: list[str] = []
    if limits.memory_mb:
        how = "cgroup" if "memory" in places else "address space, RLIMIT_AS"
        out.append(f"memory {limits.memory_mb} MiB ({how})")
    else:
        out.append("memory unlimited")
    if limits.pids:
        if "pids" in places:
            how = "cgroup"
        elif _root():
            how = "counted every 50 ms: root ignores RLIMIT_NPROC and no pids cgroup is writable"
        else:
            how = "RLIMIT_NPROC in the sandbox's user namespace"
        out.append(f"{limits.pids} processes ({how})")
    else:
        out.append("processes unlimited")
    out.append(f"file size {limits.file_mb} MiB" if limits.file_mb else "file size unlimited")
    out.append(f"CPU {limits.cpu_seconds} s per process" if limits.cpu_seconds else "CPU unlimited")
    out.append(f"/tmp {limits.tmp_mb} MiB" if limits.tmp_mb else "/tmp unlimited")
    out.append(
        f"worktree growth {limits.grow_mb} MiB per command"
        if limits.grow_mb
        else "worktree growth unlimited"
    )
    return tuple(out)


class GrowthWatch:
    """How much a command adds to the worktree; cheap until the disk shows it might be a lot."""

    def __init__(self, tree: Path, cap_bytes: int) -> None:
        self.tree = tree
        self.cap = cap_bytes
        self.since = time.clock_gettime_ns(_CLOCK_REALTIME_COARSE)
        self.base = self._used()
        self.threshold = cap_bytes

    def _used(self) -> int:
        st = os.statvfs(self.tree)
        return (st.f_blocks - st.f_bfree) * st.f_frsize + (
            st.f_files - st.f_ffree
        ) * ENTRY_MIN_BYTES

    def due(self) -> bool:
        """The disk rose by more than the room left: time for a precise look."""
        try:
            return self._used() - self.base > self.threshold
        except OSError:  # the worktree is gone: nothing left to grow
            return False

    def measure(self) -> int:
        """Bytes charged to entries created or changed since the command started."""
        charged = 0
        seen: set[tuple[int, int]] = set()
        stack = [self.tree]
        while stack:
            with contextlib.suppress(OSError), os.scandir(stack.pop()) as entries:
                for entry in entries:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
                    if st.st_ctime_ns < self.since:
                        continue
                    if st.st_nlink > 1:
                        key = (st.st_dev, st.st_ino)
                        if key in seen:
                            continue
                        seen.add(key)
                    charged += max(st.st_blocks * 512, ENTRY_MIN_BYTES)
        return charged

    def check(self) -> int | None:
        """The bytes added when past the cap, else None (and the next look is put off)."""
        rise = self._used() - self.base
        charged = self.measure()
        if charged > self.cap:
            return charged
        self.threshold = rise + (self.cap - charged)
        return None


def count_processes(child_pid: int) -> int:
    """Processes in the sandbox's PID namespace, from its own /proc (0 once it is gone)."""
    try:
        with os.scandir(f"/proc/{child_pid}/root/proc") as entries:
            return sum(1 for entry in entries if entry.name.isdigit())
    except OSError:
        return 0


def apply_rlimits(pid: int, limits: SandboxLimits, *, memory: bool, nproc: bool) -> None:
    """Lower `pid`'s rlimits (never above a hard limit it already has)."""
    wanted: list[tuple[int, int, int]] = [(resource.RLIMIT_CORE, 0, 0)]
    if limits.file_mb:
        size = limits.file_mb * MIB
        wanted.append((resource.RLIMIT_FSIZE, size, size))
    if limits.cpu_seconds:
        wanted.append((resource.RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds + _CPU_GRACE))
    if memory:
        size = limits.memory_mb * MIB
        wanted.append((resource.RLIMIT_AS, size, size))
    if nproc:
        wanted.append((resource.RLIMIT_NPROC, limits.pids, limits.pids))
    for which, soft, hard in wanted:
        _, current = resource.prlimit(pid, which)
        if current != resource.RLIM_INFINITY:
            hard = min(hard, current)
            soft = min(soft, hard)
        resource.prlimit(pid, which, (soft, hard))


_MEMORY_WORDS = ("MemoryError", "Cannot allocate memory", "out of memory", "bad_alloc")
_FORK_WORDS = ("Resource temporarily unavailable", "Cannot fork", "fork: retry")


@dataclass(slots=True)
class Breaches:
    """What the command ran into, turned into lines the agent reads."""

    oom_kills: int = 0
    forks_refused: int = 0
    processes_killed: bool = False
    grew: int | None = None
    grew_while_running: bool = False
    notes: list[str] = field(default_factory=list)

    def render(self, limits: SandboxLimits, exit_code: int | None, output: str) -> str:
        lines: list[str] = []
        memory = f"{limits.memory_mb} MiB"
        if self.oom_kills:
            lines.append(
                f"[memory limit reached: the command was killed at {memory}; "
                f"a command may use at most {memory}]"
            )
        elif limits.memory_mb and exit_code and any(w in output for w in _MEMORY_WORDS):
            lines.append(f"[memory limit: a command may use at most {memory}]")
        procs = f"{limits.pids} processes"
        if self.processes_killed:
            lines.append(f"[process limit reached: the command was killed at more than {procs}]")
        elif self.forks_refused or (limits.pids and any(w in output for w in _FORK_WORDS)):
            lines.append(f"[process limit reached: a command may run at most {procs}]")
        if limits.file_mb and (
            exit_code == 153 or "File size limit exceeded" in output or "File too large" in output
        ):
            lines.append(f"[file size limit: no file may grow past {limits.file_mb} MiB]")
        if limits.cpu_seconds and (exit_code == 152 or "CPU time limit exceeded" in output):
            lines.append(
                f"[CPU time limit: each process may use {limits.cpu_seconds} s of CPU time]"
            )
        if limits.tmp_mb and "No space left on device" in output:
            lines.append(
                f"[/tmp and /dev/shm hold at most {limits.tmp_mb} MiB each; "
                "put large files in the worktree]"
            )
        if self.grew is not None:
            when = "so it was killed" if self.grew_while_running else "after it finished"
            lines.append(
                f"[the worktree grew by {self.grew / MIB:.1f} MiB, past the limit of "
                f"{limits.grow_mb} MiB per command, {when}; delete what it wrote (build output, "
                "downloads) before going on]"
            )
        lines.extend(self.notes)
        return "\n".join(lines)


class Confinement:
    """The limits of one command: cgroups made before it starts, rlimits set on its first
    process, the watch while it runs, and what it ran into."""

    def __init__(self, limits: SandboxLimits, worktree: Path) -> None:
        self.limits = limits
        places = usable_places(limits.use_cgroups)
        self.cgroups = CommandCgroups(places, memory_bytes=limits.memory_mb * MIB, pids=limits.pids)
        self.watch_pids = bool(limits.pids) and not self.cgroups.pids and _root()
        self.growth = GrowthWatch(worktree, limits.grow_mb * MIB) if limits.grow_mb else None
        self.breaches = Breaches()
        self.child: int | None = None

    def attach(self, child_pid: int) -> None:
        """Confine the sandbox's first process (held by bubblewrap, not yet forked)."""
        self.child = child_pid
        self.cgroups.attach(child_pid)
        apply_rlimits(
            child_pid,
            self.limits,
            memory=bool(self.limits.memory_mb) and not self.cgroups.memory,
            nproc=bool(self.limits.pids) and not self.cgroups.pids and not _root(),
        )

    def over_process_cap(self) -> bool:
        if not self.watch_pids or self.child is None:
            return False
        if count_processes(self.child) > self.limits.pids:
            self.breaches.processes_killed = True
            return True
        return False

    def growth_due(self) -> bool:
        return self.growth is not None and self.growth.due()

    def check_growth(self, *, running: bool) -> bool:
        """The precise look (blocking: call it in a thread). True when past the cap."""
        if self.growth is None:
            return False
        grew = self.growth.check()
        if grew is None:
            return False
        self.breaches.grew = grew
        self.breaches.grew_while_running = running
        return True

    async def close(self) -> None:
        self.breaches.oom_kills = self.cgroups.oom_kills()
        self.breaches.forks_refused = self.cgroups.forks_refused()
        await self.cgroups.close()
