"""The workflow engine: phases, agents, parallel and pipeline fan-out, resumable runs."""

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
