"""An example workflow: a short tour of a repository for a newcomer.

Run it on the checkout you are in (read-only agents: nothing in the repository changes):

    bot workflow run examples/my_workflow.py --repo .
    bot workflow run examples/my_workflow.py --repo . --args '{"focus": "the tests"}'

A workflow file defines `meta` (its name and phases, shown as progress) and
`async def workflow(wf, args)`, where `args` is the JSON of `--args` (None without it).
`wf.agent(...)` runs one agent and never raises: a failed agent comes back with `ok=False` and
its `error`. `wf.parallel(...)` runs several at once; an agent's `ref` hands its result to a
later agent (`inputs=`), fenced as data. What the workflow returns (JSON) is the run's result;
an exception fails the run, and `bot workflow run` exits non-zero when the run or any of its
agents failed. Copy this file and change the prompts to make your own.
"""

from __future__ import annotations

from typing import Any

from bot.engine import Workflow, WorkflowMeta

meta = WorkflowMeta(
    name="repo-tour",
    description="A short tour of a repository: its layout, its entry points, where to start.",
    phases=("Survey", "Write up"),
)

TOUR = {
    "type": "object",
    "properties": {
        "summary": {"type": "string", "description": "What the project is, in a few sentences."},
        "start_here": {
            "type": "array",
            "description": "The files to read first, most useful first.",
            "items": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "why": {"type": "string"}},
                "required": ["path", "why"],
            },
        },
    },
    "required": ["summary", "start_here"],
}


async def workflow(wf: Workflow, args: Any) -> dict[str, Any]:
    focus = args.get("focus") if isinstance(args, dict) else None
    about = f" Pay most attention to {focus}." if isinstance(focus, str) and focus else ""

    wf.phase("Survey")
    surveys = await wf.parallel(
        [
            lambda: wf.agent(
                "Survey the layout of this repository: its top-level folders and what each "
                f"holds, citing `path:line`.{about}",
                agent_type="explorer",
                label="layout",
                phase="Survey",
            ),
            lambda: wf.agent(
                "Find the entry points of this repository: the programs, commands or modules "
                f"a user starts from, citing `path:line`.{about}",
                agent_type="explorer",
                label="entry-points",
                phase="Survey",
            ),
        ]
    )
    done = [s for s in surveys if s is not None and s.ok and s.ref]
    for survey in surveys:
        if survey is not None and not survey.ok:
            wf.log(f"{survey.label} failed: {survey.error}")

    wf.phase("Write up")
    tour = await wf.agent(
        "Write a short tour of this repository for a newcomer, from the surveys attached "
        "below: what the project is and which files to read first.",
        agent_type="advisor",
        label="write-up",
        phase="Write up",
        schema=TOUR,
        inputs=[s.ref for s in done if s.ref] or None,
    )
    if not tour.ok:
        raise RuntimeError(f"the write-up failed: {tour.error}")
    return {"tour": tour.structured, "surveys": len(done)}
