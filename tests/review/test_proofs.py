"""bot.workflows.review.proofs: a proof's test run in the sandbox, with what can go wrong.

Real git repositories and the real sandbox: a test that loops is stopped at its time limit, a
test that prints a token has it redacted, a command that cannot start is not a failure of the
test, a commit that edits the code under test proves nothing, and the finding's fix is applied
to the same checkout for the second run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.agents.sandbox import probe_sandbox
from bot.workflows.review.proofs import Fix, run_proof_test
from policies.proofs import outcome
from tests.fakes.gitrepo import commit_files, init_bare_repo

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not probe_sandbox().ok, reason="proofs run in the sandbox"),
]

CODE = "def half(x):\n    return x // 2\n"
TOKEN = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
COMMAND = "python3 -m unittest {tests}"


def repo(tmp_path: Path) -> tuple[Path, str]:
    bare = init_bare_repo(tmp_path / "r.git", {"m.py": CODE, "tests/__init__.py": ""})
    return bare, commit_files(bare, "main", {}, "start")


def with_test(bare: Path, head: str, body: str, branch: str = "bot/proof-1") -> str:
    source = f"import unittest\n\nimport m\n\n\nclass T(unittest.TestCase):\n{body}"
    return commit_files(bare, branch, {"tests/test_p.py": source}, "test", base=head)


async def run(bare: Path, head: str, commit: str, **kw: object) -> object:
    args: dict[str, object] = {"command": COMMAND, "time_limit": 20.0, "fix": None, **kw}
    return await run_proof_test(
        bare,
        head=head,
        commit=commit,
        test_path="tests/test_p.py",
        **args,  # type: ignore[arg-type]
    )


async def test_a_failing_test_and_the_fix_that_makes_it_pass(tmp_path: Path) -> None:
    bare, head = repo(tmp_path)
    commit = with_test(
        bare, head, "    def test_half(self):\n        self.assertEqual(m.half(3), 1.5)\n"
    )
    fix = Fix("m.py", 2, 2, "    return x / 2")
    report = await run(bare, head, commit, fix=fix)
    assert report.on_head is not None and report.on_head.exit_code == 1  # type: ignore[attr-defined]
    assert "AssertionError: 1 != 1.5" in report.output  # type: ignore[attr-defined]
    assert "m.half(3)" in report.source  # type: ignore[attr-defined]
    assert report.with_fix is not None and report.with_fix.exit_code == 0  # type: ignore[attr-defined]
    done = outcome(
        test="t",
        on_head=report.on_head,  # type: ignore[attr-defined]
        ruling=(True, "1 != 1.5"),
        with_fix=report.with_fix,  # type: ignore[attr-defined]
    )
    assert done.status == "reproduced"


async def test_a_test_that_passes_on_the_head(tmp_path: Path) -> None:
    bare, head = repo(tmp_path)
    commit = with_test(
        bare, head, "    def test_half(self):\n        self.assertEqual(m.half(4), 2)\n"
    )
    report = await run(bare, head, commit, fix=Fix("m.py", 2, 2, "    return x / 2"))
    assert report.on_head.exit_code == 0 and report.with_fix is None  # type: ignore[attr-defined]
    assert outcome(test="t", on_head=report.on_head).status == "not_reproduced"  # type: ignore[attr-defined]


async def test_a_test_that_loops_is_stopped_at_its_time_limit(tmp_path: Path) -> None:
    bare, head = repo(tmp_path)
    commit = with_test(
        bare, head, "    def test_loop(self):\n        while True:\n            pass\n"
    )
    report = await run(bare, head, commit, time_limit=2.0)
    assert report.on_head.timed_out and report.on_head.exit_code is None  # type: ignore[attr-defined]
    done = outcome(test="t", on_head=report.on_head)  # type: ignore[attr-defined]
    assert done.status == "not_reproduced" and "time limit" in done.reason


async def test_what_a_test_prints_is_redacted(tmp_path: Path) -> None:
    bare, head = repo(tmp_path)
    body = f"    def test_leak(self):\n        print('{TOKEN}')\n        self.fail('{TOKEN}')\n"
    commit = with_test(bare, head, body)
    report = await run(bare, head, commit)
    assert report.on_head.exit_code == 1  # type: ignore[attr-defined]
    assert TOKEN not in report.output and TOKEN not in report.source  # type: ignore[attr-defined]
    assert "AssertionError" in report.output  # type: ignore[attr-defined]


async def test_a_command_that_cannot_start_is_not_tried(tmp_path: Path) -> None:
    bare, head = repo(tmp_path)
    commit = with_test(bare, head, "    def test_half(self):\n        self.fail('x')\n")
    report = await run(bare, head, commit, command="no-such-runner {tests}")
    assert report.on_head.exit_code == 127  # type: ignore[attr-defined]
    done = outcome(test="t", on_head=report.on_head, ruling=(True, "x"))  # type: ignore[attr-defined]
    assert done.status == "not_tried" and "could not start" in done.reason


async def test_a_test_cannot_reach_the_network(tmp_path: Path) -> None:
    bare, head = repo(tmp_path)
    body = (
        "    def test_net(self):\n"
        "        import socket\n"
        "        socket.create_connection(('1.1.1.1', 80), timeout=3)\n"
    )
    report = await run(bare, head, with_test(bare, head, body))
    assert report.on_head.exit_code == 1  # type: ignore[attr-defined]
    assert "OSError" in report.output or "unreachable" in report.output  # type: ignore[attr-defined]


async def test_a_commit_that_edits_the_code_under_test_proves_nothing(tmp_path: Path) -> None:
    bare, head = repo(tmp_path)
    files = {"tests/test_p.py": "import m\n", "m.py": "def half(x):\n    raise ValueError\n"}
    commit = commit_files(bare, "bot/proof-2", files, "test", base=head)  # type: ignore[arg-type]
    report = await run(bare, head, commit)
    assert "other files" in report.problem and report.on_head is None  # type: ignore[attr-defined]
    elsewhere = commit_files(bare, "side", {"tests/test_p.py": "x\n"}, "root", base="main~1")
    report = await run(bare, head, elsewhere)
    assert "not a commit on top" in report.problem  # type: ignore[attr-defined]
