"""bot.workflows.review.evidence on the `calc` pull request's real git objects: other Apps' CI
read from the fake GitHub through the real client, and `review.lint_command` run in the real
sandbox, with the bad inputs: a command that hangs, floods, writes outside its checkout, or
meets a file name made to break out of its quoting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.agents import sandbox
from bot.github.models import GitRef, PullRequest, User
from bot.workflows.review import evidence
from bot.workflows.review.evidence import Gathered, gather, read_ci, run_lint, with_lint_note
from bot.workflows.review.render import comment_body
from bot.workflows.review.runner import Prepared, conclude, prepare
from policies.config import ReviewConfig, parse_repo_config
from policies.review_state import ReviewState
from tests.fakes.github import FakeGitHub
from tests.fakes.gitrepo import commit_files
from tests.github._client_world import make_app
from tests.review._calc import CalcRepo, build_calc

pytestmark = pytest.mark.anyio

OPS = "calc/ops.py"
needs_sandbox = pytest.mark.skipif(
    not sandbox.probe_sandbox().ok, reason="the sandbox (bubblewrap) is not available here"
)


@pytest.fixture
def calc(tmp_path: Path) -> CalcRepo:
    return build_calc(tmp_path)


@pytest.fixture
def fake(calc: CalcRepo) -> FakeGitHub:
    fake = FakeGitHub()
    fake.add_repo("octo", "hello", calc.git_dir)
    fake.add_installation(42, "octo", ["octo/hello"])
    return fake


def pull_of(calc: CalcRepo, head: str | None = None) -> PullRequest:
    return PullRequest(
        id=1,
        number=1,
        head=GitRef(ref="topic", sha=head or calc.head1),
        base=GitRef(ref="main", sha=calc.base),
        user=User(login="alice"),
    )


async def prepared(calc: CalcRepo, config: ReviewConfig, head: str | None = None) -> Prepared:
    return await prepare(
        calc.git_dir,
        pull=pull_of(calc, head),
        state=ReviewState(),
        config=config,
        full=False,
        fence="F",
        author_trusted=False,
    )


def annotation(line: int, path: str = OPS, message: str = "bad") -> dict[str, Any]:
    return {"path": path, "start_line": line, "annotation_level": "failure", "message": message}


def ruff_check(fake: FakeGitHub, head: str, notes: list[dict[str, Any]], **kw: Any) -> None:
    fake.add_foreign_check_run(
        "octo/hello",
        head,
        name=kw.pop("name", "ruff"),
        app_slug=kw.pop("app_slug", "github-actions"),
        app_id=15368,
        conclusion=kw.pop("conclusion", "failure"),
        annotations=notes,
    )


async def test_other_apps_checks_and_statuses_are_read_and_the_apps_own_left_out(
    calc: CalcRepo, fake: FakeGitHub
) -> None:
    client = make_app(fake).installation(42, "octo", "hello")
    await client.create_check_run(
        name="repo-agent: review", head_sha=calc.head1, conclusion="failure"
    )
    many = [annotation(18, message=f"hit {n}") for n in range(120)]  # 121: three pages
    ruff_check(fake, calc.head1, [annotation(5, "README.md"), *many])
    ruff_check(fake, calc.head1, [annotation(22)], name="mypy", conclusion="success")
    ruff_check(fake, calc.base, [annotation(22)], name="old")  # another commit's
    fake.add_commit_status("octo/hello", calc.head1, context="ci/build", state="failure")
    fake.add_commit_status("octo/hello", calc.head1, context="ci/build", state="success")
    fake.add_commit_status(
        "octo/hello", calc.head1, context="review", state="failure", creator=fake.bot_login
    )

    found = await read_ci(client, calc.head1, changed=frozenset({OPS}), app_slug=fake.slug)

    assert [c.name for c in found.checks] == ["ruff", "mypy"]
    assert [(s.context, s.state) for s in found.statuses] == [("ci/build", "success")]
    assert len(found.annotations) == 50  # the first 50 on the pull request's files
    assert {(name, n.path, n.start_line) for name, n in found.annotations} == {("ruff", OPS, 18)}
    pages = [c for c in fake.calls if c.path.endswith("/annotations")]
    assert len(pages) == 3  # GitHub serves at most 50 annotations a page, whatever is asked


async def test_ci_that_github_refuses_costs_the_review_only_that_part(
    calc: CalcRepo, fake: FakeGitHub
) -> None:
    ruff_check(fake, calc.head1, [annotation(18)])
    fake.add_commit_status("octo/hello", calc.head1, context="ci/build", state="failure")
    # A token without `statuses` (an installation that did not accept the new permission).
    narrowed = {"contents": "read", "checks": "write", "pull_requests": "write"}
    client = make_app(fake).installation(42, "octo", "hello", permissions=narrowed)
    found = await read_ci(client, calc.head1, changed=frozenset({OPS}), app_slug=fake.slug)
    assert [c.name for c in found.checks] == ["ruff"] and found.statuses == ()
    assert [c.status for c in fake.calls if c.path.endswith("/status")] == [403]
    fake.fail_next("GET", "*/check-runs", 502, times=10)
    nothing = await read_ci(client, calc.head1, changed=frozenset({OPS}), app_slug=fake.slug)
    assert nothing.checks == () and nothing.annotations == ()


async def test_a_finding_on_lines_ci_flagged_says_ci_agrees(
    calc: CalcRepo, fake: FakeGitHub
) -> None:
    ruff_check(fake, calc.head1, [annotation(18, message="<b>@alice</b> division by zero")])
    client = make_app(fake).installation(42, "octo", "hello")
    config = ReviewConfig()
    prep = await prepared(calc, config)
    found = await gather(client, calc.git_dir, prep, config, fence="F", app_slug=fake.slug)
    assert 'source="ci"' in found.block and "untrusted-data" in found.block
    assert f"{OPS}:18 [ruff, failure]" in found.block and "<b>" not in found.block
    assert "@\u200balice" in found.block
    prep.ci = found.ci
    findings = [
        {"path": OPS, "start_line": 18, "end_line": 18, "severity": "high", "category": "bug",
         "title": "mean divides by zero", "explanation": "x"},
        {"path": OPS, "start_line": 22, "end_line": 22, "severity": "high", "category": "bug",
         "title": "clamp swaps its bounds", "explanation": "y"},
    ]  # fmt: skip
    done = await conclude(calc.git_dir, prep, {"review": {"findings": findings}}, config=config)
    bodies = {s.title: comment_body(s) for s, _ in done.inline}
    assert "CI agrees: `ruff`" in bodies["mean divides by zero"]
    assert "CI agrees" not in bodies["clamp swaps its bounds"]


LINT = "printf '%s\\n' 'calc/ops.py:18:5: F821 changed' 'calc/ops.py:5:1: E1 unchanged'"


@needs_sandbox
async def test_lint_hits_on_changed_lines_become_the_units_candidates(
    calc: CalcRepo, fake: FakeGitHub
) -> None:
    client = make_app(fake).installation(42, "octo", "hello")
    config = parse_repo_config(f'review:\n  lint_command: "{LINT}"\n').review
    prep = await prepared(calc, config)
    found = await gather(client, calc.git_dir, prep, config, fence="F", app_slug=fake.slug)
    assert [(c["path"], c["start_line"], c["title"]) for c in found.lint] == [
        (OPS, 18, "printf: F821 changed")
    ]
    (unit,) = [u for u in prep.units if OPS in u["paths"]]
    assert unit["lint"] == [dict(found.lint[0])]
    assert all(u["lint"] == [] for u in prep.units if OPS not in u["paths"])


async def test_lint_auto_skips_a_tool_ci_already_ran_and_always_runs_it(
    calc: CalcRepo, fake: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[tuple[str, float]] = []

    async def recording(git_dir: Path, commit: str, command: str, **kw: Any) -> Any:
        ran.append((command, kw["time_limit"]))
        return await real(git_dir, commit, "true", **kw)

    real = evidence.check_commit
    monkeypatch.setattr(evidence, "check_commit", recording)
    ruff_check(fake, calc.head1, [], name="Lint (ruff)", conclusion="success")
    client = make_app(fake).installation(42, "octo", "hello")
    for text in ("", "  lint: auto\n", "  lint: always\n  lint_timeout: 17\n"):
        config = parse_repo_config(f"review:\n  lint_command: ruff check {{files}}\n{text}").review
        found = await gather(
            client,
            calc.git_dir,
            await prepared(calc, config),
            config,
            fence="F",
            app_slug=fake.slug,
        )
        if "always" not in text:
            assert (
                found.lint_note == "not run: the check `Lint (ruff)` already reported on this head"
            )
    assert len(ran) == 1 and ran[0][1] == 17.0
    assert ran[0][0].startswith("ruff check ") and "calc/ops.py" in ran[0][0]


@needs_sandbox
async def test_lint_command_that_hangs_is_stopped_at_its_time_limit(calc: CalcRepo) -> None:
    changed = {OPS: frozenset({18})}
    found, note = await run_lint(calc.git_dir, calc.head1, "sleep 60", changed, time_limit=1)
    assert found == [] and note == "stopped after 1 s (`review.lint_timeout`); nothing of it used"
    assert with_lint_note("Summary.", Gathered(lint_note=note)) == f"Summary.\n\n**Lint:** {note}."
    assert with_lint_note("Summary.", None) == with_lint_note("Summary.", Gathered()) == "Summary."


@needs_sandbox
async def test_lint_command_that_floods_is_cut_and_still_read(calc: CalcRepo) -> None:
    flood = "yes 'calc/ops.py:18:1: F1 flood' | head -c 100000000"
    changed = {OPS: frozenset({18})}
    found, note = await run_lint(calc.git_dir, calc.head1, flood, changed, time_limit=60)
    assert [c["title"] for c in found] == [
        "yes: F1 flood"
    ] and note == "`yes` reported 1 hit on changed lines"


def existing(*paths: Path) -> list[Path]:
    return [p for p in paths if p.exists()]


@needs_sandbox
async def test_lint_command_cannot_write_outside_its_checkout(
    calc: CalcRepo, tmp_path: Path
) -> None:
    outside = tmp_path / "escaped"
    before = sorted(p.name for p in calc.git_dir.iterdir())
    command = (
        f"echo x > {outside}; echo x > ../escaped; echo x > /escaped; "
        f"echo x > {calc.git_dir}/hooks/pre-commit; echo 'calc/ops.py:18: F1 ok'"
    )
    found, _ = await run_lint(
        calc.git_dir, calc.head1, command, {OPS: frozenset({18})}, time_limit=60
    )
    assert [c["title"] for c in found] == ["echo: F1 ok"]
    assert existing(outside, calc.git_dir / "hooks" / "pre-commit", Path("/escaped")) == []
    assert sorted(p.name for p in calc.git_dir.iterdir()) == before


@needs_sandbox
async def test_a_file_name_cannot_break_out_of_files(calc: CalcRepo) -> None:
    name = "x$(echo INJECTED)`echo TOO`;echo AND.py"
    head = commit_files(
        calc.git_dir,
        "odd",
        {name: "print(1)\n", "-rf.py": "print(2)\n"},
        "odd names",
        base=calc.head1,
    )
    command = 'for f in {files}; do echo "$f:1: seen"; done'
    changed = {name: frozenset({1}), "-rf.py": frozenset({1})}
    found, _ = await run_lint(calc.git_dir, head, command, changed, time_limit=60)
    assert sorted(c["path"] for c in found) == sorted([name, "-rf.py"])
    assert not any("INJECTED" in c["title"].replace(name, "") for c in found)


async def test_annotations_are_read_from_ten_flagged_checks_at_most(
    calc: CalcRepo, fake: FakeGitHub
) -> None:
    ruff_check(fake, calc.head1, [annotation(18)], name="passing", conclusion="success")
    for n in range(12):
        ruff_check(fake, calc.head1, [annotation(18)], name=f"shard {n}")
    client = make_app(fake).installation(42, "octo", "hello")
    found = await read_ci(client, calc.head1, changed=frozenset({OPS}), app_slug=fake.slug)
    assert len(found.checks) == 13
    assert [name for name, _ in found.annotations] == [f"shard {n}" for n in range(10)]
    assert len([c for c in fake.calls if c.path.endswith("/annotations")]) == 10
