"""The bubblewrap sandbox: no network, no secrets, nothing of the host but the worktree."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import anyio
import pytest

from bot.agents import sandbox
from bot.agents.sandbox import bwrap_command, probe_sandbox, run_sandboxed
from tests.agents.unprivileged import reachable_tmp
from tests.fakes.llm import FakeLLM, serve, text


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "worktree"
    root.mkdir()
    (root / "hello.txt").write_text("hi\n")
    return root


def test_probe_runs_true_in_the_sandbox() -> None:
    status = probe_sandbox()
    assert status.ok and status.reason == ""
    assert status.limits[0].startswith("memory 2048 MiB")


def test_probe_reports_a_missing_bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "bwrap_path", lambda: None)
    status = probe_sandbox()
    assert not status.ok and "bubblewrap (bwrap) is not installed" in status.reason


def test_sandbox_works_unprivileged(monkeypatch: pytest.MonkeyPatch) -> None:
    bwrap = sandbox.bwrap_path()
    assert bwrap is not None
    # The tree and the sandbox's identity files (made here, read by `nobody`) where `nobody`
    # can reach them, whatever TMPDIR is.
    monkeypatch.setattr(tempfile, "tempdir", reachable_tmp())
    monkeypatch.setattr(sandbox, "_IDENTITY", {})
    with tempfile.TemporaryDirectory(prefix="bot-unpriv-") as tmp:
        tree = Path(tmp)
        (tree / "hello.txt").write_text("hi\n")
        argv = bwrap_command(bwrap, tree, ["sh", "-c", "id -u; cat hello.txt"])
        if os.getuid() == 0:
            # Tests run as root in CI; drop to `nobody` to prove the unprivileged path.
            setpriv = shutil.which("setpriv")
            assert setpriv is not None
            tree.chmod(0o777)
            argv = [setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups", *argv]
        done = subprocess.run(argv, capture_output=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().split() == [str(65534 if os.getuid() == 0 else os.getuid()), "hi"]


@pytest.mark.anyio
async def test_command_sees_the_worktree_and_can_write_only_there(tree: Path) -> None:
    result = await run_sandboxed(
        tree, "pwd; cat hello.txt; echo made > new.txt; touch /usr/evil; echo rc=$?"
    )
    lines = result.output.splitlines()
    assert lines[0] == "/workspace" and lines[1] == "hi"
    assert "rc=1" in result.output
    assert (tree / "new.txt").read_text() == "made\n"
    assert result.exit_code == 0 and not result.timed_out


@pytest.mark.anyio
async def test_command_cannot_reach_a_server_on_the_hosts_loopback(tree: Path) -> None:
    fake = FakeLLM([text("reachable")])
    with serve(fake) as base_url:
        port = base_url.split(":")[2].split("/")[0]
        script = (
            "import socket\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
            "    print('CONNECTED')\n"
            "except OSError as exc:\n"
            "    print('refused', exc)\n"
        )
        (tree / "probe.py").write_text(script)
        result = await run_sandboxed(tree, "python3 probe.py; cat /proc/net/dev | tail -n +3")
    assert "CONNECTED" not in result.output
    assert "refused" in result.output
    interfaces = [
        line.split(":")[0].strip()
        for line in result.output.splitlines()
        if ":" in line and "refused" not in line
    ]
    assert interfaces == ["lo"]
    assert fake.requests == []


@pytest.mark.anyio
async def test_command_gets_no_secrets_from_the_environment(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOT_LLM_API_KEY", "sk-very-secret-value")
    monkeypatch.setenv("BOT_WEBHOOK_SECRET", "whsec-very-secret")
    result = await run_sandboxed(tree, 'echo "key=[$BOT_LLM_API_KEY]"; env; cat /proc/1/environ')
    assert "key=[]" in result.output
    assert "sk-very-secret-value" not in result.output
    assert "whsec-very-secret" not in result.output
    names = {line.split("=", 1)[0] for line in result.output.splitlines() if "=" in line}
    assert {"PATH", "HOME"} <= names
    assert not any(name.startswith("BOT_") for name in names)


@pytest.mark.anyio
async def test_command_cannot_read_the_private_key_or_the_data_dir(
    tree: Path, data_dir: Path
) -> None:
    key = data_dir / "app.private-key.pem"
    key.write_text("-----BEGIN RSA PRIVATE KEY-----\nabc\n")
    (data_dir / "bot.sqlite3").write_text("rows")
    home = Path.home()
    result = await run_sandboxed(
        tree,
        f"cat {key}; ls {data_dir}; cat {data_dir}/bot.sqlite3; ls {home}; ls /work /root /etc; "
        "cat /etc/shadow",
    )
    assert "BEGIN RSA PRIVATE KEY" not in result.output
    assert "rows" not in result.output
    assert "No such file or directory" in result.output
    etc = result.output.split("/etc:")[-1].split()
    assert "shadow" not in etc and "passwd" in etc


@pytest.mark.anyio
async def test_command_past_its_time_limit_is_killed_with_its_children(tree: Path) -> None:
    marker = "31337.25"
    with anyio.fail_after(20):
        result = await run_sandboxed(
            tree,
            f"sleep {marker} & (sleep {marker}; echo late) & echo started; sleep {marker}",
            time_limit=2.0,  # time enough to print "started" on a loaded machine
        )
    assert result.timed_out and result.exit_code is None
    assert "started" in result.output
    assert "[command killed: it ran past its time limit]" in result.render()

    def leftovers() -> list[int]:
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    cmdline = (entry / "cmdline").read_bytes()
                except OSError:
                    continue
                if marker.encode() in cmdline:
                    found.append(int(entry.name))
        return found

    with anyio.fail_after(5):
        while leftovers():  # noqa: ASYNC110 - polling /proc, there is no event to wait on
            await anyio.sleep(0.05)
    assert leftovers() == []


@pytest.mark.anyio
async def test_output_is_capped_with_a_marker(tree: Path) -> None:
    result = await run_sandboxed(tree, "head -c 200000 /dev/zero | tr '\\0' a", output_cap=1000)
    assert len(result.output) == 1000
    assert result.truncated and result.total_bytes == 200000
    assert "[output truncated: showing the first" in result.render()
