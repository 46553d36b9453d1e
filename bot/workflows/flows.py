"""The built-in flows by workflow name: what the executor runs for `review`, `fix` and `decide`.

The wiring hands this table to the executor (`bot.runs.flows`), so the executor imports no flow.
"""

from __future__ import annotations

from bot.runs.flows import Flows
from bot.workflows.decide.flow import answer_blocked
from bot.workflows.fix.iterate import fix_or_iterate
from bot.workflows.review.flow import run_review

FLOWS: Flows = {"review": run_review, "fix": fix_or_iterate, "decide": answer_blocked}
