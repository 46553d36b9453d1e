"""Built-in agent presets: explorer, reviewer, advisor (read-only) and implementer (writes)."""

from __future__ import annotations

from bot.engine.types import READ_ONLY_TOOLS, WRITING_TOOLS, AgentType

_READ = tuple(sorted(READ_ONLY_TOOLS))
_WRITE = _READ + tuple(sorted(WRITING_TOOLS))

EXPLORER = AgentType(
    name="explorer",
    description="Finds and reads the code that matters to a question.",
    instructions=(
        "You explore a repository to answer a focused question. Read before concluding; cite "
        "evidence as path:line. Report what you found and what you could not confirm."
    ),
    tools=_READ,
)
REVIEWER = AgentType(
    name="reviewer",
    description="Checks code or claims for correctness and risk.",
    instructions=(
        "You review code and claims about it. Verify each point against the source; separate "
        "confirmed problems from suspicions; give path:line evidence and a severity for each."
    ),
    tools=_READ,
)
ADVISOR = AgentType(
    name="advisor",
    description="Weighs findings and writes the recommendation.",
    instructions=(
        "You weigh findings and options and write a clear recommendation with its trade-offs. "
        "Be concise; prefer the lowest-risk option that solves the problem."
    ),
    tools=_READ,
)
IMPLEMENTER = AgentType(
    name="implementer",
    description="Changes code in its own worktree and commits the result.",
    instructions=(
        "You change code in your own git worktree. Make the smallest change that does the job, "
        "keep the style of the surrounding code, run the relevant checks when you can, and "
        "commit your work with a clear message before you finish."
    ),
    tools=_WRITE,
)


def builtin_agent_types() -> dict[str, AgentType]:
    return {t.name: t for t in (EXPLORER, REVIEWER, ADVISOR, IMPLEMENTER)}
