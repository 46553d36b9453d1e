"""A fake model that plays every role of the `fix` workflow, from the prompt, deterministically.

`fake_llm.respond_with(FixModel(...))`. It reads what a real model would read:

- planner ("Plan the change"): plans to change the files of the first `Edit` whose `when`
  text is in the prompt (the request and the issue are there), and asks the edit's own
  BLOCKED question when it has one (as a steered planner would);
- implementer ("Make the change"): writes that edit's files with `write_file`, one per turn,
  then commits; an edit with no files commits nothing and says why; an edit with `attack`
  first tries what an attacker would (each a tool call the app must refuse), then goes on;
- reviewer ("Check this change"): accepts every criterion, or rejects `request-met` when the
  edit says so, and writes the PR summary.

`calls` counts the requests per role; `diffs` keeps the change block each reviewer saw.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.llm import Reply, text, tool_call

_CHANGE = re.compile(
    r'<untrusted-data fence="[0-9a-f]+" source="change">\n(.*?)\n</untrusted-data fence=',
    re.DOTALL,
)


@dataclass(frozen=True)
class Edit:
    when: str
    files: dict[str, str]
    message: str = "Fix the greeting"
    plan: tuple[tuple[str, str], ...] = ()
    """(path, action) the planner reports; by default every file in `files`, as modify."""
    attack: tuple[tuple[str, dict[str, Any]], ...] = ()
    accept: bool = True
    blocked: dict[str, Any] | None = None
    """The planner's own BLOCKED question ({decision, why, options, default, risk})."""


def user_prompt(body: dict[str, Any]) -> str:
    for message in body.get("messages", []):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


def _turns(body: dict[str, Any]) -> int:
    return sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")


def structured(arguments: dict[str, Any]) -> Reply:
    return tool_call("structured_output", arguments)


@dataclass
class FixModel:
    edits: Sequence[Edit] = ()
    calls: Counter[str] = field(default_factory=Counter)
    diffs: list[str] = field(default_factory=list)
    tool_results: list[str] = field(default_factory=list)

    def edit_for(self, prompt: str) -> Edit | None:
        return next((e for e in self.edits if e.when in prompt), None)

    def __call__(self, body: dict[str, Any]) -> Reply:
        prompt = user_prompt(body)
        for message in body.get("messages", []):
            if message.get("role") == "tool":
                self.tool_results.append(str(message.get("content")))
        if prompt.startswith("Plan the change"):
            self.calls["plan"] += 1
            return self.plan(prompt)
        if prompt.startswith("Make the change"):
            self.calls["implement"] += 1
            return self.implement(body, prompt)
        if prompt.startswith("Check this change"):
            self.calls["review"] += 1
            return self.review(prompt)
        self.calls["other"] += 1
        return text("I do not know this task.")

    def plan(self, prompt: str) -> Reply:
        edit = self.edit_for(prompt)
        planned = (
            edit.plan
            if edit and edit.plan
            else tuple((p, "modify") for p in (edit.files if edit else {}))
        )
        result: dict[str, Any] = {
            "summary": "Change " + ", ".join(p for p, _ in planned)
            if planned
            else "Nothing to do.",
            "files": [{"path": p, "action": a, "why": "the request"} for p, a in planned],
            "tests": "",
            "assumptions": ["The request means the greeting text."],
        }
        if edit and edit.blocked:
            result["blocked"] = edit.blocked
        return structured(result)

    def implement(self, body: dict[str, Any], prompt: str) -> Reply:
        edit = self.edit_for(prompt)
        turn = _turns(body)
        steps: list[tuple[str, dict[str, Any]]] = list(edit.attack) if edit else []
        if edit and edit.files:
            steps += [("write_file", {"path": p, "content": c}) for p, c in edit.files.items()]
            steps.append(("commit", {"message": edit.message}))
        if turn < len(steps):
            name, arguments = steps[turn]
            return tool_call(name, arguments)
        if edit and edit.files:
            return text("Committed the change.")
        return text("Nothing needs to change: the code already does what the issue asks.")

    def review(self, prompt: str) -> Reply:
        found = _CHANGE.search(prompt)
        self.diffs.append(found.group(1) if found else "")
        edit = self.edit_for(prompt)
        accept = edit.accept if edit else True
        statuses = {"request-met": "accepted" if accept else "rejected"}
        return structured(
            {
                "summary": "The greeting now says hello.",
                "notes": "",
                "acceptance": {
                    "criteria": [
                        {
                            "id": cid,
                            "status": statuses.get(cid, "accepted"),
                            "evidence": ["app/greet.py:2"],
                            "note": "checked",
                        }
                        for cid in ("request-met", "nothing-unrelated", "tests")
                    ]
                },
            }
        )
