"""A review's noise controls, carried out (the decisions are `policies.review_noise`'s).

- `auto_paused`: an automatic review is counted in the store; the one past
  `review.auto_pause.pushes` within its minutes pauses the pull request (the same `paused` flag
  `@app pause` sets) and posts one short note, in the sticky comment the pause and resume
  commands answer in; later ones are skipped without a word. `@app resume` forgets the count
  (`bot.runs.replies`); `@app review` reviews whatever the count.
- `hold_for_quiet` / `quiet_follow_up` / `publish_check_only`: with `review.quiet`, an
  automatic follow-up shows its progress on its check run only, and when it found nothing new
  and no finding changed state, nothing but the check run is written: the summary comment (its
  memory line included; the store has the memory) stays as it was, and no review is posted. A
  held review that a newer push supersedes writes its check run only too: the newer review
  covers both pushes, and publishes or stays quiet for both.
- `not_inline_list`: the summary's one collapsed list of the findings that were not commented
  inline: this review's below `review.min_severity` and past `review.max_comments`, and the
  still open ones of earlier reviews below `review.min_severity` (a new summary replaces the
  one that listed them first, and they are never raised again).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from bot.log import get_logger
from bot.publish.markdown_out import END_COLLAPSIBLE, collapsible
from bot.publish.render import render_reply
from bot.runs.flows import PUBLISHING
from bot.workflows.review.memory import load_state, save_state
from policies.review_noise import FollowUp, auto_pause_note, auto_pause_step, is_quiet
from policies.untrusted_text import code_span, untrusted

if TYPE_CHECKING:
    from bot.github.installation import InstallationClient
    from bot.publish.publisher import Publisher
    from bot.runs.flows import RunHost
    from bot.store.sqlite import RunRecord
    from bot.workflows.review.render import Shown
    from bot.workflows.review.runner import Concluded, Prepared
    from policies.config import ReviewConfig
    from policies.event import Trigger
    from policies.outcome import Outcome
    from policies.review_state import ReviewState, StoredFinding

log = get_logger(__name__)

PAUSE_KIND = "pause"
"""The sticky comment the note goes in: the one `@app pause` and `@app resume` answer in."""
MAX_LISTED = 100


async def auto_paused(
    ex: RunHost,
    client: InstallationClient,
    trigger: Trigger,
    run: RunRecord,
    payload: Mapping[str, Any] | None,
    config: ReviewConfig,
) -> bool:
    """Count this automatic review; True when it is not to run (the pull request paused)."""
    rule = config.auto_pause
    if rule is None or trigger.command is not None:
        return False
    repo, number = trigger.repo_full_name, trigger.number
    place = await anyio.to_thread.run_sync(
        lambda: ex.store.count_auto_review(repo, number, run.id, window_s=rule.minutes * 60.0)
    )
    step = auto_pause_step(place, pushes=rule.pushes)
    if step == "review":
        return False
    if step == "pause":
        state = await load_state(ex.store, repo, number, bot_login=ex.bot_login)
        await save_state(ex.store, repo, number, state.model_copy(update={"paused": True}))
        note = auto_pause_note(ex.app_slug, pushes=rule.pushes, minutes=rule.minutes)
        publisher = ex.publisher_for(client, trigger, run, payload, kind=PAUSE_KIND)
        await publisher.reply(render_reply(run.id, PAUSE_KIND, note))
        log.info("automatic reviews paused", extra={"place": place, "pushes": rule.pushes})
    else:
        log.info("automatic reviews are paused on this pull request", extra={"place": place})
    await ex.record(run.id, "skipped", None)
    return True


def hold_for_quiet(trigger: Trigger, state: ReviewState, config: ReviewConfig) -> bool:
    """Whether the run may end quiet, so its progress must not touch the summary comment."""
    return config.quiet and trigger.command is None and state.last_head is not None


def quiet_follow_up(
    trigger: Trigger,
    prep: Prepared,
    done: Concluded,
    config: ReviewConfig,
    *,
    stale: bool,
    blocked: bool,
) -> bool:
    """Whether this review posts nothing but its check run (`policies.review_noise.is_quiet`)."""
    facts = FollowUp(
        automatic=trigger.command is None,
        follow_up=prep.previous is not None and not prep.full,
        new=len(done.new),
        fixed=len(done.fixed),
        dismissed=len(prep.dismissed_now),
        stale=stale,
        blocked=blocked,
    )
    return is_quiet(facts, quiet=config.quiet)


def quiet_outcome(prep: Prepared, outcome: Outcome) -> Outcome:
    """The outcome of a quiet review, saying why nothing but the check run was written."""
    since = (prep.previous or prep.head)[:12]
    said = (
        f"Quiet (`review.quiet`): nothing new since `{since}` and no finding changed, so "
        f"the summary comment was left as it was and no review was posted.\n\n{outcome.summary}"
    )
    return dataclasses.replace(outcome, summary=said)


async def publish_check_only(
    ex: RunHost, publisher: Publisher, outcome: Outcome, *, conclusion: str | None = None
) -> None:
    """Record the outcome and complete the check run; no comment is written. For a quiet
    review, and for one held for quiet that a newer push superseded (the newer one publishes,
    or stays quiet too)."""
    await ex.record(outcome.run_id, PUBLISHING, outcome)
    await publisher.finish_check(outcome, conclusion=conclusion)
    await ex.record(outcome.run_id, outcome.status, outcome)
    log.info("only the check run was written", extra={"status": outcome.status})


def _item(path: str, start: int, end: int, severity: str, title: str, note: str = "") -> str:
    where = f"{path}:{start}" + (f"-{end}" if end > start else "")
    return f"- **{severity}** {code_span(where)}: {untrusted(title)}{note}"


def not_inline_list(
    below: Sequence[Shown],
    overflow: Sequence[Shown],
    *,
    min_severity: str,
    earlier: Sequence[StoredFinding] = (),
) -> str:
    """The summary's collapsed list of the findings not commented inline ("" for none): this
    review's below `min_severity` and past `max_comments`, and `earlier` reviews' still open
    ones below `min_severity` (`policies.review_noise.earlier_below`)."""
    if not below and not overflow and not earlier:
        return ""
    why = []
    if below:
        why.append(f"{len(below)} below review.min_severity ({min_severity})")
    if overflow:
        why.append(f"{len(overflow)} past review.max_comments")
    if earlier:
        why.append(f"{len(earlier)} from earlier reviews below review.min_severity")
    lines = [collapsible(f"Not commented inline: {', '.join(why)}"), ""]
    items = [_item(f.path, f.start_line, f.end_line, f.severity, f.title) for f in overflow]
    items += [_item(f.path, f.start_line, f.end_line, f.severity, f.title) for f in below]
    for old in earlier:
        line = old.line or 1
        since = f" (since `{old.head[:12]}`)" if old.head else ""
        items.append(_item(old.path, old.start_line or line, line, old.severity, old.title, since))
    lines += items[:MAX_LISTED]
    if len(items) > MAX_LISTED:
        lines.append(f"- … and {len(items) - MAX_LISTED} more")
    return "\n".join([*lines, "", END_COLLAPSIBLE])
