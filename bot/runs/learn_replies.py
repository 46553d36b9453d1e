"""Model-free replies to `learn`, `learnings` and `forget`: a repository's learnings by hand.

`@app learn <text>` keeps the text as a learning of the repository (its author the command's,
its source the comment's address; the same comment learned twice is one learning),
`@app learnings` lists them with their numbers, newest first, and `@app forget <n>` removes
one. Like every command they need write permission, checked before the run began
(`policies.triggers`): a reader's or a bot's `learn` never reaches here. Each gets its own
reply (`policies.learnings` renders them).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from bot.log import get_logger
from bot.publish.render import render_reply
from bot.runs.context import sanitize
from policies.commands import parse_forget
from policies.learnings import render_forgot, render_learned, render_list

if TYPE_CHECKING:
    from bot.publish.publisher import Publisher
    from bot.store.contract import Storage
    from policies.event import Trigger

log = get_logger(__name__)

COMMANDS = frozenset({"learn", "learnings", "forget"})
WEB = "https://github.com"


def source_of(trigger: Trigger, payload: Mapping[str, Any] | None) -> str:
    """The address of the command's comment: the delivery's, else built from its id."""
    comment = payload.get("comment") if payload else None
    url = comment.get("html_url") if isinstance(comment, Mapping) else None
    if isinstance(url, str) and url.startswith("https://"):
        return url
    base = f"{WEB}/{trigger.repo_full_name}/issues/{trigger.number}"
    if trigger.comment_id is None:
        return f"{base}#{trigger.delivery_id}"
    return f"{base}#issuecomment-{trigger.comment_id}"


async def answer_learning(
    publisher: Publisher,
    store: Storage,
    trigger: Trigger,
    *,
    run_id: str,
    app_slug: str,
    payload: Mapping[str, Any] | None,
) -> None:
    """Carry out `learn`, `learnings` or `forget` and reply on the command's issue or PR."""
    repo = trigger.repo_full_name
    if trigger.workflow == "learn":
        add = functools.partial(
            store.add_learning,
            repo,
            text=sanitize(trigger.args),
            author=trigger.actor,
            source=source_of(trigger, payload),
        )
        learning, new = await anyio.to_thread.run_sync(add)
        log.info("a learning was kept", extra={"learning": learning.number, "new": new})
        text = render_learned(learning, app_slug, new=new)
    elif trigger.workflow == "forget":
        number = parse_forget(trigger.args)
        gone = (
            None
            if number is None
            else await anyio.to_thread.run_sync(store.forget_learning, repo, number)
        )
        if gone is not None:
            log.info("a learning was forgotten", extra={"learning": gone.number})
        text = render_forgot(gone, number or 0, app_slug)
    else:
        text = render_list(await anyio.to_thread.run_sync(store.learnings, repo), app_slug)
    await publisher.reply(render_reply(run_id, trigger.workflow, text, sticky=False))
