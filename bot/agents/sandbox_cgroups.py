"""One cgroup per sandboxed command, for its memory and process caps, where the app may make one.

Where: cgroup v1 (a hierarchy per controller) gets the command's cgroup below the app's own;
cgroup v2 forbids controllers below a cgroup that holds processes, so there the command's
cgroup goes beside the app's (in its parent), and only when that parent already delegates
the controller (`cgroup.subtree_control`, as systemd's `Delegate=yes` gives). Nothing here
enables controllers or moves the app itself. Where no place is writable, the caller falls
back to rlimits (bot/agents/sandbox_limits.py).

A sandbox cannot leave its cgroup: the cgroup filesystem is not mounted inside and the
sandbox holds no capabilities. `close()` kills whatever is still inside and removes it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import signal
from pathlib import Path

import anyio

PREFIX = "bot-sandbox-"
CONTROLLERS = ("memory", "pids")
# controller -> (cgroup version, the directory new cgroups go into)
Places = dict[str, tuple[int, Path]]


def cgroup_places(cgroup_text: str, mountinfo_text: str) -> Places:
    """Where a command's cgroup would go, per controller, from /proc/self/cgroup and
    /proc/self/mountinfo. Pure: whether the place is writable is checked elsewhere."""
    own_v1: dict[str, str] = {}
    own_v2: str | None = None
    for line in cgroup_text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            own_v2 = parts[2]
        for name in parts[1].split(","):
            if name in CONTROLLERS:
                own_v1[name] = parts[2]
    v1_mounts: dict[str, tuple[str, str]] = {}
    v2_mount: tuple[str, str] | None = None
    for line in mountinfo_text.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        after = line.split(" - ", 1)[1].split()
        if len(after) < 3:
            continue
        root, point = fields[3], fields[4]
        if after[0] == "cgroup2" and v2_mount is None:
            v2_mount = (root, point)
        elif after[0] == "cgroup":
            for name in after[2].split(","):
                if name in CONTROLLERS:
                    v1_mounts.setdefault(name, (root, point))
    places: Places = {}
    for name in CONTROLLERS:
        if name in own_v1 and name in v1_mounts:
            path = _inside(v1_mounts[name], own_v1[name])
            if path is not None:
                places[name] = (1, path)
        elif own_v2 is not None and v2_mount is not None:
            own = _inside(v2_mount, own_v2)
            if own is not None:
                places[name] = (2, own if own_v2 == "/" else own.parent)
    return places


def _inside(mount: tuple[str, str], own: str) -> Path | None:
    """The directory of cgroup `own` under a mount of the hierarchy's subtree `root`."""
    root, point = mount
    if root == "/":
        rel = own
    elif own == root or own.startswith(root.rstrip("/") + "/"):
        rel = own[len(root) :]
    else:
        return None
    return Path(point) / rel.lstrip("/")


def usable_places(use: bool = True) -> Places:
    """The places this process can really make cgroups in (probed once per process)."""
    return _probe() if use else {}


@functools.cache
def _probe() -> Places:
    try:
        cgroup_text = Path("/proc/self/cgroup").read_text()
        mountinfo = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return {}
    found: Places = {}
    for name, (version, place) in cgroup_places(cgroup_text, mountinfo).items():
        if version == 2:
            try:
                delegated = (place / "cgroup.subtree_control").read_text().split()
            except OSError:
                continue
            if name not in delegated:
                continue
        probe = place / f"{PREFIX}probe-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            probe.mkdir()
        except OSError:
            continue
        try:
            limit = "pids.max" if name == "pids" else _memory_file(version)
            if (probe / limit).exists() and os.access(probe / "cgroup.procs", os.W_OK):
                found[name] = (version, place)
        finally:
            with contextlib.suppress(OSError):
                probe.rmdir()
    return found


def _memory_file(version: int) -> str:
    return "memory.limit_in_bytes" if version == 1 else "memory.max"


def leftover_cgroups() -> list[Path]:
    """Cgroups this process made and has not removed (there should be none between commands)."""
    out: list[Path] = []
    for _version, place in set(usable_places().values()):
        with contextlib.suppress(OSError):
            out.extend(sorted(place.glob(f"{PREFIX}{os.getpid()}-*")))
    return out


class CommandCgroups:
    """The cgroups of one command: made with their limits set, joined by the sandbox's first
    process before it forks anything, read for what they refused, then removed."""

    def __init__(self, places: Places, *, memory_bytes: int, pids: int) -> None:
        self.dirs: dict[str, tuple[int, Path]] = {}
        name = f"{PREFIX}{os.getpid()}-{secrets.token_hex(6)}"
        wanted = {"memory": memory_bytes, "pids": pids}
        try:
            for controller, (version, place) in places.items():
                if not wanted.get(controller):
                    continue
                path = place / name
                if not path.is_dir():
                    path.mkdir()
                self.dirs[controller] = (version, path)
                self._set_limit(controller, version, path, wanted[controller])
        except OSError:
            self._remove_now()
            raise

    @property
    def memory(self) -> bool:
        return "memory" in self.dirs

    @property
    def pids(self) -> bool:
        return "pids" in self.dirs

    @staticmethod
    def _set_limit(controller: str, version: int, path: Path, value: int) -> None:
        if controller == "pids":
            (path / "pids.max").write_text(str(value))
            return
        (path / _memory_file(version)).write_text(str(value))
        # No swapping around the cap where swap exists (absent files: nothing to do).
        swap = (
            ("memory.memsw.limit_in_bytes", str(value))
            if version == 1
            else ("memory.swap.max", "0")
        )
        with contextlib.suppress(OSError):
            (path / swap[0]).write_text(swap[1])

    def _paths(self) -> list[Path]:
        return sorted({path for _v, path in self.dirs.values()})

    def attach(self, pid: int) -> None:
        """Move `pid` (the sandbox's first process, not yet forked) into every cgroup."""
        for path in self._paths():
            (path / "cgroup.procs").write_text(str(pid))

    def oom_kills(self) -> int:
        if "memory" not in self.dirs:
            return 0
        version, path = self.dirs["memory"]
        source = "memory.oom_control" if version == 1 else "memory.events"
        return _counter(path / source, "oom_kill")

    def forks_refused(self) -> int:
        if "pids" not in self.dirs:
            return 0
        return _counter(self.dirs["pids"][1] / "pids.events", "max")

    async def close(self) -> None:
        """Kill what is left inside, then remove the cgroups (they empty within milliseconds
        once the sandbox's PID namespace is gone)."""
        for path in self._paths():
            for _attempt in range(400):
                _kill_members(path)
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    await anyio.sleep(0.005)

    def _remove_now(self) -> None:
        for path in self._paths():
            with contextlib.suppress(OSError):
                path.rmdir()


def _counter(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        return 0
    return 0


def _kill_members(path: Path) -> None:
    try:
        members = (path / "cgroup.procs").read_text().split()
    except OSError:
        return
    for member in members:
        with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
            os.kill(int(member), signal.SIGKILL)
