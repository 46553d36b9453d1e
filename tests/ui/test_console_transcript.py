"""An agent call's page shows what the agent was offered (the system prompt and the tools'
specifications, each collapsed and redacted), the structured output once, and a timeline whose
tick labels all lie inside the drawing."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from bot.publish.markdown_out import END_COLLAPSIBLE, collapsible
from bot.ui.svg import LABEL_CHARS, WIDTH, timeline_svg
from policies.ui_timeline import CallSpan, lay_out
from tests.ui.conftest import Seeded, sign_in
from tests.ui.seed import HOSTILE, PLANTED_TOKEN, put_artifact, transcript_entry


def test_the_system_prompt_and_tools_offered_collapsed_and_redacted(
    client: httpx.Client, seeded: Seeded
) -> None:
    entry = transcript_entry("explore code")
    entry["structured"] = {"summary": "only-here-once", "labels": ["bug"]}
    entry["transcript"] = [
        {
            "role": "system",
            "content": f"You are the explorer. Never leak {PLANTED_TOKEN}. {HOSTILE}",
            "tools": [
                {
                    "name": "read_file",
                    "description": f"Read a file. {PLANTED_TOKEN}",
                    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
                },
                {
                    "name": "structured_output",
                    "description": "Hand in the result.",
                    "parameters": {},
                },
            ],
        },
        *entry["transcript"],
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"name": "structured_output", "arguments": json.dumps(entry["structured"])},
                {"name": "read_file", "arguments": ""},
            ],
        },
    ]
    put_artifact(seeded.store, seeded.finished, "transcripts.json", json.dumps({"0": entry}))
    sign_in(client)
    html = client.get(f"/ui/runs/{seeded.finished}/agents/0").text
    assert PLANTED_TOKEN not in html and "<script>alert" not in html
    system = re.search(r'<li class="turn t-system">(.*?)</li>', html, re.DOTALL)
    assert system is not None
    part = system.group(1)
    assert part.count("<details") == 2 and " open" not in part  # both collapsed
    assert "System prompt (" in part and "You are the explorer." in part
    assert "[redacted github token]" in part
    assert "Tools offered (2): <code>read_file</code>, <code>structured_output</code>" in part
    assert "&#34;path&#34;" in part or "&quot;path&quot;" in part  # the parameters' schema
    # The structured output is on the page once, under its own heading; the call that handed
    # it in says so instead of repeating it; another call's empty arguments stay as they are.
    assert html.count("only-here-once") == 1
    assert "(the structured output, shown below)" in html
    assert html.count("(the structured output, shown below)") == 1
    assert '<pre class="structured">' in html


@pytest.mark.parametrize("seconds", [0.4, 3.0, 7.0, 30.0, 31.0, 95.0, 600.0, 3600.0])
def test_every_tick_label_fits_the_timeline(seconds: float) -> None:
    timeline = lay_out([CallSpan(0, "call", "done", 0.0, seconds, False, None)], now=seconds)
    svg = str(timeline_svg(timeline, lambda i: f"/x/{i}"))
    labels = re.findall(
        r'<text x="([0-9.]+)" y="[0-9]+" class="tick-label"( text-anchor="end")?>([^<]*)<', svg
    )
    assert labels
    for x, end, text in labels:
        width = len(text) * LABEL_CHARS
        left, right = (float(x) - width, float(x)) if end else (float(x), float(x) + width)
        assert left >= 0 and right <= WIDTH, (text, left, right)


def test_the_published_outcome_shows_no_html_as_text(client: httpx.Client, seeded: Seeded) -> None:
    """The app's own collapsed sections (a review's files, a log) are not shown as tags."""
    seeded.store.update_run(
        seeded.finished,
        status="succeeded",
        outcome={
            "run_id": seeded.finished,
            "workflow": "review",
            "status": "succeeded",
            "summary": "\n".join(
                [
                    "Looked.",
                    "",
                    collapsible("Files reviewed: 2"),
                    "",
                    "- `a.py`",
                    "",
                    END_COLLAPSIBLE,
                ]
            ),
        },
    )
    sign_in(client)
    html = client.get(f"/ui/runs/{seeded.finished}").text
    article = html.split('<article class="published markdown">', 1)[1].split("</article>", 1)[0]
    assert "&lt;details&gt;" not in article and "&lt;summary&gt;" not in article
    assert "<strong>Files reviewed: 2</strong>" in article and "<code>a.py</code>" in article
    assert "&lt;/sub&gt;" not in article
