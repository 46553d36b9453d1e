"""The `review.*` keys of `.github/bot.yml` that the review runner reads, each shown doing what
`docs/bot.yml.example` says, on the `calc` pull request's real git objects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from bot.agents import sandbox
from bot.github.models import GitRef, PullRequest, User
from bot.workflows.review import diffs
from bot.workflows.review.runner import conclude, limits_of, prepare
from policies.config import ReviewConfig, parse_repo_config
from policies.review_plan import changed_file, plan_review
from policies.review_state import ReviewState
from tests.fakes.gitrepo import commit_files
from tests.review._calc import CalcRepo, build_calc

pytestmark = pytest.mark.anyio


@pytest.fixture
def calc(tmp_path: Path) -> CalcRepo:
    return build_calc(tmp_path)


async def reasons(calc: CalcRepo, text: str) -> dict[str, str]:
    """Each changed file of the pull request: "reviewed", or why the plan leaves it out."""
    changes = await diffs.pull_changes(calc.git_dir, calc.base, calc.head1)
    config = parse_repo_config(text).review
    plan = plan_review([changed_file(f) for f in changes.files], limits_of(config))
    out = {path: "reviewed" for path in plan.paths}
    out.update({s.path: s.reason for s in plan.skipped})
    return out


async def test_paths_ignore_and_ignore_paths_choose_the_files(calc: CalcRepo) -> None:
    everything = await reasons(calc, "")
    assert everything["calc/ops.py"] == everything["README.md"] == "reviewed"
    chosen = await reasons(
        calc,
        "review:\n  paths: ['calc/**', 'tests/**']\n  ignore: [calc/cli.py]\n"
        "  ignore_paths: ['tests/**']\n",
    )
    assert chosen["calc/ops.py"] == "reviewed"
    assert chosen["README.md"] == "excluded by review.paths"
    assert chosen["calc/cli.py"] == "excluded by review.ignore"
    assert chosen["tests/test_mean.py"] == "excluded by review.ignore"  # the former name


async def test_max_files_and_max_tokens_put_the_rest_over_budget(calc: CalcRepo) -> None:
    one = await reasons(calc, "review:\n  max_files: 1\n")
    assert list(one.values()).count("reviewed") == 1
    assert set(one.values()) == {"reviewed", "over budget"}
    none = await reasons(calc, "review:\n  max_tokens: 1000\n")  # less than one unit costs
    assert set(none.values()) == {"over budget"}


FIXED = "    return max(lo, min(hi, x))"
GOOD = "python3 -c 'import calc.ops as o; assert o.clamp(5, 0, 3) == 3'"
BAD = "python3 -c 'import calc.ops as o; assert o.clamp(5, 0, 3) == 5'"


async def concluded(calc: CalcRepo, config: ReviewConfig) -> tuple[str | None, str]:
    """A verified finding on `clamp` with a proven-or-not fix: (its suggestion, its proof)."""
    pull = PullRequest(
        id=1,
        number=1,
        head=GitRef(ref="topic", sha=calc.head1),
        base=GitRef(ref="main", sha=calc.base),
        user=User(login="alice"),
    )
    source = await diffs.read_file(calc.git_dir, calc.head1, "calc/ops.py")
    assert source is not None
    branch = f"bot/suggest-{config.check_timeout}"
    lines = source.split("\n")
    lines[21] = FIXED
    commit_files(calc.git_dir, branch, {"calc/ops.py": "\n".join(lines)}, "fix", base=calc.head1)
    prep = await prepare(
        calc.git_dir,
        pull=pull,
        state=ReviewState(),
        config=config,
        full=False,
        fence="F",
        author_trusted=False,
    )
    finding: dict[str, Any] = {
        "path": "calc/ops.py",
        "start_line": 22,
        "end_line": 22,
        "severity": "high",
        "category": "bug",
        "title": "clamp swaps its bounds",
        "explanation": "`calc/ops.py:22`",
        "replacement": FIXED,
        "suggestion": {"ok": True, "branch": branch},
    }
    done = await conclude(calc.git_dir, prep, {"review": {"findings": [finding]}}, config=config)
    (shown,) = [s for s, _ in done.inline] + done.outside + done.overflow
    return shown.suggestion, shown.proof


@pytest.mark.skipif(not sandbox.probe_sandbox().ok, reason="bubblewrap runs the check command")
async def test_check_command_decides_a_suggestion_within_check_timeout(
    calc: CalcRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    await anyio.run_process(
        ["git", f"--git-dir={calc.git_dir}", "config", "extensions.worktreeConfig", "true"]
    )
    limits: list[float] = []
    real = sandbox.run_sandboxed

    async def recording(*args: Any, time_limit: float, **kwargs: Any) -> Any:
        limits.append(time_limit)
        return await real(*args, time_limit=time_limit, **kwargs)

    monkeypatch.setattr(sandbox, "run_sandboxed", recording)
    suggestion, proof = await concluded(calc, ReviewConfig(check_command=GOOD, check_timeout=42))
    assert suggestion == FIXED and "passed" in proof
    suggestion, proof = await concluded(calc, ReviewConfig(check_command=BAD))  # 300 s
    assert suggestion is None and "failed" in proof
    assert limits == [42.0, 300.0]  # `check_timeout`, then its default
