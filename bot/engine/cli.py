"""`bot workflow run | status | stop`: run a workflow file, or a built-in one, on a local repository.

`bot workflow run FILE` runs a file defining `meta` and `async def workflow(wf, args)`;
`bot workflow run triage|ask|review` runs a built-in workflow on the checkout with the inputs
it needs (`--issue`/`--issue-file`, `--question`, `--base`/`--head`; `bot.workflows.local`),
printing its outcome: nothing is posted. The exit status is 0 only when the run completed and
no agent failed (and, for a built-in workflow, its outcome is not `failed`); else 1, with what
failed on stderr; 2 for bad input, before anything runs. `--args` must be JSON. `--repo` is a
repository's root (or a bare repository): a directory inside one is refused, naming the root,
rather than widened to the whole repository behind the person's back.

This module is a command: it wires the engine to the agents and the built-in workflows, which
import the engine in turn.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from bot.agents.repo_types import local_agent_types
from bot.agents.runtime import NoModelRunner, build_runner
from bot.engine import artifacts
from bot.engine.artifacts import RunNotFound, RunStore, new_run_id
from bot.engine.details import RunDetails
from bot.engine.engine import Engine
from bot.engine.git import GitError, git_out
from bot.engine.report import build_result_message, format_elapsed
from bot.engine.run import STOPPED
from bot.engine.types import AgentType
from bot.engine.workflow import WorkflowLoadError, load_workflow_file
from bot.log import configure
from bot.redact import install as install_redactor
from bot.settings import Settings, SettingsError, load_settings
from bot.workflows.local import BUILTIN_NAMES, LocalInputs, LocalRun, is_builtin
from bot.workflows.local import outcome as local_outcome
from bot.workflows.local import prepare as local_prepare
from bot.workflows.local import report as local_report
from policies.interaction import RunInteractionMode, RunInteractionPolicy
from policies.outcome import Outcome


def _json_arg(raw: str) -> Any:
    """`--args`: JSON, or argparse's usage error (exit status 2)."""
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"not valid JSON ({exc}); quote it for the shell, e.g. --args '{{\"n\": 1}}'"
        ) from None


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("workflow", help="run, inspect or stop a workflow")
    sub = parser.add_subparsers(dest="workflow_command", metavar="ACTION", required=True)
    run = sub.add_parser(
        "run",
        help="run a workflow file (defines meta and workflow), or triage, ask or review",
        description="Run a workflow file, or a built-in workflow (triage, ask, review) on a "
        "local checkout; a built-in workflow's outcome is printed, nothing is posted.",
    )
    run.add_argument(
        "file",
        metavar="FILE|NAME",
        help="a Python file defining `meta` and `workflow`, or triage, ask or review",
    )
    run.add_argument(
        "--args", type=_json_arg, default=None, help="JSON passed to the workflow as `args`"
    )
    run.add_argument(
        "--repo",
        type=Path,
        default=None,
        help="the root of the git repository to work on (built-in workflows: default .)",
    )
    builtin = run.add_argument_group("built-in workflows")
    builtin.add_argument("--issue", default=None, help="triage: the issue's text (title first)")
    builtin.add_argument(
        "--issue-file", type=Path, default=None, help="triage: a file with the issue's text"
    )
    builtin.add_argument("--question", default=None, help="ask: the question")
    builtin.add_argument("--base", default=None, help="review: the branch the change goes into")
    builtin.add_argument("--head", default=None, help="review: the change's branch (default HEAD)")
    run.add_argument("--resume-from", default=None, help="run id (or unique suffix) to resume")
    run.add_argument("--background", action="store_true", help="start and print the run id")
    run.add_argument("--json", action="store_true", help="print the run details as JSON")
    run.add_argument("--foreground-of", default=None, help=argparse.SUPPRESS)
    run.set_defaults(func=cmd_run)
    status = sub.add_parser("status", help="show one run, or list recent runs")
    status.add_argument("run_id", nargs="?", default=None)
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)
    stop = sub.add_parser("stop", help="stop a running workflow")
    stop.add_argument("run_id")
    stop.set_defaults(func=cmd_stop)


def _fail(message: str, code: int = 2) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


def _repo_paths(repo: Path | None) -> tuple[Path | None, Path | None]:
    """(repo, local_root): a work tree's agents read its files; a bare repository has none.
    ValueError for a path that is no repository, or one inside a repository's work tree."""
    if repo is None:
        return None, None
    try:
        bare = git_out(["rev-parse", "--is-bare-repository"], repo) == "true"
        if bare:
            return repo.resolve(), None
        top = Path(git_out(["rev-parse", "--show-toplevel"], repo))
    except GitError as exc:
        raise ValueError(f"{repo} is not a git repository ({exc.stderr or exc})") from exc
    if repo.resolve() != top.resolve():
        raise ValueError(f"{repo} is inside the repository at {top}; pass --repo {top}")
    return top, top


_BUILTIN_FLAGS = ("issue", "issue_file", "question", "base", "head")


def _local_inputs(args: argparse.Namespace) -> LocalInputs:
    """The built-in workflow's inputs; ValueError for flags that do not fit the workflow."""
    given = [f"--{n.replace('_', '-')}" for n in _BUILTIN_FLAGS if getattr(args, n) is not None]
    if not is_builtin(args.file):
        if given:
            raise ValueError(
                f"{given[0]} is for the built-in workflows ({', '.join(BUILTIN_NAMES)}), "
                f"not a workflow file; pass a file's inputs with --args"
            )
        return LocalInputs()
    if args.args is not None:
        raise ValueError(
            "the built-in workflows take no --args: pass --issue/--issue-file (triage), "
            "--question (ask) or --base/--head (review)"
        )
    issue = args.issue
    if args.issue_file is not None:
        if issue is not None:
            raise ValueError("give --issue or --issue-file, not both")
        try:
            issue = args.issue_file.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise ValueError(f"cannot read {args.issue_file}: {exc.strerror}") from exc
    return LocalInputs(
        issue=issue, question=args.question, base=args.base, head=args.head or "HEAD"
    )


def _failures(details: RunDetails, done: Outcome | None) -> list[str]:
    """What failed in a finished run, one line each: the run, each agent, the outcome."""
    lines = []
    if details.status != "completed":
        lines.append(f"workflow {details.status}: {details.error or 'no reason recorded'}")
    lines += [
        f"agent [{a.label}] failed: {a.error or 'no reason recorded'}"
        for a in details.agents
        if a.state == "error"
    ]
    if not lines and done is not None and done.status == "failed":
        lines.append(f"outcome failed: {done.error or done.summary}")
    return lines


def _engine(settings: Settings, agent_types: Mapping[str, AgentType]) -> Engine:
    return Engine(
        build_runner(settings),
        data_dir=settings.data_dir,
        agent_types=agent_types,
        role_models=settings.role_models,
        default_model=settings.model,
    )


def cmd_run(args: argparse.Namespace) -> int:
    local_run: LocalRun | None = None
    try:
        settings = load_settings()
        inputs = _local_inputs(args)
        if is_builtin(args.file):
            repo, local_root = _repo_paths(args.repo or Path("."))
            assert repo is not None
            local_run = anyio.run(local_prepare, args.file, inputs, repo)
            meta, fn = local_run.meta, local_run.fn
            if not local_run.read_work_tree:
                local_root = None
        else:
            meta, fn = load_workflow_file(Path(args.file))
            repo, local_root = _repo_paths(args.repo)
        agent_types = local_agent_types(settings, repo)
    except (SettingsError, WorkflowLoadError, ValueError) as exc:
        return _fail(str(exc))
    store = RunStore(settings.data_dir)
    if args.resume_from is not None:
        try:
            store.resolve(args.resume_from)
        except RunNotFound as exc:
            return _fail(str(exc))
    app_slug = settings.app_slug or "bot"
    if local_run is not None and local_run.nothing_to_do is not None:
        return _print_local(args, local_run, None, app_slug, store)
    if args.background and args.foreground_of is None:
        return _spawn_background(args, store, meta.name)
    run_id = args.foreground_of or new_run_id()
    if not artifacts.RUN_ID.match(run_id):
        return _fail(f"not a run id: {run_id!r}")
    if not logging.getLogger().handlers:  # leave a host's (or a test runner's) logging alone
        if args.foreground_of is None:
            configure("WARNING", json_lines=False)  # the progress lines are the output here
        else:
            configure(settings.log_level)  # into the background run's process.log
        install_redactor(settings)
    engine = _engine(settings, agent_types)
    engine.recover_stale()
    progress = _Progress(enabled=not args.json and args.foreground_of is None)
    policy = RunInteractionPolicy(RunInteractionMode.AUTONOMOUS)
    workflow_args = local_run.args if local_run is not None else args.args

    async def main() -> RunDetails:
        holder: list[RunDetails] = []
        async with anyio.create_task_group() as tg:

            async def on_signal() -> None:
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    async for _ in signals:
                        while True:
                            try:
                                await engine.stop(run_id, STOPPED)
                                return
                            except RunNotFound:
                                await anyio.sleep(0.05)
                return

            tg.start_soon(on_signal)
            details = await engine.run(
                meta,
                fn,
                workflow_args,
                interaction=policy,
                repo=repo,
                base=local_run.commit if local_run is not None else None,
                local_root=local_root,
                run_id=run_id,
                resume_from=args.resume_from,
                on_update=progress,
            )
            holder.append(details)
            tg.cancel_scope.cancel()
        return holder[0]

    try:
        details = anyio.run(main)
    except (RunNotFound, ValueError) as exc:
        return _fail(str(exc))
    except BaseExceptionGroup as group:
        found, rest = group.split((RunNotFound, ValueError))
        if found is None or rest is not None:
            raise
        return _fail("; ".join(str(exc) for exc in found.exceptions))
    if local_run is not None:
        return _print_local(args, local_run, details, app_slug, store)
    if args.json:
        print(json.dumps(details.to_json(), indent=1, default=str))
    elif args.foreground_of is None:
        print(build_result_message(details, store.run_dir(details.run_id)))
    return _exit_status(details, None, quiet=args.foreground_of is not None)


def _print_local(
    args: argparse.Namespace,
    local_run: LocalRun,
    details: RunDetails | None,
    app_slug: str,
    store: RunStore,
) -> int:
    """A built-in workflow's outcome on stdout (and the run's details), then its exit status."""
    done = local_outcome(local_run, details, app_slug=app_slug)
    if args.json:
        data: dict[str, Any] = {"run_id": None} if details is None else details.to_json()
        data["outcome"] = dataclasses.asdict(done)
        print(json.dumps(data, indent=1, default=str))
    elif args.foreground_of is None:
        print(local_report(done))
        if details is not None:
            print()
            print(build_result_message(details, store.run_dir(details.run_id)))
    if details is None:
        return 0
    return _exit_status(details, done, quiet=args.foreground_of is not None)


def _exit_status(details: RunDetails, done: Outcome | None, *, quiet: bool) -> int:
    """0 when nothing failed; else 1, naming each failure on stderr."""
    failures = _failures(details, done)
    if not quiet:
        for line in failures:
            print(f"error: {line}", file=sys.stderr)
    return 1 if failures else 0


def _spawn_background(args: argparse.Namespace, store: RunStore, name: str) -> int:
    run_id = new_run_id()
    run_dir = store.run_dir(run_id)
    run_dir.mkdir(parents=True, exist_ok=True)
    file = args.file if is_builtin(args.file) else str(Path(args.file).resolve())
    cmd = [sys.executable, "-m", "bot.cli", "workflow", "run", file]
    if args.args is not None:
        cmd += ["--args", json.dumps(args.args)]
    for flag in _BUILTIN_FLAGS:
        value = getattr(args, flag)
        if value is not None:
            shown = str(value.resolve()) if isinstance(value, Path) else str(value)
            cmd += [f"--{flag.replace('_', '-')}", shown]
    if args.repo is not None:
        cmd += ["--repo", str(args.repo.resolve())]
    if args.resume_from is not None:
        cmd += ["--resume-from", args.resume_from]
    cmd += ["--foreground-of", run_id]
    # Visible to `status` and `stop` at once; the child rewrites it as soon as it runs.
    store.write_details(RunDetails(run_id=run_id, name=name, pid=os.getpid()))
    with open(run_dir / "process.log", "ab") as logfile:
        child = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=logfile,
            stderr=logfile,
            start_new_session=True,
            cwd=os.getcwd(),
        )
    try:
        if store.read_details(run_id).pid == os.getpid():
            store.write_details(RunDetails(run_id=run_id, name=name, pid=child.pid))
    except RunNotFound:
        pass
    if args.json:
        print(json.dumps({"run_id": run_id, "pid": child.pid}))
    else:
        print(run_id)
    return 0


class _Progress:
    """Prints phase changes and settled agents to stderr during a foreground run."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self.phase: str | None = None
        self.settled: set[int] = set()
        self.logs = 0

    def __call__(self, details: RunDetails) -> None:
        if not self.enabled:
            return
        if details.current_phase != self.phase:
            self.phase = details.current_phase
            print(f"== {self.phase}", file=sys.stderr)
        shown = details.logs_dropped + len(details.logs)
        for line in details.logs[max(0, len(details.logs) - (shown - self.logs)) :]:
            print(f"   {line}", file=sys.stderr)
        self.logs = shown
        for agent in details.agents:
            if agent.state in ("done", "error") and agent.index not in self.settled:
                self.settled.add(agent.index)
                mark = "ok" if agent.state == "done" else f"FAILED - {agent.error}"
                print(f"   [{agent.label}] {mark}", file=sys.stderr)


def cmd_status(args: argparse.Namespace) -> int:
    try:
        settings = load_settings()
    except SettingsError as exc:
        return _fail(str(exc))
    engine = Engine(NoModelRunner(), data_dir=settings.data_dir)
    engine.recover_stale()
    try:
        if args.run_id is not None:
            details = engine.status(args.run_id)
            if args.json:
                print(json.dumps(details.to_json(), indent=1, default=str))
            else:
                print(build_result_message(details, engine.store.run_dir(details.run_id)))
            return 0
        runs = engine.status()
    except RunNotFound as exc:
        return _fail(str(exc))
    if args.json:
        print(json.dumps([d.to_json() for d in runs], indent=1, default=str))
        return 0
    if not runs:
        print("no runs yet")
    now = time.time()
    for d in runs:
        done, _failed = d.counts()
        elapsed = format_elapsed(d.started_at, d.finished_at, now)
        print(f"{d.run_id}  {d.status:9}  {done}/{len(d.agents)} ok  {elapsed:>7}  {d.name}")
    return 0


def _runs_in_background_child(pid: int, run_id: str) -> bool:
    """True when `pid` is the detached `bot workflow run ... --foreground-of RUN_ID` child
    (never signal a server process, or a process that merely reused the pid)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"--foreground-of" in argv and run_id.encode() in argv


def cmd_stop(args: argparse.Namespace, *, wait_seconds: float = 15.0) -> int:
    try:
        settings = load_settings()
    except SettingsError as exc:
        return _fail(str(exc))
    store = RunStore(settings.data_dir)
    try:
        run_id = store.resolve(args.run_id)
        details = store.read_details(run_id)
    except RunNotFound as exc:
        return _fail(str(exc))
    if details.status != "running":
        return _fail(f"run {run_id} is not running ({details.status})", 1)
    pid = details.pid
    try:
        if pid is None or pid <= 0:
            raise ProcessLookupError
        os.kill(pid, 0)
        if not _runs_in_background_child(pid, run_id):
            return _fail(
                f"run {run_id} belongs to process {pid}, which is not a `bot workflow run` "
                "child; stop it where it runs (for a GitHub run: comment `@<app> stop`)",
                1,
            )
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        Engine(NoModelRunner(), data_dir=settings.data_dir).recover_stale()
        print(f"{run_id}: its process had ended; marked aborted")
        return 0
    except PermissionError:
        return _fail(f"not allowed to signal process {pid} of run {run_id}", 1)
    deadline = time.monotonic() + wait_seconds
    while time.monotonic() < deadline:
        try:
            details = store.read_details(run_id)
        except RunNotFound:
            details.status = "running"
        if details.status != "running":
            print(f"{run_id}: {details.status} ({details.error or 'stopped'})")
            return 0
        time.sleep(0.1)
    return _fail(f"run {run_id} did not stop within {wait_seconds:.0f}s (pid {pid})", 1)
