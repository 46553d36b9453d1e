"""Prove a review's findings with a failing test before anyone is asked to believe them.

Phase "Prove" of the review workflow (`prove_findings`), for the findings
`policies.proofs.plan_proofs` chooses:

1. an implementer in its own worktree at the head writes the smallest test that should fail
   because of the finding, commits it, and names the test file and the test;
2. the runner's `ProofTestRunner` (bound to the mirror, `run_proof_test`) checks that the commit
   sits on the head and changes that one file only (a test that edits the code it tests
   proves nothing), then runs `review.test_command` in the sandbox on a scratch checkout of
   it, within `review.check_timeout`; when the finding carries a fix, the fix is applied to
   the same checkout and the test runs again;
3. when the test failed, a read-only verifier (so a resumed run replays it from the journal)
   rules, with the output as untrusted data, whether the failure shows what the finding says.

`policies.proofs.outcome` turns that into reproduced, not reproduced or not tried. What the
test printed is redacted (token shapes) before the verifier, the memory or GitHub see it. A
proof whose inputs (the head, the finding, the command: `proof_key`) were proven before, by
this pull request's earlier reviews, is reused and not run again. The tests' branches and
worktrees are reclaimed with the run's other agents'; nothing is pushed.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field

from bot.agents import sandbox
from bot.engine.workflow import Workflow
from bot.redact import redact
from bot.runs.context import context_prompt
from bot.workflows.review.diffs import is_ancestor, read_file
from bot.workflows.review.suggest import (
    SANDBOX_MISSING,
    CheckoutFailed,
    _changed_paths,
    described,
    scratch_checkout,
)
from bot.workflows.schemas import ReviewFinding
from policies.proofs import (
    NOT_STARTED,
    ProofCandidate,
    ProofRun,
    command_for_tests,
    outcome,
    plan_proofs,
    proof_key,
)

SOURCE_CAP = 4000
OUTPUT_TAIL = 2000
OUTPUT_LINES = 25

PROVE_TASK = """\
Write the smallest test that fails because of this review finding on {pr}, in your own
worktree at the head commit, then commit it with a short message. Read the repository's
tests and their configuration first and write the test in their style and framework. Put it
in one new test file under the repository's tests and change no other file: the test must
fail on the head because of the problem the finding states, and pass once it is fixed. It is
run with `{command}` ({{tests}}: your test file), without network. If no test can show the
problem, commit nothing and say why. Report the test file's path and the test's name.

Finding (JSON):
{finding}"""

RULING_TASK = """\
A test was written to show a review finding on {pr}, and it fails on the head commit. The
data blocks below hold the test and what it printed. Rule whether the failure shows the
problem the finding states (the output names it: the exception, the wrong value), or whether
the test fails for another reason (an import error, a syntax error, an assertion about
something else). Only the output counts, not what the test's comments claim.

Finding (JSON):
{finding}"""


class ProofTest(BaseModel):
    """The test a proof wrote."""

    model_config = ConfigDict(extra="ignore")

    path: str = Field(min_length=1, description="The test file's repository-relative path.")
    name: str = Field(min_length=1, description="The test's name (function or test id).")


class ProofRuling(BaseModel):
    """Whether a failing test shows the finding."""

    model_config = ConfigDict(extra="ignore")

    shows_finding: bool = Field(
        description="True when the failure output shows the problem the finding states."
    )
    reason: str = Field(default="", description="One sentence: what in the output says so.")


@dataclass(frozen=True, slots=True)
class Fix:
    """A finding's replacement of lines `start`..`end` of `path`."""

    path: str
    start: int
    end: int
    text: str


@dataclass(frozen=True, slots=True)
class ProofReport:
    """What running a proof's test did: `problem` when it was not run at all."""

    on_head: ProofRun | None = None
    output: str = ""
    with_fix: ProofRun | None = None
    source: str = ""
    problem: str = ""


ProofTestRunner = Callable[[str, str, "Fix | None"], Awaitable[ProofReport]]
"""`(commit, test path, fix)`: the proof's test run (bound by the review's flow)."""


def _run_of(done: Any) -> ProofRun:
    return ProofRun(done.exit_code, done.what, timed_out=done.exit_code is None)


def _apply(tree: Path, fix: Fix) -> bool:
    """Write `fix` into the checkout; False when its file is not a plain file in it."""
    root = tree.resolve()
    target = tree / fix.path
    if target.is_symlink() or not target.is_file():
        return False
    if root not in target.resolve().parents:
        return False
    lines = target.read_text(encoding="utf-8", errors="surrogateescape").split("\n")
    if fix.start < 1 or fix.end < fix.start or fix.end > len(lines):
        return False
    lines[fix.start - 1 : fix.end] = fix.text.split("\n")
    target.write_text("\n".join(lines), encoding="utf-8", errors="surrogateescape")
    return True


def bound_runner(git_dir: Path, *, head: str, command: str, time_limit: float) -> ProofTestRunner:
    """`run_proof_test` bound to one mirror, head and test command: the workflow's runner."""

    async def run_test(commit: str, test_path: str, fix: Fix | None) -> ProofReport:
        return await run_proof_test(
            git_dir,
            head=head,
            command=command,
            time_limit=time_limit,
            commit=commit,
            test_path=test_path,
            fix=fix,
        )

    return run_test


async def run_proof_test(
    git_dir: Path,
    *,
    head: str,
    command: str,
    time_limit: float,
    commit: str,
    test_path: str,
    fix: Fix | None,
) -> ProofReport:
    """Step 2 of the module docstring."""
    if commit == head or not await is_ancestor(git_dir, head, commit):
        return ProofReport(problem="the test is not a commit on top of the reviewed head")
    changed = await _changed_paths(git_dir, head, commit)
    if changed != [test_path]:
        return ProofReport(problem="the test's commit changes other files than its test file")
    source = (await read_file(git_dir, commit, test_path) or "")[:SOURCE_CAP]
    if not await anyio.to_thread.run_sync(lambda: sandbox.probe_sandbox().ok):
        return ProofReport(ProofRun(None, SANDBOX_MISSING), source=source)
    line = command_for_tests(command, [test_path])
    try:
        async with scratch_checkout(git_dir, commit) as tree:
            first = described(
                await sandbox.run_sandboxed(tree, line, time_limit=time_limit),
                command,
                keep=None,
            )
            fixed = None
            if fix is not None and first.exit_code not in (None, 0):
                if await anyio.to_thread.run_sync(_apply, tree, fix):
                    fixed = _run_of(
                        described(
                            await sandbox.run_sandboxed(tree, line, time_limit=time_limit),
                            command,
                            keep=0,
                        )
                    )
                else:
                    fixed = ProofRun(None, "the finding's fix could not be applied")
    except CheckoutFailed as exc:
        return ProofReport(ProofRun(None, str(exc)), source=source)
    tail = "\n".join(first.output.rstrip("\n").split("\n")[-OUTPUT_LINES:])[-OUTPUT_TAIL:]
    return ProofReport(_run_of(first), redact(tail), fixed, redact(source))


def _finding_json(f: ReviewFinding) -> dict[str, Any]:
    return f.model_dump(exclude_none=True)


def _block(name: str, text: str, fence: str) -> str:
    body = text.replace(fence, "[fence]")
    return f'<untrusted-data fence="{fence}" source="{name}">\n{body}\n</untrusted-data fence="{fence}">'


async def prove_findings(
    wf: Workflow,
    verified: list[ReviewFinding],
    settings: Mapping[str, Any],
    *,
    run_test: ProofTestRunner | None,
    pr: str,
    fence: str,
    context: str,
    known: list[dict[str, Any]],
) -> dict[int, dict[str, Any]]:
    """Phase "Prove": each chosen finding's proof (by index into `verified`), as the dict the
    runner reads (`status`, `reason`, `test`, `source`, `output`, `head`, `key`)."""
    command = str(settings.get("command") or "")
    head = str(settings.get("head") or "")
    proved = settings.get("proved")
    cache: Mapping[str, Any] = proved if isinstance(proved, dict) else {}
    plan = plan_proofs(
        [
            ProofCandidate(i, f.path, f.title, f.category, f.severity)
            for i, f in enumerate(verified)
        ],
        test_command=command or None,
        prove_severity=str(settings.get("severity") or "high"),
        max_proofs=int(settings.get("max") or 0),
        known=[(str(k.get("path")), str(k.get("title"))) for k in known if isinstance(k, dict)],
    )
    out: dict[int, dict[str, Any]] = {
        i: {"status": "not_tried", "reason": why} for i, why in plan.not_tried.items()
    }
    if not plan.prove:
        return out
    wf.phase("Prove")

    def prove(i: int) -> Callable[[], Awaitable[None]]:
        f = verified[i]
        finding = _finding_json(f)
        key = proof_key(head=head, finding=finding, test_command=command)

        async def run() -> None:
            reused = cache.get(key)
            if isinstance(reused, dict) and reused.get("status"):
                wf.log(f"reused the proof of {f.path}: {f.title}")
                out[i] = {**reused, "key": key}
                return
            if wf.budget_reached() is not None or run_test is None:
                why = "the run's budget was reached" if run_test else "no test can run here"
                out[i] = {"status": "not_tried", "reason": why}
                return
            out[i] = {
                **await _prove_one(wf, f, finding, run_test, command, pr, fence, context),
                "head": head,
                "key": key,
            }

        return run

    await wf.parallel([prove(i) for i in plan.prove])
    return out


async def _prove_one(
    wf: Workflow,
    f: ReviewFinding,
    finding: dict[str, Any],
    run_test: ProofTestRunner,
    command: str,
    pr: str,
    fence: str,
    context: str,
) -> dict[str, Any]:
    as_json = json.dumps(finding, ensure_ascii=False)
    wrote = await wf.agent(
        context_prompt(PROVE_TASK.format(pr=pr, command=command, finding=as_json), fence, context),
        agent_type="implementer",
        label=f"prove {f.path}:{f.start_line}",
        phase="Prove",
        isolation="worktree",
        schema=ProofTest,
    )
    test = ProofTest.model_validate(wrote.structured) if wrote.ok and wrote.structured else None
    commit = wrote.commits[-1] if wrote.commits else None
    if test is None or commit is None:
        done = outcome(test=None, on_head=None)
        return {"status": done.status, "reason": done.reason}
    fix = None
    if f.replacement is not None:
        fix = Fix(f.path, f.start_line, f.end_line, f.replacement)
    report = await run_test(commit, test.path, fix)
    test_id = f"{test.path}::{test.name}"[:300]
    if report.problem:
        return {"status": "not_tried", "reason": report.problem, "test": test_id}
    ruling: tuple[bool, str] | None = None
    if (
        report.on_head is not None
        and report.on_head.failed
        and report.on_head.exit_code not in NOT_STARTED
    ):
        ruled = await wf.agent(
            context_prompt(
                RULING_TASK.format(pr=pr, finding=as_json),
                fence,
                _block("the test", report.source, fence)
                + "\n\n"
                + _block("the test's output on the head", report.output, fence),
            ),
            agent_type="reviewer",
            label=f"rule on the proof of {f.path}:{f.start_line}",
            phase="Prove",
            schema=ProofRuling,
        )
        if ruled.ok and ruled.structured is not None:
            verdict = ProofRuling.model_validate(ruled.structured)
            ruling = (
                verdict.shows_finding,
                " ".join(verdict.reason.split())[:300] or "the output shows it",
            )
    done = outcome(test=test_id, on_head=report.on_head, ruling=ruling, with_fix=report.with_fix)
    return {
        "status": done.status,
        "reason": redact(done.reason),
        "test": test_id,
        "source": report.source,
        "output": report.output,
    }
