"""A transcript leads with what the agent was offered: the system prompt and the tools'
specifications exactly as the model got them, each under its own cap."""

from __future__ import annotations

import pytest

from bot.agents.transcript import DESCRIPTION_CAP, SYSTEM_CAP, Transcript
from bot.engine.dispatch import TRANSCRIPT_ENTRIES, _bounded_transcript
from tests.agents.conftest import RuntimeFactory, invocation
from tests.fakes.llm import FakeLLM, text, tool_call

SCHEMA = {
    "type": "object",
    "properties": {"summary": {"type": "string"}},
    "required": ["summary"],
}


@pytest.mark.anyio
async def test_the_system_prompt_and_the_tools_offered_are_the_ones_sent(
    fake: FakeLLM, runtime_for: RuntimeFactory
) -> None:
    fake.push(tool_call("structured_output", {"summary": "done"}))
    fake.push(text("ok"))
    result = await runtime_for().run(invocation(schema=SCHEMA))
    assert result.error is None
    sent = fake.bodies[0]
    offered = result.transcript[0]
    assert offered["role"] == "system"
    assert offered["content"] == sent["messages"][0]["content"]
    assert [t["name"] for t in offered["tools"]] == [t["function"]["name"] for t in sent["tools"]]
    assert [t["parameters"] for t in offered["tools"]] == [
        t["function"]["parameters"] for t in sent["tools"]
    ]
    assert "structured_output" in [t["name"] for t in offered["tools"]]
    assert result.transcript[1]["role"] == "user"


def test_the_offered_entry_has_its_own_caps_and_is_never_dropped() -> None:
    transcript = Transcript(total_cap=1000, max_entries=3)
    transcript.offered("s" * (SYSTEM_CAP + 10), [{"name": "t", "description": "d" * 5000}])
    for n in range(20):
        transcript.add("assistant", f"turn {n}")
    entries = transcript.entries()
    assert entries[0]["content"].startswith("s" * SYSTEM_CAP) and "10 more characters" in str(
        entries[0]["content"]
    )
    assert len(entries[0]["tools"][0]["description"]) < DESCRIPTION_CAP + 40
    assert entries[1] == {"role": "assistant", "content": "turn 0"}  # the first entry stays
    assert entries[-1] == {"role": "assistant", "content": "turn 19"}


def test_the_engine_keeps_the_offered_entry_and_the_prompt_whole() -> None:
    """The run's transcripts.json keeps a call's first entries and its newest; the entry of
    what was offered is larger than a turn's cap and stays whole, and the prompt stays too."""
    offered = {
        "role": "system",
        "content": "p" * 20_000,
        "tools": [{"name": "t", "description": "d", "parameters": {"x": "y" * 20_000}}],
    }
    turns = [{"role": "assistant", "content": f"turn {n}"} for n in range(100)]
    kept, _ = _bounded_transcript([offered, {"role": "user", "content": "the prompt"}, *turns])
    assert kept[0] == offered
    assert kept[1] == {"role": "user", "content": "the prompt"}
    assert kept[-1] == turns[-1] and len(kept) == TRANSCRIPT_ENTRIES + 1
    plain, _ = _bounded_transcript([{"role": "user", "content": "p"}, *turns])
    assert plain[0] == {"role": "user", "content": "p"} and len(plain) == TRANSCRIPT_ENTRIES
