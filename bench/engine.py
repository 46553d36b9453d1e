"""Engine benchmarks: overhead per agent call, peak memory, worktree ready/reclaim vs a clone.

Run: `.venv/bin/python bench/engine.py [--calls 1000] [--files 20000] [--rounds 5]`.
The ~20,000-file repository is generated once with `git fast-import` and cached under
bench/out/ (on this machine's disk, not tmpfs).
"""

from __future__ import annotations

import argparse
import gc
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.engine import Engine, WorkflowMeta  # noqa: E402
from bot.engine.engine import MAX_CALLS  # noqa: E402
from bot.engine.handoff import collect_handoff, reclaim  # noqa: E402
from bot.engine.types import AgentInvocation, RunnerResult  # noqa: E402
from bot.engine.workflow import Workflow  # noqa: E402
from bot.engine.worktree import create_worktree, materialize, materialize_all  # noqa: E402
from policies.interaction import RunInteractionMode, RunInteractionPolicy  # noqa: E402

OUT = ROOT / "bench" / "out"
POLICY = RunInteractionPolicy(RunInteractionMode.AUTONOMOUS)
META = WorkflowMeta("bench")


class ZeroRunner:
    """Answers every call at once: what remains is the engine's own cost."""

    async def run(self, call: AgentInvocation) -> RunnerResult:
        return RunnerResult(output="ok")


async def through_pipeline(wf: Workflow, n: int) -> int:
    results = await wf.pipeline(
        range(n), lambda prev, item, i: wf.agent(f"item {item}", agent_type="explorer")
    )
    return sum(1 for r in results if r is not None and r.ok)


async def through_parallel(wf: Workflow, n: int) -> int:
    results = await wf.parallel(
        [lambda i=i: wf.agent(f"item {i}", agent_type="explorer") for i in range(n)]
    )
    return sum(1 for r in results if r is not None and r.ok)


def overhead(kind: str, calls: int, data_dir: Path) -> tuple[float, int]:
    fn = through_pipeline if kind == "pipeline" else through_parallel
    engine = Engine(ZeroRunner(), data_dir=data_dir, max_calls=calls)

    async def go() -> Any:
        return await engine.run(META, fn, calls, interaction=POLICY, repo=None)

    gc.collect()
    start = time.perf_counter()
    details = anyio.run(go)
    elapsed = time.perf_counter() - start
    assert details.result == calls, details.error
    return elapsed / calls * 1e6, details.result


def peak_memory(calls: int, data_dir: Path) -> float:
    engine = Engine(ZeroRunner(), data_dir=data_dir, max_calls=calls)

    async def go() -> Any:
        return await engine.run(META, through_pipeline, calls, interaction=POLICY, repo=None)

    tracemalloc.start()
    anyio.run(go)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


def generate_repo(files: int) -> Path:
    """A bare repository with `files` small files in 100 folders, cached across runs."""
    repo = OUT / f"repo{files}.git"
    if (repo / "HEAD").is_file():
        return repo
    shutil.rmtree(repo, ignore_errors=True)
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(repo)], check=True)
    chunks = [
        b"commit refs/heads/main\ncommitter Bench <bench@example.invalid> 0 +0000\ndata 5\nbench\n"
    ]
    for i in range(files):
        body = (f"# file {i}\n" + f"value_{i} = {i}\n" * 4).encode()
        path = f"src/d{i // 200:03d}/m{i % 10}/f{i}.py"
        chunks.append(
            b"M 100644 inline " + path.encode() + b"\ndata %d\n" % len(body) + body + b"\n"
        )
    chunks.append(b"\n")
    subprocess.run(
        ["git", "-C", str(repo), "fast-import", "--quiet"], input=b"".join(chunks), check=True
    )
    return repo


def worktree_times(repo: Path, rounds: int) -> tuple[list[float], list[float], list[float]]:
    ready: list[float] = []
    reclaimed: list[float] = []
    full: list[float] = []
    for n in range(rounds):
        start = time.perf_counter()
        wt = create_worktree(repo, base="HEAD", run_id="wf_000000bench0", index=n, label="bench")
        materialize(wt.path, ["src/d000/m1/f1.py", "src/d050/m3/f10003.py"])
        ready.append(time.perf_counter() - start)
        start = time.perf_counter()
        record = collect_handoff(wt)
        cleanup = reclaim(wt, record)
        reclaimed.append(time.perf_counter() - start)
        assert cleanup.removed and cleanup.branch_deleted, cleanup
    # One worktree checked out whole (what an agent pays once it runs a command).
    wt = create_worktree(repo, base="HEAD", run_id="wf_000000bench1", index=0, label="bench")
    start = time.perf_counter()
    materialize_all(wt.path)
    full.append(time.perf_counter() - start)
    cleanup = reclaim(wt, collect_handoff(wt))
    assert cleanup.removed, cleanup
    return ready, reclaimed, full


def concurrent_ready(repo: Path, agents: int) -> float:
    """Wall time for `agents` worktrees created at once (serialized where git needs it)."""
    created: list[Any] = []

    async def go() -> None:
        async with anyio.create_task_group() as tg:
            for n in range(agents):
                tg.start_soon(one, n)

    async def one(n: int) -> None:
        wt = await anyio.to_thread.run_sync(
            lambda: create_worktree(
                repo, base="HEAD", run_id="wf_000000bench2", index=n, label=f"agent {n}"
            )
        )
        created.append(wt)

    start = time.perf_counter()
    anyio.run(go)
    elapsed = time.perf_counter() - start
    for wt in created:
        cleanup = reclaim(wt, collect_handoff(wt))
        assert cleanup.removed, cleanup
    return elapsed


def clone_time(repo: Path) -> float:
    target = Path(tempfile.mkdtemp(dir=OUT)) / "clone"
    try:
        start = time.perf_counter()
        subprocess.run(["git", "clone", "-q", str(repo), str(target)], check=True)
        return time.perf_counter() - start
    finally:
        shutil.rmtree(target.parent, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-clone", action="store_true", help="skip the full clone timing")
    opts = parser.parse_args()
    if not 50 <= opts.calls <= MAX_CALLS:  # one run measures them all, within its call budget
        parser.error(f"--calls must be between 50 and {MAX_CALLS}")
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=OUT) as tmp:
        data = Path(tmp)
        overhead("pipeline", 50, data)  # warm imports and caches
        for kind in ("pipeline", "parallel"):
            per_call, done = overhead(kind, opts.calls, data)
            print(
                f"engine overhead, {kind:8}: {per_call:7.0f} µs/call ({done} calls, zero-latency runner)"
            )
        print(f"peak traced memory, {opts.calls} calls: {peak_memory(opts.calls, data):.1f} MiB")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"max RSS of this process: {rss:.0f} MiB")

    start = time.perf_counter()
    repo = generate_repo(opts.files)
    print(
        f"repository: {opts.files} files at {repo} (ready in {time.perf_counter() - start:.1f} s)"
    )
    ready, reclaimed, full = worktree_times(repo, opts.rounds)
    print(
        f"writing agent's worktree ready: median {statistics.median(ready) * 1000:.0f} ms "
        f"(max {max(ready) * 1000:.0f} ms, {opts.rounds} rounds, 2 files materialized)"
    )
    print(
        f"worktree reclaimed (handoff + remove + branch delete): median "
        f"{statistics.median(reclaimed) * 1000:.0f} ms"
    )
    print(f"16 worktrees created at once: {concurrent_ready(repo, 16):.2f} s wall")
    print(f"whole tree materialized (before a command): {full[0]:.2f} s")
    if not opts.no_clone:
        print(f"fresh `git clone` of the same repository: {clone_time(repo):.2f} s")


if __name__ == "__main__":
    main()
