"""The workflow engine: phases, agents, parallel and pipeline fan-out, resumable runs.

A workflow is a module with `meta = WorkflowMeta(name, description, phases)` and
`async def workflow(wf, args)`; `wf` offers `phase`, `log`, `usage`, `agent`, `parallel`,
`pipeline` and `args` (see `bot.engine.workflow.Workflow`). The engine resolves each
`wf.agent(...)` into an `AgentInvocation` and awaits `runner.run(call)`:

    engine = Engine(runner, data_dir=settings.data_dir)
    details = await engine.run(meta, workflow, args, interaction=policy, repo=git_dir, base=sha)
    print(build_result_message(details, engine.store.run_dir(details.run_id)))

Background runs: `async with Engine(...) as engine:` then `engine.start(...)`,
`engine.status(run_id=None)`, `await engine.wait(run_id)`, `await engine.stop(run_id)`;
`engine.recover_stale()` at start-up. Artifacts live in `<data_dir>/runs/<run id>/`.
Writing agents' sparse worktrees: `bot.engine.worktree` (`materialize`, `materialize_all`).
"""

from bot.engine.artifacts import RunNotFound
from bot.engine.calls import AgentResult
from bot.engine.details import AgentDetails, PhaseMeta, RunDetails
from bot.engine.engine import Engine
from bot.engine.report import build_result_message
from bot.engine.sanitize import strip_terminal
from bot.engine.workflow import Workflow, WorkflowLoadError, WorkflowMeta, load_workflow_file

__all__ = [
    "AgentDetails",
    "AgentResult",
    "Engine",
    "PhaseMeta",
    "RunDetails",
    "RunNotFound",
    "Workflow",
    "WorkflowLoadError",
    "WorkflowMeta",
    "build_result_message",
    "load_workflow_file",
    "strip_terminal",
]
