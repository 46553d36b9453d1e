"""The system prompt: agent role and instructions, the run's interaction policy, tool and result
rules."""

from __future__ import annotations

from collections.abc import Sequence

from bot.engine.types import AgentInvocation

TOOL_GUIDANCE = """<tools>
- Paths are relative to the repository root; `..`, absolute paths and links out of it are refused.
- Read before you conclude: use `grep` and `list_files` to find code, `read_file` to read it
  (long files come in pages: continue with `offset`).
- Tool errors are messages for you: read them and adjust instead of repeating the same call.
</tools>"""

WRITE_GUIDANCE = """<writing>
- You work in your own git worktree on your own branch. Edit with `edit_file` (exact text)
  or `write_file`; `run_command` runs checks in a sandbox without network access.
- When the work is done, `commit` it with a clear message. Nothing is pushed by you.
</writing>"""

STRUCTURED_GUIDANCE = """<result>
When you have finished, call `structured_output` exactly once, as your last action, with your
result; its arguments must match the tool's schema. Do not end without calling it.
</result>"""


def role_line(description: str) -> str:
    """An agent type's description (one line) as the prompt's first line; "" without one."""
    text = " ".join(description.split())
    return f"Your role: {text}" if text else ""


def system_prompt(call: AgentInvocation, tool_names: Sequence[str], *, with_schema: bool) -> str:
    """Agent type role and instructions, the run's interaction policy, tool guidance, result
    rules."""
    policy = call.interaction
    atype = call.agent_type
    parts = [role_line(atype.description), atype.instructions.strip(), policy.clarification_system]
    parts.append(
        "<guidance>\n"
        + policy.thinking_guidance
        + "\n"
        + policy.clarification_reminder
        + "\n</guidance>"
    )
    if tool_names:
        parts.append(TOOL_GUIDANCE)
    if any(name in tool_names for name in ("write_file", "edit_file", "commit")):
        parts.append(WRITE_GUIDANCE)
    if with_schema:
        parts.append(STRUCTURED_GUIDANCE)
    return "\n\n".join(p for p in parts if p)
