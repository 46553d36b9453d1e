"""Evidence for a review besides the model's own reading: other Apps' CI and a lint command.

`gather` runs after the units are prepared (`runner.prepare`) and before the workflow:

1. CI: the head's check runs and commit statuses are read; the app's own are left out, and
   the annotations of other Apps' failed or neutral check runs are read (at most 50 on the
   pull request's files, `policies.ci_evidence`). They go into the reviewer's context as
   one untrusted data block, and a finding whose lines a check flagged says "CI agrees".
   GitHub refusing any of it (no `statuses` permission yet, a 404, a 5xx) costs the review
   that part only: it is logged and the review goes on.
2. Lint: with `review.lint_command`, the command runs in the sandbox (no network, the
   checkout the one writable tree, killed past `review.lint_timeout`, its output cut at
   `LINT_OUTPUT_CAP` bytes) on a checkout of the head, `{files}` standing for the reviewed
   files, shell-quoted. Its hits on added lines become candidate findings of the unit that
   holds their file, which the verifier rules on like the reviewer's own
   (`policies.lint_output`). With `review.lint: auto` it does not run when another App's
   check run of the same tool already reported on this head.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bot.github.errors import GitHubError, RateLimited
from bot.log import get_logger
from bot.workflows.review.runner import Prepared, fenced
from bot.workflows.review.suggest import check_commit
from policies.ci_evidence import (
    MAX_ANNOTATIONS,
    Annotation,
    Check,
    Evidence,
    Status,
    evidence,
    foreign_checks,
    foreign_statuses,
    render_evidence,
    reported_by,
    tool_of,
    wants_annotations,
)
from policies.lint_output import Candidate, candidates, files_argument, parse_lint
from policies.untrusted_text import code_span

if TYPE_CHECKING:
    from pathlib import Path

    from bot.github.installation import InstallationClient
    from policies.config import ReviewConfig

log = get_logger(__name__)

LINT_OUTPUT_CAP = 256 * 1024
MAX_ANNOTATED_CHECKS = 10


@dataclass
class Gathered:
    """What `gather` found: the CI evidence, its data block, and the lint command's run."""

    ci: Evidence = field(default_factory=Evidence)
    block: str = ""
    lint: list[Candidate] = field(default_factory=list)
    lint_note: str = ""


async def read_ci(
    client: InstallationClient, head: str, *, changed: frozenset[str], app_slug: str
) -> Evidence:
    """Other Apps' check runs and statuses on `head`, with their annotations on `changed`."""
    checks: list[Check] = []
    statuses: list[Status] = []
    try:
        runs = await client.list_check_runs_for_ref(head)
        checks = [
            Check(
                id=r.id,
                name=r.name,
                app_id=r.app.id if r.app else None,
                app_slug=r.app.slug if r.app else None,
                status=r.status,
                conclusion=r.conclusion,
                annotations_count=r.output.annotations_count if r.output else 0,
            )
            for r in runs
            if r.head_sha == head
        ]
        checks = foreign_checks(checks, app_id=client.app.app_id, app_slug=app_slug)
    except RateLimited:
        raise
    except GitHubError as exc:
        log.warning("the head's check runs could not be read", extra={"status": exc.status})
        checks = []
    read: list[Check] = []
    budget, asked = MAX_ANNOTATIONS, 0
    for check in checks:
        if wants_annotations(check) and budget > 0 and asked < MAX_ANNOTATED_CHECKS:
            asked += 1
            try:
                notes = await client.list_check_run_annotations(check.id, limit=200)
            except RateLimited:
                raise
            except GitHubError as exc:
                log.warning("a check's annotations could not be read", extra={"status": exc.status})
                notes = []
            kept = tuple(
                Annotation(
                    path=n.path,
                    start_line=n.start_line,
                    end_line=n.end_line,
                    level=n.annotation_level or "",
                    title=n.title or "",
                    message=n.message,
                )
                for n in notes
                if n.path in changed
            )[:budget]
            budget -= len(kept)
            check = dataclasses.replace(check, annotations=kept)
        read.append(check)
    try:
        own = f"{app_slug}[bot]"
        found = await client.commit_statuses(head)
        statuses = foreign_statuses(
            [
                Status(
                    s.context, s.state, s.description or "", s.creator.login if s.creator else None
                )
                for s in found
            ],
            bot_login=own,
        )
    except RateLimited:
        raise
    except GitHubError as exc:
        log.warning("the head's commit statuses could not be read", extra={"status": exc.status})
    return evidence(read, statuses, changed=changed)


def _lint_paths(prep: Prepared) -> dict[str, frozenset[int]]:
    """The reviewed files that exist at the head, and the lines the pull request added."""
    by_path = prep.changes.by_path()
    out: dict[str, frozenset[int]] = {}
    for path in prep.plan.paths:
        patch = by_path.get(path)
        if patch is None or patch.status == "removed" or patch.binary or patch.submodule:
            continue
        if patch.symlink:
            continue
        out[path] = patch.added_lines()
    return out


async def run_lint(
    git_dir: Path, head: str, command: str, changed: dict[str, frozenset[int]], *, time_limit: float
) -> tuple[list[Candidate], str]:
    """The lint command's candidate findings on added lines, and what happened to it."""
    if not changed:
        return [], "not run: no reviewed file to lint"
    line = command.replace("{files}", files_argument(sorted(changed)))
    done = await check_commit(
        git_dir, head, line, time_limit=time_limit, output_cap=LINT_OUTPUT_CAP, keep=None
    )
    if done.exit_code is None:
        # `done.what` quotes the command line, file names included: it is logged, not shown.
        log.warning("the lint command did not finish", extra={"what": done.what})
        if "time limit" in done.what:
            return [], f"stopped after {time_limit:g} s (`review.lint_timeout`); nothing of it used"
        if "sandbox" in done.what:
            return [], "not run: the sandbox is not available here"
        return [], "not run: the head could not be checked out"
    found = candidates(parse_lint(done.output), changed, tool=tool_of(command))
    log.info("the lint command ran", extra={"exit_code": done.exit_code, "found": len(found)})
    hits = f"{len(found)} hit{'s' if len(found) != 1 else ''}"
    return found, f"{code_span(tool_of(command) or 'lint')} reported {hits} on changed lines"


def with_lint_note(summary: str, found: Gathered | None) -> str:
    """The summary with one line saying what the lint command did, when one is configured."""
    if found is None or not found.lint_note:
        return summary
    return f"{summary}\n\n**Lint:** {found.lint_note}."


async def gather(
    client: InstallationClient,
    git_dir: Path,
    prep: Prepared,
    config: ReviewConfig,
    *,
    fence: str,
    app_slug: str,
) -> Gathered:
    """Steps 1 and 2 of the module docstring; the units get their lint candidates."""
    out = Gathered()
    changed = frozenset(prep.plan.paths)
    out.ci = await read_ci(client, prep.head, changed=changed, app_slug=app_slug)
    text = render_evidence(out.ci)
    if text:
        # Cleaned by the policy already: `sanitize` would strip the defusing it inserted.
        out.block = fenced("ci", text, fence, trusted=False, author=None)
    if config.lint_command:
        skip = reported_by(out.ci.checks, config.lint_command) if config.lint == "auto" else None
        if skip is not None:
            out.lint_note = f"not run: the check {code_span(skip)} already reported on this head"
            log.info("the lint command was skipped: CI ran the same tool")
        else:
            out.lint, out.lint_note = await run_lint(
                git_dir,
                prep.head,
                config.lint_command,
                _lint_paths(prep),
                time_limit=float(config.lint_timeout),
            )
    for unit in prep.units:
        unit["lint"] = [dict(c) for c in out.lint if c["path"] in unit["paths"]]
    return out
