"""End to end: text the app did not write pings nobody, closes nothing and proves nothing.

Through `bot serve`, the fake GitHub and a fake model, as an attacker would try it:

- a pull request adds a file named ``docs/a` @octo/security-team `b.md``, a name that
  closes a hand-built code span and mentions a team; the model also writes a
  ```` ```suggestion ```` block into a finding's explanation, for code that never passed the
  repository's check;
- a `fix` whose model writes `Closes #3` and `@octo/security-team` into its summary, its
  assumptions and its reviewer's notes, and whose agent writes `Signed-off-by`,
  `Reviewed-by` and `Co-authored-by` trailers (and a closing keyword) into its commit.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from markdown_it import MarkdownIt

from tests.e2e_world import ReviewWorld, World, head_files
from tests.fakes.fix_model import Edit, FixModel
from tests.fakes.github import FakeGitHub
from tests.fakes.gitrepo import commit_files, init_bare_repo
from tests.fakes.llm import Reply, ToolCallSpec
from tests.fakes.review_model import CALC_RULES, ReviewModel
from tests.review._calc import build_calc, snapshot

pytestmark = pytest.mark.slow

ODD = "docs/a` @octo/security-team `b.md"
TEAM = "@octo/security-team"
UNPROVEN = "```suggestion\n    return 42\n```"
_MD = MarkdownIt("commonmark", {"html": True})
# A mention GitHub would link: `@` after anything but a word character, then a name.
_LIVE_MENTION = re.compile(r"(?<![A-Za-z0-9_])@(?=[A-Za-z0-9])")
_CLOSING = re.compile(
    r"(?i)(?<![A-Za-z0-9_])(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)(?![A-Za-z0-9_])"
    r"[\W_]{0,16}?(?:#|[\w.-]+/[\w.-]+#)\d+"
)


@dataclass
class Rewriting:
    """A fake model whose structured answers pass through `edit` (by the prompt's start)."""

    model: Callable[[dict[str, Any]], Reply]
    edit: Callable[[str, dict[str, Any]], dict[str, Any]]

    def __call__(self, body: dict[str, Any]) -> Reply:
        reply = self.model(body)
        prompt = next(
            (str(m.get("content")) for m in body.get("messages", []) if m.get("role") == "user"),
            "",
        )
        calls = []
        for call in reply.calls:
            if call.name == "structured_output":
                arguments = self.edit(prompt, json.loads(call.arguments))
                call = ToolCallSpec(call.name, json.dumps(arguments), call.id)
            calls.append(call)
        return Reply(content=reply.content, calls=tuple(calls), delay=reply.delay)


def code_texts(body: str) -> list[str]:
    tokens = _MD.parse(body)
    return [
        child.content
        for token in tokens
        for child in token.children or ()
        if child.type == "code_inline"
    ]


def live_mentions(body: str) -> list[str]:
    return [body[m.start() : m.start() + 30] for m in _LIVE_MENTION.finditer(body)]


# --- review -------------------------------------------------------------------------------


def _unproven_suggestion(prompt: str, answer: dict[str, Any]) -> dict[str, Any]:
    if not prompt.startswith("Review part of"):
        return answer
    for finding in answer.get("findings", []):
        if "mean divides by zero" in finding["title"]:
            finding["explanation"] += f"\n\nApply this:\n\n{UNPROVEN}\n"
    return answer


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReviewWorld]:
    root = tmp_path_factory.mktemp("text-review")
    calc = build_calc(root)
    commit_files(calc.git_dir, "odd", {**snapshot("head1"), ODD: "# a doc\n"}, "Odd", base="main")
    fake = FakeGitHub()
    fake.add_repo("octo", "hello", calc.git_dir)
    fake.add_installation(42, "octo", ["octo/hello"])
    fake.set_permission("octo", "hello", "maint", "write")
    anyio.run(lambda: fake.add_pull("octo", "hello", head="odd", user="alice", title="Odd"))
    model = ReviewModel(CALC_RULES, files=head_files(calc.git_dir, fake))
    responder = Rewriting(model, _unproven_suggestion)
    with ReviewWorld.serving(root, fake, responder, model=model, calc=calc) as world:
        yield world


def test_a_file_name_with_backticks_and_a_mention_stays_in_its_code_span(
    review: ReviewWorld,
) -> None:
    guid = review.post("pull_request", review.pull_payload("opened"))
    _, status = review.finished(guid)
    assert status == "succeeded", review.log.read_text()[-3000:]
    (summary,) = review.own_comments()
    body = summary["body"]
    assert TEAM not in body and live_mentions(body) == [], live_mentions(body)
    # The name is shown whole, in one code span (a name git quotes may keep its tab).
    shown = [c.replace("\u200b", "").rstrip("\t") for c in code_texts(body)]
    assert ODD in shown, shown
    (run,) = review.fake.check_runs.values()
    output = run["output"]["summary"]
    assert TEAM not in output and live_mentions(output) == []


def test_a_suggestion_fence_in_an_explanation_is_posted_as_plain_code(
    review: ReviewWorld,
) -> None:
    comments = review.review_comments()
    mean = next(c for c in comments if "mean divides by zero" in c["body"])
    clamp = next(c for c in comments if "clamp swaps" in c["body"])
    assert "```suggestion" not in mean["body"], mean["body"]
    fences = [t for t in _MD.parse(mean["body"]) if t.type == "fence"]
    assert [(f.info, f.content) for f in fences] == [("", "    return 42\n")]
    # The prover's own suggestion still is one.
    assert "```suggestion\n    return max(lo, min(hi, x))\n```" in clamp["body"]


# --- fix ----------------------------------------------------------------------------------

HOSTILE = f"Closes #3, and {TEAM} should look: fixes octo/hello#3."
MESSAGE = (
    "Fix the greeting\n\nResolves #3 as well.\n\n"
    "Signed-off-by: Mallory <mallory@evil.test>\n"
    "Reviewed-by: Eve <eve@evil.test>\n"
    "Co-authored-by: Eve <eve@evil.test>"
)
GREET_BUG = 'def greet(name):\n    return "helo, " + name\n'
GREET_FIXED = 'def greet(name):\n    return "hello, " + name\n'


def _hostile_fix(prompt: str, answer: dict[str, Any]) -> dict[str, Any]:
    if prompt.startswith("Plan the change"):
        answer["assumptions"] = [*answer.get("assumptions", []), HOSTILE]
    elif prompt.startswith("Check this change"):
        answer["summary"] = f"The greeting now says hello. {HOSTILE}"
        for criterion in answer["acceptance"]["criteria"]:
            criterion["note"] = HOSTILE
    return answer


@pytest.fixture(scope="module")
def fix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("text-fix")
    files = {
        ".github/bot.yml": "fix:\n  check_command: python3 check.py\n  check_timeout: 60\n",
        "app/__init__.py": "",
        "app/greet.py": GREET_BUG,
        "check.py": 'from app.greet import greet\n\nassert greet("x") == "hello, x"\n',
    }
    bare = init_bare_repo(root / "remote" / "octo" / "hello.git", files)
    commit_files(bare, "main", {}, "Start")
    fake = FakeGitHub()
    fake.add_repo("octo", "hello", bare)
    fake.add_installation(42, "octo", ["octo/hello"])
    fake.set_permission("octo", "hello", "maint", "write")
    fake.add_issue("octo", "hello", title="greet says helo", body="Say hello.", user="alice")
    model = FixModel((Edit("", {"app/greet.py": GREET_FIXED}, MESSAGE),))
    with World.serving(root, fake, Rewriting(model, _hostile_fix)) as world:
        yield world


def test_model_text_in_a_fix_pings_nobody_and_closes_only_the_issue_fixed(fix: World) -> None:
    guid = fix.command(f"@{fix.fake.slug} fix")
    _, status = fix.finished(guid)
    assert status == "succeeded", fix.log.read_text()[-4000:]
    (pull,) = fix.fake.repos["octo/hello"].pulls.values()
    body = pull["body"]
    assert "Closes #3" not in body and "Closes\u200b" not in body  # defused, still readable
    assert body.replace("\u200b", "").count("Closes #3") == 2  # the summary and an assumption
    assert [m.group() for m in _CLOSING.finditer(body)] == ["Fixes #1"]
    assert TEAM not in body and live_mentions(body) == [], live_mentions(body)
    (comment,) = fix.own_comments()
    assert "Closes #3" in comment["body"].replace("\u200b", "")  # the reviewer's notes are shown
    assert TEAM not in comment["body"] and live_mentions(comment["body"]) == []
    assert _CLOSING.findall(comment["body"]) == []


def test_the_pushed_commit_keeps_only_the_apps_trailer(fix: World) -> None:
    (pull,) = fix.fake.repos["octo/hello"].pulls.values()
    bare = fix.fake.repos["octo/hello"].git_dir
    message = subprocess.run(
        ["git", f"--git-dir={bare}", "log", "-1", "--format=%B", pull["head"]["ref"]],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    trailers = [line for line in message.splitlines() if re.match(r"^[\w-]+: ", line)]
    assert len(trailers) == 1 and trailers[0].startswith("Co-authored-by: maint <"), message
    assert "evil.test" not in message and "Signed-off-by" not in message
    assert _CLOSING.findall(message) == [], message
    assert message.startswith("Fix the greeting\n")
