"""One review run, end to end: what to review, the workflow, what to post, what to remember.

1. The pull request's head is read fresh. An automatic review of a head that is no longer the
   head is skipped: the newer push has its own review coming.
2. The head (and the base) are fetched into the mirror (`refs/pull/N/head`: forks work,
   read-only); the changes are computed locally (`bot.workflows.review.diffs`).
3. The review memory is loaded (`bot.workflows.review.memory`) and the app's threads are read: what
   people with write permission resolved, declined or 👎'd is dismissed.
4. On a follow-up, files whose pull request patch is the same as at the last review are not
   reviewed again (their own lines, whatever the base did around them); for the others the
   reviewer is shown how the pull request's own change moved since the last reviewed head
   (after a push, a merge of the base branch, a rebase or a force push), or the whole patch
   where the base branch changed the file too or the last head is gone. When that delta
   would cost at least as much as a full review (`policies.review_plan.review_whole`), the
   files' whole patches are reviewed instead. Open findings in changed files whose code
   changed are re-checked, by the reviewer of the unit holding their file when there is one.
   `@app review full` reviews everything again.
5. The `review` workflow runs on the engine (`bot.workflows.review.workflow`), resuming a superseded
   run of the same pull request so its finished read-only calls replay.
6. The head is read again: a stale result is never posted as inline comments.
7. Findings are fingerprinted and compared with the memory (none is posted twice), suggested
   fixes are proven (`bot.workflows.review.suggest`), anchors are checked against the hunks, and one
   review is posted (`bot.workflows.review.publish`); fixed findings get "Fixed in <sha>" on their
   thread, which is resolved.
8. The memory is saved, and mirrored in the sticky summary the executor publishes.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.log import get_logger
from bot.runs.context import sanitize
from bot.runs.progress import clean_model_text
from bot.workflows.review import diffs, fates, learn
from bot.workflows.review.budget import budget_line, budget_of
from bot.workflows.review.memory import apply_threads, load_state, save_state, writers_among
from bot.workflows.review.noise import not_inline_list
from bot.workflows.review.proof_text import cached, not_reproduced_list, proof_shown
from bot.workflows.review.publish import Posted, close_fixed, fixed_replies, post_review
from bot.workflows.review.render import Shown, SummaryFacts, review_body, summary_text
from bot.workflows.review.suggest import prove_suggestion, reclaim
from policies.ci_evidence import Evidence, agreeing
from policies.config import ReviewConfig
from policies.diff import Anchor, FilePatch, anchor_for
from policies.finding_fates import PullState, pull_state
from policies.learnings import Learning
from policies.proofs import ProofStatus, counts_line, posted_inline, provable
from policies.review_noise import earlier_below, place
from policies.review_plan import (
    ChangedFile,
    PlanLimits,
    ReviewPlan,
    changed_file,
    follow_up_tokens,
    full_review_tokens,
    one_call,
    plan_review,
    review_whole,
)
from policies.review_state import (
    Candidate,
    ReviewState,
    StoredFinding,
    code_hash,
    counts,
    known_finding,
    legacy_patch_signature,
    patch_signature,
    unchanged_files,
    with_heads,
)

if TYPE_CHECKING:
    from bot.engine.details import RunDetails
    from bot.github.installation import InstallationClient
    from bot.github.models import IssueComment, PullRequest
    from bot.store.contract import Storage

log = get_logger(__name__)

SEVERITY_RANK = {"critical": 0, "high": 1, "medium": 2, "low": 3, "info": 4}
RECHECK_CONTEXT = 12
BLOCK_LIMIT = 60_000


@dataclass
class Prepared:
    """Everything the workflow needs, and what the run must remember to conclude."""

    head: str
    base: str
    changes: diffs.PullChanges
    plan: ReviewPlan
    state: ReviewState
    previous: str | None
    full: bool
    signatures: dict[str, str]
    units: list[dict[str, Any]]
    recheck: list[dict[str, Any]]
    dismissed_now: list[str] = field(default_factory=list)
    ci: Evidence | None = None  # other Apps' CI on the head (`bot.workflows.review.evidence`)
    instruction_lines: list[str] = field(default_factory=list)
    linked_lines: list[str] = field(default_factory=list)
    learnings: list[Learning] = field(default_factory=list)
    """The repository's learnings the review's prompts show (`bot.workflows.review.learn`)."""
    learnings_left: list[Learning] = field(default_factory=list)
    """Those the caps left out, oldest first."""

    @property
    def nothing_to_review(self) -> bool:
        return not self.units and not self.recheck


def _changed(files: Sequence[FilePatch]) -> list[ChangedFile]:
    return [changed_file(f) for f in files]


def limits_of(config: ReviewConfig) -> PlanLimits:
    return PlanLimits(
        max_files=config.max_files,
        max_tokens=config.max_tokens,
        paths=tuple(config.paths),
        ignore=tuple(config.ignore) + tuple(config.ignore_paths),
    )


def fenced(name: str, text: str, fence: str, *, trusted: bool, author: str | None) -> str:
    """A data block in the run's fence (see `bot.runs.context`): data, never instructions."""
    tag = "data" if trusted else "untrusted-data"
    who = f' author="{sanitize(author, markup=False)[:60]}"' if author else ""
    body = text.replace(fence, "[fence]")
    safe_name = sanitize(name, markup=False).replace('"', "'")[:200]
    return f'<{tag} fence="{fence}" source="{safe_name}"{who}>\n{body}\n</{tag} fence="{fence}">'


def unit_key(paths: Sequence[str], body: str) -> str:
    """The identity of a unit's review: its files and the exact changes shown (hunk headers
    and their line numbers included), so reused findings point at the same lines."""
    digest = hashlib.sha256("\0".join([*paths, body]).encode("utf-8")).hexdigest()
    return digest[:24]


def still_there(text: str, finding: StoredFinding) -> bool:
    """Whether the code a finding was anchored to is still in the file, anywhere."""
    if not finding.code or finding.line is None:
        return False
    span = finding.line - (finding.start_line or finding.line) + 1
    lines = text.split("\n")
    return any(
        code_hash("\n".join(lines[i : i + span])) == finding.code
        for i in range(max(0, len(lines) - span + 1))
    )


def _numbered(text: str, start: int, end: int) -> str:
    lines = text.split("\n")
    first, last = max(1, start), min(len(lines), end)
    return "\n".join(f"{n:>6}  {lines[n - 1]}" for n in range(first, last + 1))


async def prepare(
    git_dir: Path,
    *,
    pull: PullRequest,
    state: ReviewState,
    config: ReviewConfig,
    full: bool,
    fence: str,
    author_trusted: bool,
) -> Prepared:
    """Steps 2 and 4 of the module docstring: the units and re-checks of this review."""
    head, base_tip = pull.head.sha, pull.base.sha
    changes = await diffs.pull_changes(git_dir, base_tip, head)
    signatures = {f.path: patch_signature(f.patch) for f in changes.files}
    previous = state.last_head
    follow_up = previous is not None and not full
    unchanged: frozenset[str] = frozenset()
    pushed: dict[str, FilePatch] = {}
    if follow_up:
        legacy = {f.path: legacy_patch_signature(f.patch) for f in changes.files}
        unchanged = unchanged_files(state.patches, signatures, legacy=legacy)
        if previous != head:
            delta = await diffs.own_changes(
                git_dir, previous or "", head, old_base=state.base, new_base=changes.merge_base
            )
            if delta is not None:
                pushed = {f.path: f for f in delta}
    author = pull.user.login if pull.user is not None else None
    recheck: list[dict[str, Any]] = []
    if follow_up and previous != head:
        recheck = await _rechecks(
            git_dir, state, head, set(signatures) - unchanged, fence, author_trusted, author
        )
    limits = limits_of(config)
    # A follow-up shows each file's delta, so its units are sized by the delta; unless that
    # costs at least as much as a full review, when its files' whole patches are reviewed.
    plan = plan_review(
        _changed([pushed.get(f.path, f) for f in changes.files]), limits, unchanged=unchanged
    )
    if pushed:
        shown = [_delta_lines(unit.paths, pushed) for unit in plan.units]
        folded = sum(_chars(item) for item in recheck if item["path"] in plan.paths)
        estimate = follow_up_tokens(
            plan,
            [one_call(follow_up, lines) for lines in shown],
            rechecked=folded,
            rechecked_alone=sum(_chars(item) for item in recheck) - folded,
        )
        whole = full_review_tokens(plan_review(_changed(changes.files), limits))
        if review_whole(estimate, whole):
            log.info("the push's delta costs a full review; its files are reviewed whole")
            pushed = {}
            plan = plan_review(_changed(changes.files), limits, unchanged=unchanged)
    by_path = changes.by_path()
    units: list[dict[str, Any]] = []
    for n, unit in enumerate(plan.units):
        pieces = []
        for path in unit.paths:
            patch = by_path[path]
            delta_patch = pushed.get(path)
            if delta_patch is not None and delta_patch.hunks:
                header = f"### {path} (changed since the last review)"
                text = delta_patch.patch
            else:
                header = f"### {path} ({patch.status}, +{patch.additions} -{patch.deletions})"
                text = patch.patch
            pieces.append(f"{header}\n{text}")
        delta_lines = _delta_lines(unit.paths, pushed)
        texts = [sanitize(piece, markup=False) for piece in pieces]
        body = "\n\n".join(texts)[:BLOCK_LIMIT]
        units.append(
            {
                "id": f"u{n + 1}",
                "key": unit_key(unit.paths, body),
                "paths": list(unit.paths),
                "focus": any(lines is not None for lines in delta_lines),
                "one_call": one_call(follow_up, delta_lines),
                "block": fenced("changes", body, fence, trusted=author_trusted, author=author),
                # One block per file, for a verifier that needs only some of them.
                "file_blocks": {
                    path: fenced(
                        "changes", text[:BLOCK_LIMIT], fence, trusted=author_trusted, author=author
                    )
                    for path, text in zip(unit.paths, texts, strict=True)
                },
            }
        )
    return Prepared(
        head=head,
        base=changes.merge_base,
        changes=changes,
        plan=plan,
        state=state,
        previous=previous,
        full=full,
        signatures=signatures,
        units=units,
        recheck=recheck,
    )


def _delta_lines(paths: Sequence[str], pushed: dict[str, FilePatch]) -> list[int | None]:
    """The changed lines of each file's delta, None for a file shown whole."""
    shown = [pushed.get(path) for path in paths]
    return [d.additions + d.deletions if d is not None and d.hunks else None for d in shown]


def _chars(item: dict[str, Any]) -> int:
    """What an earlier finding to re-check adds to a prompt: its listing and its code."""
    return len(str(item.get("block") or "")) + len(str(item.get("title") or "")) + 80


async def _rechecks(
    git_dir: Path,
    state: ReviewState,
    head: str,
    changed: set[str],
    fence: str,
    author_trusted: bool,
    author: str | None,
) -> list[dict[str, Any]]:
    """The open findings in files whose patch changed (`changed`) whose code is no longer
    there, with the code near their line at the head: a finding whose file left the pull
    request is not re-checked (its lines are the base's again)."""
    recheck: list[dict[str, Any]] = []
    for finding in state.findings:
        if finding.status != "open" or finding.path not in changed:
            continue
        text = await diffs.read_file(git_dir, head, finding.path) or ""
        if still_there(text, finding):
            continue  # its code is unchanged (perhaps moved): nothing to re-check
        line = finding.line or 1
        code = _numbered(text, line - RECHECK_CONTEXT, line + RECHECK_CONTEXT)
        recheck.append(
            {
                "fingerprint": finding.fingerprint,
                "path": finding.path,
                "line": finding.line,
                "title": finding.title,
                "block": fenced(
                    f"{finding.path} near line {line} at the head",
                    sanitize(code, markup=False),
                    fence,
                    trusted=author_trusted,
                    author=author,
                ),
            }
        )
    return recheck


@dataclass
class Concluded:
    """What the run decided to post and remember."""

    state: ReviewState
    inline: list[tuple[Shown, Anchor]]
    outside: list[Shown]
    overflow: list[Shown]
    fixed: list[StoredFinding]
    new: list[str]
    repeats: int
    unverified: list[str]
    budget: dict[str, Any] | None = None
    """Set when the budget stopped the review (`bot.workflows.review.budget`)."""
    below: list[Shown] = field(default_factory=list)
    """Findings under `review.min_severity`: listed in the summary, never commented inline."""
    unproven: list[Shown] = field(default_factory=list)
    """With `review.require_proof`, the provable findings not reproduced: listed in the
    summary, never commented inline."""
    proof_line: str = ""
    """The summary's line of proof counts (`policies.proofs.counts_line`)."""
    learned: list[dict[str, Any]] = field(default_factory=list)
    """Findings the verifier left out because a learning covers them (path, title, learning)."""


def _int(value: object, default: int = 1) -> int:
    return (
        value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default
    )


async def conclude(
    git_dir: Path,
    prep: Prepared,
    result: dict[str, Any],
    *,
    config: ReviewConfig,
    check_time_limit: float | None = None,
) -> Concluded:
    """Step 7 of the module docstring, up to the posting."""
    review = result.get("review") if isinstance(result, dict) else None
    review = review if isinstance(review, dict) else {}
    listed = review.get("findings")
    # At most `max_findings`, whatever the workflow returned (it caps them too).
    raw_findings = [r for r in (listed if isinstance(listed, list) else []) if isinstance(r, dict)]
    raw_findings = raw_findings[: config.max_findings]
    by_path = prep.changes.by_path()
    state = prep.state
    seen: set[str] = set()
    shown: list[Shown] = []
    stored: list[StoredFinding] = []
    repeats = 0
    branches: list[str] = []
    proofs: dict[str, dict[str, Any]] = {}
    statuses: list[ProofStatus] = []
    proving = bool(config.test_command or config.require_proof)
    for raw in raw_findings:
        if not isinstance(raw, dict):
            continue
        path = str(raw.get("path") or "")
        patch = by_path.get(path)
        if patch is None:
            continue
        start = _int(raw.get("start_line"))
        end = max(start, _int(raw.get("end_line"), start))
        code = await diffs.read_lines(git_dir, prep.head, path, start, end)
        category = str(raw.get("category") or "other").lower()
        title = clean_model_text(" ".join(str(raw.get("title") or "").split()))[:200]
        if not title:
            continue
        cand = Candidate(path, end, start, code, category, title)
        suggestion = raw.get("suggestion") if isinstance(raw.get("suggestion"), dict) else None
        if suggestion and isinstance(suggestion.get("branch"), str):
            branches.append(suggestion["branch"])
        if cand.fingerprint in seen or known_finding(state, cand) is not None:
            repeats += 1
            continue
        seen.add(cand.fingerprint)
        severity = str(raw.get("severity") or "medium").lower()
        severity = severity if severity in SEVERITY_RANK else "medium"
        text: str | None = None
        proof = ""
        if suggestion is not None and raw.get("replacement") is not None:
            branch = suggestion.get("branch")
            commit = await diffs.branch_head(git_dir, branch) if isinstance(branch, str) else None
            proven = await prove_suggestion(
                git_dir,
                head=prep.head,
                commit=commit,
                path=path,
                start=start,
                end=end,
                check_command=config.check_command,
                time_limit=check_time_limit or float(config.check_timeout),
            )
            text, proof = proven.text, proven.reason
        raw_proof = raw.get("proof")
        tested = proof_shown(raw_proof)
        if (
            isinstance(raw_proof, dict)
            and tested is not None
            and raw_proof.get("key")
            and raw_proof.get("head") == prep.head
        ):
            proofs[str(raw_proof["key"])] = cached(raw_proof)
        if proving and provable(category, severity, prove_severity=config.prove_severity):
            statuses.append(tested.status if tested is not None else "not_tried")
        shown.append(
            Shown(
                fingerprint=cand.fingerprint,
                path=path,
                start_line=start,
                end_line=end,
                severity=severity,
                category=category,
                title=title,
                explanation=clean_model_text(str(raw.get("explanation") or ""))[:4000],
                suggestion=text,
                proof=proof,
                ci_agrees=agreeing(prep.ci, path, start, end),
                tested=tested,
            )
        )
        stored.append(
            StoredFinding(
                fingerprint=cand.fingerprint,
                path=path,
                line=end,
                start_line=start if start < end else None,
                code=code_hash(code) if code.strip() else "",
                severity=severity,
                category=category,
                title=title,
                head=prep.head,
            )
        )
    if branches:
        await reclaim(git_dir, [], branches)

    ranked = sorted(shown, key=lambda s: (SEVERITY_RANK[s.severity], s.path, s.start_line))
    inline: list[tuple[Shown, Anchor]] = []
    outside: list[Shown] = []
    overflow: list[Shown] = []
    below: list[Shown] = []
    unproven: list[Shown] = []
    for s in ranked:
        status = s.tested.status if s.tested is not None else None
        if not posted_inline(
            s.category,
            s.severity,
            status,
            require_proof=config.require_proof,
            prove_severity=config.prove_severity,
        ):
            unproven.append(s)
            continue
        anchor = anchor_for(by_path[s.path], s.start_line, s.end_line)
        where = place(
            s.severity,
            anchored=anchor is not None,
            inline_so_far=len(inline),
            min_severity=config.min_severity,
            max_comments=config.max_comments,
        )
        if where == "inline" and anchor is not None:
            if (anchor.start_line or anchor.line) != s.start_line or anchor.line != s.end_line:
                s = _narrowed(s)
            inline.append((s, anchor))
        elif where == "outside":
            outside.append(s)
        elif where == "below":
            below.append(s)
        else:
            overflow.append(s)

    fixed_prints = {
        str(v.get("fingerprint"))
        for v in (review.get("rechecks") or [])
        if isinstance(v, dict) and v.get("still_present") is False
    }
    fixed = [f for f in state.findings if f.status == "open" and f.fingerprint in fixed_prints]
    findings = [
        f.model_copy(update={"status": "fixed", "resolution": f"Fixed in {prep.head}"})
        if f.fingerprint in fixed_prints and f.status == "open"
        else f
        for f in state.findings
    ] + stored
    # Only the reviewed head's proofs are kept: a proof's key names its head.
    kept = {k: v for k, v in state.proofs.items() if v.get("head") == prep.head}
    new_state = with_heads(
        state.model_copy(update={"findings": findings, "proofs": {**kept, **proofs}}),
        prep.base,
        prep.head,
        prep.signatures,
    )
    unverified = [str(p) for p in review.get("unverified") or [] if isinstance(p, str)]
    learned = [d for d in review.get("learned") or [] if isinstance(d, dict)]
    return Concluded(
        state=new_state,
        inline=inline,
        outside=outside,
        overflow=overflow,
        fixed=fixed,
        new=[s.fingerprint for s in shown],
        repeats=repeats,
        unverified=unverified,
        budget=budget_of(review),
        below=below,
        unproven=unproven,
        proof_line=counts_line(statuses),
        learned=learned,
    )


def _narrowed(s: Shown) -> Shown:
    """A finding whose range was cut to one hunk: its suggestion no longer fits, so it goes."""
    if s.suggestion is None:
        return s
    return dataclasses.replace(s, suggestion=None, proof="the fix spans lines outside the diff")


async def publish(
    client: InstallationClient,
    number: int,
    run_id: str,
    prep: Prepared,
    done: Concluded,
    *,
    bot_login: str,
    redact: Callable[[str], str],
) -> ReviewState:
    """Post the review and close fixed threads; the state with the new comments' ids."""
    state = done.state
    posted = Posted(None, True, {})
    if done.inline or done.outside or done.overflow:
        body = review_body(
            run_id,
            head=prep.head,
            inline=len(done.inline),
            outside=done.outside,
            overflow=done.overflow,
        )
        posted = await post_review(
            client,
            number,
            head=prep.head,
            body=body,
            inline=done.inline,
            bot_login=bot_login,
            redact=redact,
        )
    answered = (
        await fixed_replies(client, number, bot_login=bot_login)
        if any(f.comment_id for f in done.fixed)
        else set()
    )
    for finding in done.fixed:
        await close_fixed(
            client,
            number,
            comment_id=finding.comment_id,
            thread_id=finding.thread_id,
            sha=prep.head,
            answered=answered,
        )
    if posted.comment_ids:
        state = state.model_copy(
            update={
                "findings": [
                    f.model_copy(update={"comment_id": posted.comment_ids[f.fingerprint]})
                    if f.fingerprint in posted.comment_ids
                    else f
                    for f in state.findings
                ]
            }
        )
    return state


def summary_of(
    prep: Prepared,
    done: Concluded | None,
    model_summary: str,
    *,
    stale: bool = False,
    superseded: bool = False,
    min_severity: str = "low",
) -> str:
    state = done.state if done is not None else prep.state
    new = done.new if done is not None else []
    left = set(done.budget["not_reviewed"]) if done is not None and done.budget else set()
    facts = SummaryFacts(
        base=prep.base,
        previous=prep.previous,
        head=prep.head,
        counts=counts(state, new),
        reviewed=[p for p in prep.plan.paths if p not in left],
        skipped=[(s.path, s.reason) for s in prep.plan.skipped]
        + [(p, "not reviewed: the run's budget was reached") for p in prep.plan.paths if p in left],
        unverified=done.unverified if done is not None else [],
        fixed=[(f.title, prep.head) for f in done.fixed] if done is not None else [],
        dismissed_now=prep.dismissed_now,
        superseded=superseded,
        stale=stale,
        full=prep.full,
        budget=budget_line(done.budget) if done is not None and done.budget else "",
        linked=prep.linked_lines,
        instructions=prep.instruction_lines,
        proofs=done.proof_line if done is not None else "",
        learned=learn.summary_lines(
            done.learned if done is not None else [], prep.learnings, prep.learnings_left
        ),
    )
    text = summary_text(facts, model_summary)
    listed = ""
    if done is not None:
        earlier = earlier_below(state.findings, min_severity=min_severity, exclude=set(new))
        listed = not_inline_list(
            done.below, done.overflow, min_severity=min_severity, earlier=earlier
        )
        unproven = not_reproduced_list(
            [
                (s.path, s.start_line, s.end_line, s.severity, s.title, s.tested)
                for s in done.unproven
            ]
        )
        listed = "\n\n".join(part for part in (unproven, listed) if part)
    return f"{text}\n\n{listed}" if listed else text


def check_conclusion(
    state: ReviewState, *, fail_on: str, blocked: bool, budget_reached: bool = False
) -> str:
    """`neutral` when BLOCKED or stopped by its budget (not all of it was reviewed);
    `failure` when an open finding reaches `fail_on`; else success."""
    if blocked or budget_reached:
        return "neutral"
    if fail_on == "never":
        return "success"
    limit = SEVERITY_RANK[fail_on]
    worst = [SEVERITY_RANK.get(f.severity, 9) for f in state.findings if f.status == "open"]
    return "failure" if worst and min(worst) <= limit else "success"


async def load(
    store: Storage,
    client: InstallationClient,
    number: int,
    *,
    comments: Sequence[IssueComment],
    bot_login: str,
    key: bytes,
    read_threads: bool = True,
) -> tuple[ReviewState, list[str]]:
    """The memory with the dismissals of people who may write here applied (step 3)."""
    state = await load_state(
        store, client.full_name, number, comments=comments, bot_login=bot_login, key=key
    )
    if not read_threads or not any(f.comment_id for f in state.findings):
        return state, []
    threads = await client.review_threads(number)
    writers = await writers_among(client, state, threads, bot_login=bot_login)
    before = state
    state, dismissed = apply_threads(state, threads, bot_login=bot_login, writers=writers)
    # A writer's reason for a dismissal is kept for the repository's later reviews.
    await learn.harvest(
        store, client, number, before, state, threads, writers=writers, bot_login=bot_login
    )
    state, _ = await fates.apply_marked_fixed(client, state, threads, bot_login=bot_login)
    return state, dismissed


async def remember(
    store: Storage, repo: str, number: int, state: ReviewState, *, pull: PullState = "open"
) -> None:
    """Save the memory and the fates of its findings; `pull`: the pull request's state as
    last read (a review that ends after a merge records its findings as of a closed one)."""
    await save_state(store, repo, number, state)
    await fates.record(store, repo, number, state, pull=pull)


async def post_and_remember(
    client: InstallationClient,
    store: Storage,
    repo: str,
    number: int,
    run_id: str,
    prep: Prepared,
    done: Concluded,
    *,
    reviewed_head: str,
    bot_login: str,
    redact: Callable[[str], str],
) -> tuple[ReviewState, bool]:
    """Post the review unless the head moved from `reviewed_head` since it was read, and save
    the memory either way (the old one when nothing was posted): the memory saved, and
    whether the head moved."""
    current = await client.get_pull(number)
    stale = current.head.sha != reviewed_head
    if stale:
        log.info("the head moved during the review; nothing is posted inline")
        state = prep.state
    else:
        state = await publish(
            client, number, run_id, prep, done, bot_login=bot_login, redact=redact
        )
    pull = pull_state(current.state, current.merged)
    await remember(store, repo, number, state, pull=pull)
    return state, stale


async def reclaim_run(git_dir: Path, details: RunDetails | None) -> None:
    """Remove what the run's writing agents left in the mirror: worktrees and branches."""
    if details is None:
        return
    paths = [a.worktree_path for a in details.agents if a.worktree_path]
    branches = [a.worktree_branch for a in details.agents if a.worktree_branch]
    if paths or branches:
        await reclaim(git_dir, paths, branches)
