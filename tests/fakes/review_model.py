"""A fake model that plays every role of the review workflow, deterministically, from the prompt.

`fake_llm.respond_with(ReviewModel(rules))`. It reads what a real model would read:

- reviewer ("Review part of"): the fenced "changes" block; every added line that
  matches a `Rule` becomes a finding at that line (plus the rule's extra findings elsewhere
  in the file); with `generic=True`, the first added line of every file also becomes one,
  so real repositories get findings too; earlier findings it is asked to re-check are ruled
  on as the re-check role rules;
- verifier ("You are verifying"): keeps every candidate (a sloppy verifier: the app's own
  memory must stop repeats) and accepts its acceptance criteria;
- re-check ("Earlier reviews of"): a finding is still present when its rule's pattern is
  still in the code shown;
- implementer ("Apply the smallest fix"): writes the rule's fix with `write_file` (the file
  read through `files(path)`, the content at the head), commits, and says done;
- advisor ("Write the summary"): a short summary; with `blocked` set, that BLOCKED report
  instead, unless the prompt carries a maintainer's decision (a `decide` follow-up);
- prover ("Write the smallest test"): writes the rule's `proof` test with `write_file`,
  commits, and names it (a rule without one commits nothing);
- proof verifier ("A test was written"): the failure shows the finding when the test's
  output holds the rule's `proof.shows`.

`calls` counts the requests per role, `reviewed_paths` lists the files each reviewer
prompt covered, for assertions on what a follow-up review sent to the model, and `summaries`
keeps every advisor prompt.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.llm import Reply, text, tool_call

_SECTION = re.compile(
    r"^### (.+) \((?:added|removed|modified|renamed|copied|changed since)", re.MULTILINE
)
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")
_FIRST_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@", re.MULTILINE)
_BLOCK = re.compile(
    r'<(untrusted-data|data) fence="[0-9a-f]+" source="changes"[^>]*>\n(.*?)\n</\1 fence=',
    re.DOTALL,
)


@dataclass(frozen=True)
class Extra:
    """A further finding a rule reports elsewhere in the same file."""

    line: int
    title: str
    severity: str = "medium"
    category: str = "error-handling"


@dataclass(frozen=True)
class ProofScript:
    """The test a prover writes for a rule's finding, and what its failure output must say
    for the proof's verifier to rule that it shows the finding."""

    path: str
    name: str
    content: str
    shows: str


@dataclass(frozen=True)
class Rule:
    pattern: str
    title: str
    severity: str = "high"
    category: str = "bug"
    replacement: str | None = None
    extras: tuple[Extra, ...] = ()
    proof: ProofScript | None = None


def user_prompt(body: dict[str, Any]) -> str:
    for message in body.get("messages", []):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


def structured(arguments: dict[str, Any]) -> Reply:
    return tool_call("structured_output", arguments)


def added_lines(block: str) -> list[tuple[str, int, str]]:
    """(path, new-side line, text) of every added line in a changes block."""
    out: list[tuple[str, int, str]] = []
    path = ""
    line = 0
    for raw in block.split("\n"):
        section = _SECTION.match(raw)
        if section:
            path = section.group(1)
            continue
        hunk = _HUNK.match(raw)
        if hunk:
            line = int(hunk.group(1))
            continue
        if raw.startswith("+"):
            out.append((path, line, raw[1:]))
            line += 1
        elif raw.startswith("-"):
            continue
        elif raw.startswith(" ") or raw == "":
            line += 1
    return out


@dataclass
class ReviewModel:
    rules: Sequence[Rule] = ()
    files: Callable[[str], str | None] = lambda _path: None
    generic: bool = False
    outside: bool = False
    review_delay: float = 0.0
    calls: Counter[str] = field(default_factory=Counter)
    reviewed_paths: list[list[str]] = field(default_factory=list)
    focused: list[bool] = field(default_factory=list)
    blocked: dict[str, Any] | None = None
    summaries: list[str] = field(default_factory=list)

    def __call__(self, body: dict[str, Any]) -> Reply:
        prompt = user_prompt(body)
        if prompt.startswith("Review part of"):
            self.calls["review"] += 1
            return self.review(prompt)
        if prompt.startswith("You are verifying"):
            self.calls["verify"] += 1
            return self.verify(prompt)
        if prompt.startswith("Earlier reviews of"):
            self.calls["recheck"] += 1
            return self.recheck(prompt)
        if prompt.startswith("Apply the smallest fix"):
            self.calls["suggest"] += 1
            return self.suggest(body, prompt)
        if prompt.startswith("Write the smallest test"):
            self.calls["prove"] += 1
            return self.prove(body, prompt)
        if prompt.startswith("A test was written"):
            self.calls["ruling"] += 1
            return self.rule_on_proof(prompt)
        if prompt.startswith("Write the summary"):
            self.calls["summary"] += 1
            self.summaries.append(prompt)
            if self.blocked is not None and 'source="decision"' not in prompt:
                return structured(
                    {"summary": "The change needs a decision.", "blocked": self.blocked}
                )
            return structured({"summary": "The change adds functions; see the findings."})
        self.calls["other"] += 1
        return text("I do not know this task.")

    def review(self, prompt: str) -> Reply:
        match = _BLOCK.search(prompt)
        block = match.group(2) if match else ""
        paths = _SECTION.findall(block)
        self.reviewed_paths.append(paths)
        self.focused.append("This is a follow-up review" in prompt)
        findings: list[dict[str, Any]] = []
        seen_generic: set[str] = set()
        for path, line, code in added_lines(block):
            for rule in self.rules:
                if rule.pattern in code:
                    finding = {
                        "path": path,
                        "start_line": line,
                        "end_line": line,
                        "severity": rule.severity,
                        "category": rule.category,
                        "title": rule.title,
                        "explanation": f"`{path}:{line}`: {rule.title}.",
                    }
                    if rule.replacement is not None:
                        finding["replacement"] = rule.replacement
                    findings.append(finding)
                    for extra in rule.extras:
                        findings.append(
                            {
                                "path": path,
                                "start_line": extra.line,
                                "end_line": extra.line,
                                "severity": extra.severity,
                                "category": extra.category,
                                "title": extra.title,
                                "explanation": f"`{path}:{extra.line}`: {extra.title}.",
                            }
                        )
            if self.generic and path not in seen_generic and code.strip():
                seen_generic.add(path)
                findings.append(
                    {
                        "path": path,
                        "start_line": line,
                        "end_line": line,
                        "severity": "low",
                        "category": "other",
                        "title": f"Check the new line in {path}",
                        "explanation": f"`{path}:{line}` is new.",
                    }
                )
        if self.outside:
            # A finding about a line before the first hunk of the unit's first file: outside
            # the diff, so it belongs in the review's body.
            first = _FIRST_HUNK.search(block)
            if paths and first and int(first.group(1)) > 3:
                findings.append(
                    {
                        "path": paths[0],
                        "start_line": 1,
                        "end_line": 1,
                        "severity": "medium",
                        "category": "api",
                        "title": f"The module header of {paths[0]} no longer matches",
                        "explanation": f"`{paths[0]}:1`.",
                    }
                )
        result: dict[str, Any] = {"findings": findings}
        if "Findings to re-check (JSON):" in prompt:
            result["rechecks"] = self._still_present(
                prompt.split("Findings to re-check (JSON):")[1]
            )
        reply = structured(result)
        return Reply(calls=reply.calls, delay=self.review_delay) if self.review_delay else reply

    def verify(self, prompt: str) -> Reply:
        listed = prompt.split("Candidates (JSON):", 1)[1].split("\n", 2)[1]
        candidates = json.loads(listed)
        return structured(
            {
                "verdicts": [{"index": c["index"], "keep": True} for c in candidates],
                "acceptance": {
                    "criteria": [
                        {"id": cid, "status": "accepted", "evidence": ["read it"], "note": ""}
                        for cid in ("evidence", "in-change", "not-repeated")
                    ]
                },
            }
        )

    def recheck(self, prompt: str) -> Reply:
        return structured({"verdicts": self._still_present(prompt.split("Findings (JSON):", 1)[1])})

    def _still_present(self, listing: str) -> list[dict[str, Any]]:
        """A verdict on each finding of the JSON line that opens `listing`: still present when
        its rule's pattern is in the code shown after it (a finding of no rule always is)."""
        listed, code = listing.split("\n", 2)[1:]
        verdicts = []
        for item in json.loads(listed):
            rule = next((r for r in self.rules if r.title == item["title"]), None)
            present = rule is None or rule.pattern in code
            verdicts.append({"fingerprint": item["fingerprint"], "still_present": present})
        return verdicts

    def suggest(self, body: dict[str, Any], prompt: str) -> Reply:
        turns = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        finding = json.loads(prompt.split("Finding (JSON):", 1)[1].split("\n", 2)[1])
        if turns == 0:
            current = self.files(finding["path"])
            if current is None or finding.get("replacement") is None:
                return text("I cannot fix this within those lines.")
            lines = current.split("\n")
            start, end = finding["start_line"], finding["end_line"]
            fixed = lines[: start - 1] + finding["replacement"].split("\n") + lines[end:]
            return tool_call("write_file", {"path": finding["path"], "content": "\n".join(fixed)})
        if turns == 1:
            return tool_call("commit", {"message": f"Fix: {finding['title']}"})
        return text("Committed the fix.")

    def _rule_of(self, prompt: str) -> Rule | None:
        finding = json.loads(prompt.split("Finding (JSON):", 1)[1].split("\n", 2)[1])
        return next((r for r in self.rules if r.title == finding.get("title")), None)

    def prove(self, body: dict[str, Any], prompt: str) -> Reply:
        turns = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        rule = self._rule_of(prompt)
        if rule is None or rule.proof is None:
            return text("No test can show this finding.")
        script = rule.proof
        if turns == 0:
            return tool_call("write_file", {"path": script.path, "content": script.content})
        if turns == 1:
            return tool_call("commit", {"message": f"Test: {rule.title}"})
        return structured({"path": script.path, "name": script.name})

    def rule_on_proof(self, prompt: str) -> Reply:
        rule = self._rule_of(prompt)
        output = prompt.split('source="the test\'s output on the head">', 1)[-1]
        shows = rule is not None and rule.proof is not None and rule.proof.shows in output
        reason = f"the output shows {rule.proof.shows}" if shows and rule and rule.proof else ""
        return structured({"shows_finding": shows, "reason": reason or "another failure"})


CALC_RULES = (
    Rule(
        "return div(total, len(values))",
        "mean divides by zero on an empty list",
        replacement="    return div(total, max(len(values) - 1, 1))",
        extras=(Extra(12, "div raises ZeroDivisionError for b == 0, which mean passes on"),),
    ),
    Rule(
        "return max(hi, min(lo, x))",
        "clamp swaps its lower and upper bounds",
        replacement="    return max(lo, min(hi, x))",
    ),
)
