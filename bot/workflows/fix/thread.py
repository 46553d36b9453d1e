"""`fix` written in a pull request review thread: the thread is the request, and the app's own
thread is closed once its fix is on the pull request's head, before the answer is posted.

`thread_args` records, with the run's arguments (so a `decide` follow-up has it too), which
thread asked and whether it is the app's own (its first comment is one of the app's
findings). After the run, `close_own_thread` acts only when all of these hold: the run
succeeded, the thread is the app's own, and the pushed branch is the pull request's own head
branch (the app's own pull request: the commit is on its head now). It then resolves the
thread (GraphQL `resolveReviewThread`) and marks the finding `fixed` in the review memory,
with the commit that fixed it. Anyone else's thread is never resolved: a fix into their branch
is a draft pull request they have not merged yet, and their thread is theirs to close.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from bot.github.errors import GitHubError, NotFound
from bot.log import get_logger
from bot.workflows.review.memory import load_state, save_state
from bot.workflows.review.render import finding_of
from bot.workflows.thread_context import Thread

if TYPE_CHECKING:
    from bot.github.installation import InstallationClient
    from bot.store.contract import Storage
    from policies.event import Trigger
    from policies.outcome import Outcome

log = get_logger(__name__)

THREAD_ARG = "thread"


def thread_args(thread: Thread, *, bot_login: str) -> dict[str, Any]:
    """What the run remembers of the thread it was asked in (JSON, stored with its args)."""
    user = thread.first.user
    own = user is not None and user.login.lower() == bot_login.lower()
    fingerprint = finding_of(thread.first.body) if own else None
    return {"first_comment_id": thread.first.id, "own": own, "finding": fingerprint}


def _own_thread(args: Mapping[str, Any]) -> tuple[int, str | None] | None:
    info = args.get(THREAD_ARG)
    if not isinstance(info, Mapping) or info.get("own") is not True:
        return None
    first = info.get("first_comment_id")
    finding = info.get("finding")
    if not isinstance(first, int):
        return None
    return first, finding if isinstance(finding, str) else None


async def close_own_thread(
    client: InstallationClient,
    trigger: Trigger,
    args: Mapping[str, Any],
    outcome: Outcome,
    *,
    store: Storage,
    bot_login: str,
) -> bool:
    """Resolve the app's own thread the fix was asked in, once the fix is on the pull
    request's head (see the module docstring); True when it was resolved now."""
    own = _own_thread(args)
    if own is None or outcome.status != "succeeded" or trigger.target_kind != "pull_request":
        return False
    first, fingerprint = own
    try:
        pull = await client.get_pull(trigger.number)
        if pull.head.ref not in outcome.branches:
            return False  # a draft pull request into the head, or a patch: not fixed yet
        thread = next(
            (t for t in await client.review_threads(trigger.number) if t.first_comment_id == first),
            None,
        )
        if thread is None or thread.is_resolved:
            return False
        await client.resolve_review_thread(thread.id)
    except NotFound:
        log.info("the thread to resolve is gone")
        return False
    except GitHubError as exc:
        # The fix is pushed, and its answer is still to be posted: nothing here may make the
        # job run again (a rate limit included), so a thread left open is only logged.
        log.warning("could not resolve the review thread", extra={"error": str(exc)[:200]})
        return False
    log.info("the review thread the fix was asked in is resolved")
    if fingerprint is not None:
        await _mark_fixed(store, trigger, fingerprint, pull.head.sha, bot_login=bot_login)
    return True


async def _mark_fixed(
    store: Storage, trigger: Trigger, fingerprint: str, sha: str, *, bot_login: str
) -> None:
    repo, number = trigger.repo_full_name, trigger.number
    state = await load_state(store, repo, number, bot_login=bot_login)
    findings = [
        f.model_copy(update={"status": "fixed", "resolution": f"fixed by `fix` in {sha[:12]}"})
        if f.fingerprint == fingerprint and f.status == "open"
        else f
        for f in state.findings
    ]
    if findings != state.findings:
        await save_state(store, repo, number, state.model_copy(update={"findings": findings}))
