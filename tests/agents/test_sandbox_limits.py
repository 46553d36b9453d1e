"""The sandbox's per-command limits: memory, processes, file size, CPU, /tmp, worktree growth.

Every bomb here is bounded even when the defence under test fails (a fixed number of forks,
a fixed amount of data, a wall-clock limit), so a regression cannot hurt the machine that
runs the tests. Each test runs twice: with the best mechanism this machine offers (cgroups
where writable) and with rlimits only, the path of an app that cannot create cgroups.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from bot.agents.runtime import AgentRuntime, build_runner
from bot.agents.sandbox import CommandResult, SandboxStatus, probe_sandbox, run_sandboxed
from bot.agents.sandbox_cgroups import cgroup_places, leftover_cgroups
from bot.agents.sandbox_limits import SandboxLimits
from bot.agents.tools import Toolbox
from bot.agents.types import IMPLEMENTER
from bot.engine.types import Workspace
from bot.engine.worktree import create_worktree
from bot.ops import doctor
from bot.settings import load_settings
from tests.agents.unprivileged import reachable_tmp

# CPU time is generous (a loaded machine must not trip it); its own test lowers it.
SMALL = SandboxLimits(memory_mb=64, pids=16, file_mb=4, cpu_seconds=30, tmp_mb=8, grow_mb=8)
MECHANISMS = [
    pytest.param(SMALL, id="best"),
    pytest.param(replace(SMALL, use_cgroups=False), id="rlimits"),
]
PROJECT = Path(__file__).resolve().parents[2]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "worktree"
    root.mkdir()
    (root / "hello.txt").write_text("hi\n")
    return root


async def host_still_fine(tree: Path, limits: SandboxLimits) -> None:
    """After a bomb: the next command runs normally, and no cgroup of ours is left."""
    after = await run_sandboxed(tree, "cat hello.txt; echo fine", limits=limits, time_limit=30)
    assert after.exit_code == 0 and "hi\nfine" in after.output, after.render()
    assert leftover_cgroups() == []


def remove_parts(tree: Path) -> None:
    for part in tree.glob("part*.bin"):
        part.unlink()


def leftovers(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.anyio
@pytest.mark.parametrize("limits", MECHANISMS)
async def test_a_memory_bomb_fails_inside_the_sandbox(tree: Path, limits: SandboxLimits) -> None:
    with anyio.fail_after(60):
        result = await run_sandboxed(
            tree,
            "python3 -c 'x = bytearray(512 << 20); print(\"allocated\", len(x))'",
            limits=limits,
            time_limit=40,
        )
    assert "allocated" not in result.output
    assert result.exit_code != 0 and not result.timed_out
    assert "memory limit" in result.render() and "64 MiB" in result.render()
    await host_still_fine(tree, limits)


FORK_BOMB = """
import os, time
n = 0
for _ in range(200):
    try:
        pid = os.fork()
    except OSError as exc:
        print("fork failed:", exc, flush=True)
        break
    if pid == 0:
        time.sleep(60)  # bomb-marker-7731
        os._exit(0)
    n += 1
    time.sleep(0.01)
print("forked", n, flush=True)
time.sleep(1)
"""


@pytest.mark.anyio
@pytest.mark.parametrize("limits", MECHANISMS)
async def test_a_fork_bomb_is_capped_and_leaves_nothing_behind(
    tree: Path, limits: SandboxLimits
) -> None:
    (tree / "bomb.py").write_text(FORK_BOMB)
    with anyio.fail_after(60):
        result = await run_sandboxed(tree, "python3 bomb.py", limits=limits, time_limit=40)
    assert "forked 200" not in result.output, result.render()
    assert not result.timed_out
    assert "process limit" in result.render() and "16 processes" in result.render()
    with anyio.fail_after(10):
        while leftovers("bomb-marker-7731"):  # noqa: ASYNC110 - polling /proc, no event
            await anyio.sleep(0.05)
    await host_still_fine(tree, limits)


UNPRIVILEGED = """
import ctypes
import sys
from pathlib import Path
import anyio
from bot.agents.sandbox import run_sandboxed
from bot.agents.sandbox_limits import SandboxLimits

# Programs this process starts (bwrap, the command) get none of its capabilities:
# PR_CAP_AMBIENT (47), PR_CAP_AMBIENT_CLEAR_ALL (4).
if ctypes.CDLL(None, use_errno=True).prctl(47, 4, 0, 0, 0) != 0:
    raise OSError(ctypes.get_errno(), "prctl(PR_CAP_AMBIENT_CLEAR_ALL)")

async def main() -> None:
    limits = SandboxLimits(pids=16, use_cgroups=False)
    result = await run_sandboxed(Path(sys.argv[1]), "python3 bomb.py", limits=limits, time_limit=40)
    print(result.render())

anyio.run(main)
"""


def test_a_fork_bomb_is_capped_for_an_unprivileged_app_without_cgroups() -> None:
    """RLIMIT_NPROC binds only non-root users: set on the sandbox's first process, inside its
    own user namespace, it counts the sandbox's processes alone."""
    with tempfile.TemporaryDirectory(prefix="bot-unpriv-", dir=reachable_tmp()) as tmp:
        tree = Path(tmp)
        (tree / "bomb.py").write_text(FORK_BOMB)
        argv = [sys.executable, "-c", UNPRIVILEGED, str(tree)]
        if os.getuid() == 0:
            # The tests run as root here; drop to `nobody` for the unprivileged path. The
            # checkout, its .venv and the interpreter may lie in private directories (a home,
            # `mktemp -d`), so `nobody` keeps CAP_DAC_READ_SEARCH to read them, ambient so it
            # survives the exec; the child clears its ambient set before starting anything, so
            # bwrap and the fork bomb run with no capability at all. RLIMIT_NPROC exempts only
            # CAP_SYS_RESOURCE and CAP_SYS_ADMIN, so the limit binds as it would for any user.
            setpriv = shutil.which("setpriv")
            assert setpriv is not None
            tree.chmod(0o777)
            keep = "+dac_read_search"
            argv = [
                setpriv,
                *("--reuid", "65534", "--regid", "65534", "--clear-groups"),
                *(f"--inh-caps={keep}", f"--ambient-caps={keep}"),
                *argv,
            ]
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(PROJECT), "HOME": tmp}
        done = subprocess.run(argv, capture_output=True, timeout=90, check=False, env=env)
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert "forked" in out and "forked 200" not in out, out
    assert "process limit" in out


@pytest.mark.anyio
@pytest.mark.parametrize("limits", MECHANISMS)
async def test_a_file_past_the_size_limit_fails(tree: Path, limits: SandboxLimits) -> None:
    result = await run_sandboxed(
        tree, "head -c 20000000 /dev/zero > big.bin; echo rc=$?", limits=limits, time_limit=30
    )
    assert "rc=153" in result.output  # killed by SIGXFSZ
    assert (tree / "big.bin").stat().st_size <= 4 << 20
    assert "file size limit" in result.render() and "4 MiB" in result.render()
    (tree / "big.bin").unlink()
    await host_still_fine(tree, limits)


@pytest.mark.anyio
@pytest.mark.parametrize("limits", MECHANISMS)
async def test_a_busy_loop_is_stopped_by_the_cpu_limit(tree: Path, limits: SandboxLimits) -> None:
    with anyio.fail_after(60):
        result = await run_sandboxed(
            tree, "while :; do :; done", limits=replace(limits, cpu_seconds=1), time_limit=40
        )
    assert not result.timed_out and result.exit_code == 152  # SIGXCPU
    assert "CPU time limit" in result.render() and "1 s" in result.render()
    await host_still_fine(tree, limits)


@pytest.mark.anyio
@pytest.mark.parametrize("limits", MECHANISMS)
async def test_tmp_and_shared_memory_are_small_and_the_rest_read_only(
    tree: Path, limits: SandboxLimits
) -> None:
    result = await run_sandboxed(
        tree,
        "for d in /tmp /dev/shm; do"
        " for i in 1 2 3 4; do head -c 3000000 /dev/zero > $d/f$i || echo full:$d; done;"
        " done; touch /rootfile || echo ro:/; touch /dev/made || echo ro:/dev",
        limits=limits,
        time_limit=30,
    )
    out = result.output
    assert "full:/tmp" in out and "full:/dev/shm" in out, out
    assert "ro:/\n" in out and "ro:/dev" in out, out
    assert "No space left on device" in out
    assert "/tmp" in result.render().splitlines()[-1] or "8 MiB" in result.render()
    await host_still_fine(tree, limits)


@pytest.mark.anyio
@pytest.mark.parametrize("limits", MECHANISMS)
async def test_a_worktree_growing_past_its_cap_is_stopped_while_running(
    tree: Path, limits: SandboxLimits
) -> None:
    with anyio.fail_after(60):
        result = await run_sandboxed(
            tree,
            "for i in 1 2 3 4 5 6; do head -c 3000000 /dev/zero > part$i.bin; done;"
            " echo written; sleep 30; echo slept",
            limits=limits,
            time_limit=50,
        )
    assert "slept" not in result.output and not result.timed_out
    assert "worktree grew by" in result.render() and "8 MiB per command" in result.render()
    remove_parts(tree)
    await host_still_fine(tree, limits)


@pytest.mark.anyio
async def test_growth_is_checked_after_a_quick_command_too(tree: Path) -> None:
    result = await run_sandboxed(
        tree,
        "for i in 1 2 3 4; do head -c 3000000 /dev/zero > part$i.bin; done",
        limits=SMALL,
        time_limit=30,
    )
    assert "worktree grew by" in result.render()
    small = await run_sandboxed(tree, "head -c 100000 /dev/zero > small.bin", limits=SMALL)
    assert small.exit_code == 0 and "worktree grew" not in small.render()


@pytest.mark.anyio
async def test_many_empty_files_count_against_the_growth_cap(tree: Path) -> None:
    with anyio.fail_after(60):
        result = await run_sandboxed(
            tree,
            "mkdir many && cd many && i=0; while [ $i -lt 4000 ]; do : > f$i; i=$((i+1)); done;"
            " sleep 30; echo slept",
            limits=SMALL,
            time_limit=50,
        )
    assert "slept" not in result.output and "worktree grew by" in result.render()


@pytest.mark.anyio
async def test_limits_off_run_as_before(tree: Path) -> None:
    result = await run_sandboxed(
        tree, "head -c 5000000 /dev/zero > /tmp/x && echo ok", limits=SandboxLimits.off()
    )
    assert result.exit_code == 0 and "ok" in result.output


def test_limits_come_from_settings() -> None:
    settings = load_settings(
        {
            "BOT_SANDBOX_MEMORY_MB": "1024",
            "BOT_SANDBOX_PIDS": "64",
            "BOT_SANDBOX_FILE_MB": "32",
            "BOT_SANDBOX_CPU_SECONDS": "30",
            "BOT_SANDBOX_TMP_MB": "16",
            "BOT_SANDBOX_GROW_MB": "100",
        },
        dotenv=None,
    )
    assert SandboxLimits.from_settings(settings) == SandboxLimits(
        memory_mb=1024, pids=64, file_mb=32, cpu_seconds=30, tmp_mb=16, grow_mb=100
    )
    defaults = SandboxLimits.from_settings(load_settings({}, dotenv=None))
    assert defaults == SandboxLimits()
    assert (defaults.memory_mb, defaults.pids, defaults.cpu_seconds) == (2048, 256, 120)


def test_the_probe_says_which_limits_hold() -> None:
    status = probe_sandbox(limits=SMALL)
    assert status.ok, status.reason
    text = ", ".join(status.limits)
    for name in ("memory 64 MiB", "16 processes", "file size 4 MiB", "CPU 30 s", "/tmp 8 MiB"):
        assert name in text, text
    assert "worktree growth 8 MiB" in text
    off = probe_sandbox(limits=SandboxLimits.off())
    assert off.ok and off.limits == ("no limits",)


def test_a_limit_message_is_part_of_the_rendered_result() -> None:
    result = CommandResult(exit_code=137, output="x\n", limit="[memory limit reached]")
    assert result.render().splitlines()[-2:] == ["[exit code 137]", "[memory limit reached]"]


V1_CGROUP = "12:pids:/app.slice\n4:memory:/app.slice/bot\n1:name=systemd:/x\n0::/\n"
V1_MOUNTS = (
    "30 25 0:26 / /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids\n"
    "31 25 0:27 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n"
    "32 25 0:28 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
)
V2_CGROUP = "0::/user.slice/bot.service/app\n"
V2_MOUNTS = "30 25 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"


def test_cgroup_places_are_found_for_v1_and_v2() -> None:
    v1 = cgroup_places(V1_CGROUP, V1_MOUNTS)
    assert v1 == {
        "pids": (1, Path("/sys/fs/cgroup/pids/app.slice")),
        "memory": (1, Path("/sys/fs/cgroup/memory/app.slice/bot")),
    }
    v2 = cgroup_places(V2_CGROUP, V2_MOUNTS)
    # v2 forbids controllers below a cgroup with processes: sandboxes go beside the app.
    path = Path("/sys/fs/cgroup/user.slice/bot.service")
    assert v2 == {"pids": (2, path), "memory": (2, path)}
    assert cgroup_places("0::/\n", "") == {}


@pytest.mark.anyio
async def test_the_run_command_tool_applies_the_limits_it_was_given(
    repo: tuple[Path, str],
) -> None:
    root, sha = repo
    wt = create_worktree(root, base=sha, run_id="wf_dddddddddddd", index=1, label="impl")
    workspace = Workspace(git_dir=root / ".git", commit=sha, worktree=wt.path)
    box = Toolbox(
        workspace, IMPLEMENTER.tools, sandbox_ok=True, command_timeout=40, sandbox_limits=SMALL
    )
    out = await box.call("run_command", {"command": "head -c 20000000 /dev/zero > big.bin"})
    assert "[file size limit: no file may grow past 4 MiB]" in out
    out = await box.call("run_command", {"command": "echo fine"})
    assert out == "fine\n[exit code 0]"


def test_the_runner_takes_its_sandbox_limits_from_the_settings() -> None:
    settings = load_settings(
        {"BOT_MODEL": "m", "BOT_LLM_BASE_URL": "http://127.0.0.1:9/v1", "BOT_SANDBOX_PIDS": "99"},
        dotenv=None,
    )
    runner = build_runner(settings, sandbox=SandboxStatus(True))
    assert isinstance(runner, AgentRuntime)
    assert runner.limits.sandbox == replace(SandboxLimits(), pids=99)


@pytest.mark.anyio
async def test_doctor_says_which_sandbox_limits_hold() -> None:
    settings = load_settings({"BOT_SANDBOX_MEMORY_MB": "512", "BOT_SANDBOX_PIDS": "0"}, dotenv=None)
    result = await doctor.check_sandbox(doctor.DoctorContext(settings))
    assert result.status == "ok"
    assert "memory 512 MiB (" in result.detail and "processes unlimited" in result.detail
    assert "CPU 120 s per process" in result.detail and "/tmp 256 MiB" in result.detail
