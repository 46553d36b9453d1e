"""Host git is never steerable from a writing agent's worktree.

Each attack runs through the public tools the way a writing agent would (a scripted model
driving the real runtime, the real sandbox and the real git), then the engine's handoff runs
on the worktree. A hostile config sets `core.fsmonitor` and a `filter.x.clean` driver that
would create a marker file on the host; the marker must never appear, and the agent must get
an error.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from bot.agents.paths import write_no_follow
from bot.agents.sandbox import probe_sandbox
from bot.agents.tools import Toolbox, ToolError
from bot.agents.types import IMPLEMENTER
from bot.engine.handoff import collect_handoff, reclaim
from bot.engine.types import Workspace
from bot.engine.worktree import Worktree, create_worktree
from tests.agents.conftest import RuntimeFactory, git, invocation, make_repo
from tests.fakes.llm import FakeLLM, text, tool_call

needs_sandbox = pytest.mark.skipif(
    not probe_sandbox().ok, reason="bubblewrap cannot run here: the attacks need the sandbox"
)


# Inside the sandbox the worktree's `.git` names a host path the sandbox cannot see; an
# attacker's git commands there stop looking for a repository above their own.
OWN_REPOSITORIES = "export GIT_CEILING_DIRECTORIES=/workspace"


def markers(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("pwned"))


def arm(config: str, tmp_path: Path) -> str:
    """A shell command (run inside the sandbox, outside any repository) that makes `config`
    run a hook and drivers that touch marker files on the host."""
    fsmonitor = f"touch {tmp_path}/pwned-fsmonitor"
    clean = f"touch {tmp_path}/pwned-clean; cat"
    smudge = f"touch {tmp_path}/pwned-smudge; cat"
    textconv = f"touch {tmp_path}/pwned-textconv; cat"
    return (
        "cd /tmp && "
        + " && ".join(
            [
                f"git config -f {config} core.fsmonitor {shlex.quote(fsmonitor)}",
                f"git config -f {config} filter.x.clean {shlex.quote(clean)}",
                f"git config -f {config} filter.x.smudge {shlex.quote(smudge)}",
                f"git config -f {config} filter.x.required true",
                f"git config -f {config} diff.x.textconv {shlex.quote(textconv)}",
            ]
        )
        + " && cd /workspace"
    )


def worktree_for(root: Path, sha: str, run: str) -> tuple[Worktree, Workspace]:
    wt = create_worktree(root, base=sha, run_id=run, index=1, label="impl")
    workspace = Workspace(git_dir=root / ".git", commit=sha, worktree=wt.path, branch=wt.branch)
    return wt, workspace


def errors_in(transcript: list[dict[str, object]]) -> list[str]:
    return [
        str(entry.get("content"))
        for entry in transcript
        if entry.get("role") == "tool" and str(entry.get("content", "")).startswith("error:")
    ]


@needs_sandbox
@pytest.mark.anyio
@pytest.mark.parametrize("origin", ["committed", "made-in-sandbox"])
async def test_a_link_to_dotgit_cannot_retarget_host_git(
    tmp_path: Path, fake: FakeLLM, runtime_for: RuntimeFactory, origin: str
) -> None:
    root, _ = make_repo(tmp_path / "repo")
    if origin == "committed":
        os.symlink(".git", root / "gl")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "a link to .git")
    sha = git(root, "rev-parse", "HEAD")
    wt, workspace = worktree_for(root, sha, "wf_111111111111")
    dotgit = (wt.path / ".git").read_bytes()
    evil = wt.path / "evil"
    setup = [
        "git -C /tmp init -q scratch && cp -r /tmp/scratch/.git evil",
        arm("/workspace/evil/config", tmp_path),
        "echo '* filter=x diff=x' > .gitattributes",
        "echo changed >> README.md",
    ]
    if origin == "made-in-sandbox":
        setup.append("ln -s .git gl")
    fake.push(
        tool_call("run_command", {"command": " && ".join(setup)}),
        tool_call("write_file", {"path": "gl", "content": f"gitdir: {evil}\n"}),
        tool_call("commit", {"message": "Innocent change"}),
        text("done"),
    )
    result = await runtime_for(sandbox_ok=True).run(
        invocation(agent_type=IMPLEMENTER, workspace=workspace)
    )
    assert (evil / "config").is_file()  # the attacker's repository is ready
    errors = errors_in(result.transcript)
    assert any(".git" in e for e in errors), errors
    assert (wt.path / ".git").read_bytes() == dotgit
    record = collect_handoff(wt)
    reclaim(wt, record)
    assert markers(tmp_path) == []


@needs_sandbox
@pytest.mark.anyio
@pytest.mark.parametrize("origin", ["new-repository", "existing-submodule"])
async def test_a_nested_repository_cannot_run_code_on_the_host(tmp_path: Path, origin: str) -> None:
    root, _ = make_repo(tmp_path / "repo")
    if origin == "existing-submodule":
        # A gitlink in the base tree: its directory is checked out empty, and the agent
        # makes a repository there.
        _, inner_sha = make_repo(tmp_path / "inner", {"f": "a\n"})
        git(root, "update-index", "--add", "--cacheinfo", f"160000,{inner_sha},sub")
        git(root, "commit", "-q", "-m", "a submodule")
    sha = git(root, "rev-parse", "HEAD")
    wt, workspace = worktree_for(root, sha, "wf_222222222222")
    box = Toolbox(workspace, IMPLEMENTER.tools, sandbox_ok=True, command_timeout=30)
    try:
        make = (
            f"{OWN_REPOSITORIES} && mkdir -p sub && cd sub && git init -q && echo a > f && git add f && "
            "git -c user.name=a -c user.email=a@b commit -qm inner"
        )
        out = await box.call("run_command", {"command": make})
        assert out.endswith("[exit code 0]"), out
        with pytest.raises(ToolError, match="sub"):
            await box.call("commit", {"message": "Add a nested repository"})
        armed = " && ".join(
            [
                arm("/workspace/sub/.git/config", tmp_path),
                "echo '* filter=x diff=x' > sub/.gitattributes",
                "echo b >> sub/f && touch sub/new && echo changed >> README.md",
            ]
        )
        out = await box.call("run_command", {"command": armed})
        assert out.endswith("[exit code 0]"), out
        with pytest.raises(ToolError, match="sub"):
            await box.call("commit", {"message": "Touch the nested repository"})
        await box.call("git_diff", {})
    finally:
        await box.aclose()
    record = collect_handoff(wt)
    reclaim(wt, record)
    assert markers(tmp_path) == []
    assert git(root, "rev-parse", wt.branch) == sha  # nothing of it reached the branch


@pytest.mark.anyio
@pytest.mark.parametrize("tamper", ["retargeted", "replaced-by-a-link"])
async def test_a_changed_dotgit_quarantines_the_worktree(
    tmp_path: Path, fake: FakeLLM, runtime_for: RuntimeFactory, tamper: str
) -> None:
    """However `.git` came to change, host git never runs in that worktree again."""
    root, sha = make_repo(tmp_path / "repo")
    wt, workspace = worktree_for(root, sha, "wf_333333333333")
    dotgit = wt.path / ".git"
    if tamper == "retargeted":
        evil = tmp_path / "evil"
        git(tmp_path, "init", "-q", str(evil))
        git(evil, "config", "core.fsmonitor", f"touch {tmp_path}/pwned-fsmonitor")
        dotgit.write_text(f"gitdir: {evil / '.git'}\n")
    else:
        copy = tmp_path / "dotgit-copy"
        copy.write_bytes(dotgit.read_bytes())
        dotgit.unlink()
        dotgit.symlink_to(copy)
    fake.push(
        tool_call("write_file", {"path": "ok.txt", "content": "fine\n"}),
        tool_call("read_file", {"path": "README.md"}),
        text("done"),
    )
    result = await runtime_for().run(invocation(agent_type=IMPLEMENTER, workspace=workspace))
    assert result.error is not None and "quarantined" in result.error
    assert len(errors_in(result.transcript)) == 1  # the agent stopped at the first refusal
    assert not (wt.path / "ok.txt").exists()
    record = collect_handoff(wt)
    assert record.quarantined and "quarantined" in record.as_dict()["quarantined"]
    cleanup = reclaim(wt, record)
    assert not cleanup.removed and "quarantined" in (cleanup.reason or "")
    assert wt.path.is_dir()
    assert markers(tmp_path) == []
    # A fresh toolbox on the same worktree refuses at once.
    box = Toolbox(workspace, IMPLEMENTER.tools)
    with pytest.raises(ToolError, match="quarantined"):
        await box.call("list_files", {})


@needs_sandbox
@pytest.mark.anyio
async def test_writes_never_land_in_a_dotgit_or_through_a_link(tmp_path: Path) -> None:
    root, sha = make_repo(tmp_path / "repo")
    wt, workspace = worktree_for(root, sha, "wf_444444444444")
    box = Toolbox(workspace, IMPLEMENTER.tools, sandbox_ok=True, command_timeout=30)
    try:
        command = (
            f"{OWN_REPOSITORIES} && git init -q inner && ln -s inner/.git/config cfg && "
            "ln -s inner/.git ig && ln -s .git gl && ls /workspace/.. && "
            f"test ! -e {root / '.git' / 'config'} && echo common-dir-unseen"
        )
        out = await box.call("run_command", {"command": command})
        assert "common-dir-unseen" in out, out
        before = (wt.path / "inner/.git/config").read_bytes()
        for path in ("cfg", "ig/config", "ig/hooks/pre-commit", "gl"):
            with pytest.raises(ToolError, match=r"\.git"):
                await box.call("write_file", {"path": path, "content": "[core]\n"})
        with pytest.raises(ToolError, match=r"\.git"):
            await box.call("edit_file", {"path": "cfg", "old_text": "[core]", "new_text": "x"})
        assert (wt.path / "inner/.git/config").read_bytes() == before
        assert not (wt.path / "inner/.git/hooks/pre-commit").exists()
    finally:
        await box.aclose()


def test_the_no_follow_writer_refuses_a_link_swapped_in(tmp_path: Path) -> None:
    """The write walks each directory without following links, so a link that appears after
    the path was checked cannot send the write elsewhere."""
    root = tmp_path / "tree"
    (root / "dir").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    assert write_no_follow(root, "dir/a.txt", b"one") is False
    assert write_no_follow(root, "dir/a.txt", b"two") is True
    assert (root / "dir/a.txt").read_bytes() == b"two"
    assert write_no_follow(root, "new/deep/b.txt", b"x") is False  # parents are made
    os.rename(root / "dir", root / "moved")
    os.symlink(outside, root / "dir")
    with pytest.raises(ToolError, match="symbolic link"):
        write_no_follow(root, "dir/a.txt", b"three")
    os.symlink(outside / "target.txt", root / "file-link")
    with pytest.raises(ToolError, match="symbolic link"):
        write_no_follow(root, "file-link", b"four")
    assert list(outside.iterdir()) == []


SECRETS = {
    "BOT_WEBHOOK_SECRET": "webhook-secret-value",
    "BOT_LLM_API_KEY": "llm-key-value",
    "BOT_PRIVATE_KEY": "private-key-value",
    "OPENAI_API_KEY": "openai-key-value",
    "GIT_DIR": "/elsewhere",
    "GIT_CONFIG_PARAMETERS": "'core.fsmonitor'='touch /tmp/x'",
    "GIT_EXTERNAL_DIFF": "touch /tmp/x",
}


def fake_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `git` first on PATH that writes down the environment and arguments it was given."""
    bin_dir = tmp_path / "bin"
    dumps = tmp_path / "dumps"
    bin_dir.mkdir()
    dumps.mkdir()
    script = bin_dir / "git"
    script.write_text(
        "#!/bin/sh\n"
        f'env > "{dumps}/$$.env"\n'
        f'printf "%s\\n" "$@" > "{dumps}/$$.args"\n'
        "cat >/dev/null 2>&1 </dev/null\n"
    )
    script.chmod(0o755)
    for key, value in SECRETS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return dumps


def test_the_host_git_environment_holds_no_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.git.hostgit import host_env

    for key, value in SECRETS.items():
        monkeypatch.setenv(key, value)
    env = host_env(config=[("http.extraHeader", "x")])
    assert not [k for k in env if k.startswith("BOT_") or k in SECRETS]
    assert not [v for v in env.values() if v in SECRETS.values()]
    assert env["GIT_CONFIG_NOSYSTEM"] == "1" and env["GIT_CONFIG_GLOBAL"] == "/dev/null"
    assert not Path(env["HOME"]).exists()
    pairs = {
        env[f"GIT_CONFIG_KEY_{i}"]: env[f"GIT_CONFIG_VALUE_{i}"]
        for i in range(int(env["GIT_CONFIG_COUNT"]))
    }
    assert pairs["core.fsmonitor"] == "false" and pairs["core.hooksPath"] == "/dev/null"
    assert pairs["http.extraHeader"] == "x"


@pytest.mark.anyio
async def test_every_host_git_runner_passes_a_clean_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot.agents.gitread import ObjectReader
    from bot.agents.gitread import run_git as run_git_async
    from bot.engine.git import run_git
    from bot.git.checkout import Mirrors

    dumps = fake_git(tmp_path, monkeypatch)
    run_git(["status"], tmp_path, check=False)
    await run_git_async(["status"], cwd=tmp_path)
    reader = ObjectReader(tmp_path, "0" * 40)
    await reader._start()
    await reader.aclose()
    (tmp_path / "data/repos/o/r.git").mkdir(parents=True)
    await Mirrors(tmp_path / "data").sweep()
    seen = sorted(dumps.glob("*.env"))
    assert len(seen) >= 4
    for dump in seen:
        text_ = dump.read_text()
        for key, value in SECRETS.items():
            assert f"{key}=" not in text_ and value not in text_, (dump.name, key)
        assert "BOT_" not in text_
        assert "GIT_CONFIG_NOSYSTEM=1" in text_ and "GIT_CONFIG_GLOBAL=/dev/null" in text_
        config = {
            line.split("=", 1)[1]
            for line in text_.splitlines()
            if line.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))
        }
        assert {"core.fsmonitor", "core.hooksPath", "diff.ignoreSubmodules"} <= config, dump
