"""Keeps each posted finding's fate in the store, as reviews run and when the pull request closes.

- After every review (`record`): the fate of each finding of the saved memory
  (`policies.finding_fates.fates_of`): open, fixed by a push the re-check agreed with, or
  dismissed by a person with write permission (who, and how).
- A writer's reply in the app's thread saying it is fixed ("Fixed", "Done", "Addressed in
  abc123") marks the finding fixed (`apply_marked_fixed`, read with the other thread acts
  before each review and at close). Nobody else's reply counts: the pull request's author
  without write permission cannot clear a finding that fails the check this way either.
- When the pull request closes, merged or not (`close_pull`, for `pull_request.closed`): the
  threads are read once more for dismissals and fixes marked since the last review, and each
  finding still open meets its end: `outdated` when GitHub marks its thread outdated (its
  lines changed and no re-check found it fixed), else `open_at_close`. A pull request the app
  never reviewed has nothing to record. A GitHub error other than a retryable one leaves the
  threads unread: the fates are recorded from the memory as it stands.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import anyio.to_thread

from bot.github.errors import GitHubError, RetryableError
from bot.github.models import ReviewThread
from bot.log import get_logger
from bot.workflows.review import learn
from bot.workflows.review.memory import (
    MAX_PERMISSION_LOOKUPS,
    _facts,
    _threads_of_open,
    apply_threads,
    load_state,
    save_state,
    writers_among,
)
from policies.finding_fates import (
    PullClosed,
    PullState,
    ThreadDeclined,
    fates_of,
    marked_fixed_by,
)
from policies.review_state import ReviewState, writers_of
from policies.triggers import is_app_account

if TYPE_CHECKING:
    from bot.github.installation import InstallationClient
    from bot.store.contract import Storage

log = get_logger(__name__)


async def record(
    store: Storage,
    repo: str,
    number: int,
    state: ReviewState,
    *,
    pull: PullState = "open",
    outdated: frozenset[str] = frozenset(),
) -> None:
    """Store the fate of every finding in `state` (blocking work in a worker thread)."""
    if not state.findings:
        return
    fates = fates_of(repo, number, state, pull=pull, outdated=outdated)
    await anyio.to_thread.run_sync(store.put_finding_fates, repo, number, fates)


async def apply_marked_fixed(
    client: InstallationClient,
    state: ReviewState,
    threads: Sequence[ReviewThread],
    *,
    bot_login: str,
) -> tuple[ReviewState, list[str]]:
    """Open findings a writer answered "fixed" on, marked fixed; a line for each."""

    def is_person(login: str) -> bool:
        return not login.lower().endswith("[bot]") and not is_app_account(login, bot_login)

    candidates: dict[str, str] = {}
    pairs = [(f, t) for f, t in _threads_of_open(state, threads) if t is not None]
    for finding, thread in pairs:
        if finding.status != "open":
            continue
        for author, _body in _facts(thread).replies:
            if author and is_person(author):
                candidates.setdefault(author.lower(), author)
    if not candidates:
        return state, []
    permissions: dict[str, str | None] = {}
    for n, login in enumerate(candidates.values()):
        if n >= MAX_PERMISSION_LOOKUPS:
            break
        try:
            permissions[login] = await client.get_collaborator_permission(login)
        except GitHubError:
            permissions[login] = None  # unreadable counts as none
    writers = writers_of(permissions)
    marked: list[str] = []
    by_print: dict[str, str] = {}
    for finding, thread in pairs:
        if finding.status != "open":
            continue
        who = marked_fixed_by(_facts(thread), is_person, writers)
        if who is not None:
            by_print[finding.fingerprint] = who
            marked.append(f"{finding.title} (marked fixed by @{who})")
    if not by_print:
        return state, []
    findings = [
        f.model_copy(
            update={"status": "fixed", "resolution": f"marked fixed by @{by_print[f.fingerprint]}"}
        )
        if f.fingerprint in by_print
        else f
        for f in state.findings
    ]
    return state.model_copy(update={"findings": findings}), marked


async def close_pull(
    store: Storage, closed: PullClosed, *, client: InstallationClient | None, bot_login: str
) -> str:
    """Record the fates of a closed pull request's findings; the line the delivery records."""
    state = await load_state(store, closed.repo, closed.number, bot_login=bot_login)
    if not state.findings:
        return f"pull request {closed.state}: no findings were posted"
    outdated: frozenset[str] = frozenset()
    if client is not None and any(f.comment_id for f in state.findings):
        try:
            threads = await client.review_threads(closed.number)
            writers = await writers_among(client, state, threads, bot_login=bot_login)
            before = state
            state, _ = apply_threads(state, threads, bot_login=bot_login, writers=writers)
            await learn.harvest(
                store,
                client,
                closed.number,
                before,
                state,
                threads,
                writers=writers,
                bot_login=bot_login,
            )
            state, _ = await apply_marked_fixed(client, state, threads, bot_login=bot_login)
            outdated = frozenset(
                f.fingerprint
                for f, t in _threads_of_open(state, threads)
                if t is not None and t.is_outdated and f.status == "open"
            )
            await save_state(store, closed.repo, closed.number, state)
        except RetryableError:
            raise
        except GitHubError as exc:
            log.warning(
                "the threads could not be read at close; fates recorded from the memory",
                extra={"status": exc.status},
            )
    await record(store, closed.repo, closed.number, state, pull=closed.state, outdated=outdated)
    fates = fates_of(closed.repo, closed.number, state, pull=closed.state, outdated=outdated)
    tally: dict[str, int] = {}
    for fate in fates:
        tally[fate.outcome] = tally.get(fate.outcome, 0) + 1
    figures = ", ".join(f"{n} {outcome}" for outcome, n in sorted(tally.items()))
    return f"pull request {closed.state}: {len(fates)} findings ({figures})"


async def learn_from_reply(
    store: Storage, declined: ThreadDeclined, *, client: InstallationClient, bot_login: str
) -> str:
    """A person declined a finding in its thread: when the thread is one of the app's and
    the person may dismiss it, the finding is dismissed in the memory and the reason learned
    and confirmed now (`learn.harvest`, which learns a source once); the line the delivery
    records."""
    state = await load_state(store, declined.repo, declined.number, bot_login=bot_login)
    if not any(f.comment_id == declined.thread for f in state.findings):
        return "a reply in a thread that is not one of the app's findings"
    threads = await client.review_threads(declined.number)
    writers = await writers_among(client, state, threads, bot_login=bot_login)
    before = state
    state, _ = apply_threads(state, threads, bot_login=bot_login, writers=writers)
    learned = await learn.harvest(
        store,
        client,
        declined.number,
        before,
        state,
        threads,
        writers=writers,
        bot_login=bot_login,
    )
    await save_state(store, declined.repo, declined.number, state)
    if not learned:
        return "a reply declining a finding: nothing learned (not a writer's reason, or known)"
    numbers = ", ".join(f"#{x.number}" for x in learned)
    return f"a reply declining a finding: learned {numbers}"
