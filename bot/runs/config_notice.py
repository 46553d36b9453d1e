"""Says on GitHub that `.github/bot.yml` cannot be used, where the skip's notice says to.

`policies.triggers` skips every delivery of a repository whose config is broken with
`invalid_config`, and marks the two that are answered (`policies.config_notice`):

- a writer's command: one reply on its issue or pull request, made with the `Publisher`
  under a run id derived from the comment as written (`comment_identity`), so a retried job
  or the same body under another GUID edits that reply rather than adding one;
- an automatic pull request event: one neutral check run on the head, under the review's
  check name (a later review of that head, once the file is fixed, shows in its place). One
  per head: the first delivery for (repository, head, error) claims it in the store, the
  check is found by its external id before one is created, and a different error on the same
  head edits it.

Nothing else is posted; every text is redacted like all the app writes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from bot.log import bound, get_logger
from bot.publish.publisher import Publisher
from bot.publish.render import render_reply
from policies.config_notice import CHECK, NOTICE, REPLY, config_error_check, config_error_reply
from policies.event import Event, Skip, SkipReason
from policies.triggers import comment_identity

if TYPE_CHECKING:
    from bot.github.client import GitHubApp, InstallationClient
    from bot.store.contract import Storage

log = get_logger(__name__)

CHECK_EXTERNAL_ID = "bot-config-error"
"""The external id of the check run that says the config is broken (one per head)."""
KIND = "config"
"""The kind of the reply's comment: one per command, never sticky."""


def reply_run_id(event: Event) -> str:
    """The reply's run id: the same for the comment as written, whatever its GUID."""
    seed = f"config:{comment_identity(event) or event.delivery_id}"
    return "wf_" + hashlib.sha256(seed.encode()).hexdigest()[:12]


async def answer_config_error(
    event: Event,
    skip: Skip,
    *,
    github: GitHubApp,
    store: Storage,
    app_slug: str,
    redactor: Callable[[str], str],
) -> bool:
    """Post what the skip's notice asks for; True when something was written or found."""
    if skip.reason is not SkipReason.INVALID_CONFIG or NOTICE not in skip.extra:
        return False
    if event.installation_id is None or not event.repo_full_name or event.number is None:
        return False
    if "/" not in event.repo_full_name:
        return False
    owner, repo = event.repo_full_name.split("/", 1)
    client = github.installation(event.installation_id, owner, repo)
    with bound(repo=event.repo_full_name):
        if skip.extra[NOTICE] == REPLY and event.comment_id is not None:
            run_id = reply_run_id(event)
            publisher = Publisher(
                client,
                run_id=run_id,
                kind=KIND,
                number=event.number,
                bot_login=f"{app_slug}[bot]",
                command_comment_id=event.comment_id,
                command_comment_kind=event.comment_kind or "issue_comment",
                redactor=redactor,
            )
            text = config_error_reply(skip.detail, command=skip.extra.get("command"))
            await publisher.reply(render_reply(run_id, KIND, text, sticky=False))
            log.info("invalid config answered", extra={"run_id": run_id})
            return True
        if skip.extra[NOTICE] == CHECK and event.head_sha:
            return await _post_check(
                client,
                event,
                event.head_sha,
                skip.detail,
                store=store,
                app_slug=app_slug,
                redactor=redactor,
            )
    return False


async def _post_check(
    client: InstallationClient,
    event: Event,
    head_sha: str,
    detail: str,
    *,
    store: Storage,
    app_slug: str,
    redactor: Callable[[str], str],
) -> bool:
    """The neutral check run on `head_sha`, once per head (see the module docstring)."""
    repo = str(event.repo_id) if event.repo_id is not None else event.repo_full_name
    digest = hashlib.sha256(detail.encode()).hexdigest()[:16]
    key = f"config-check:{repo}:{head_sha}:{digest}"
    holder = await anyio.to_thread.run_sync(store.claim_trigger, key, event.delivery_id)
    if holder != event.delivery_id:
        log.info("invalid config already shown on this head", extra={"holder": holder})
        return False
    output = {k: redactor(v) for k, v in config_error_check(detail).items()}
    found = await client.find_check_run(head_sha, CHECK_EXTERNAL_ID)
    if found is None:
        await client.create_check_run(
            name=f"{app_slug}: review",
            head_sha=head_sha,
            status="completed",
            conclusion="neutral",
            external_id=CHECK_EXTERNAL_ID,
            output=output,
        )
    elif found.output is None or found.output.summary != output["summary"]:
        await client.update_check_run(found.id, conclusion="neutral", output=output)
    log.info("invalid config shown on the head", extra={"head_sha": head_sha})
    return True
