"""Prompts a provider can cache: the stable part of a run's prompts first and marked, Anthropic's
cache breakpoints, and both APIs' cached tokens read into the run's usage and priced at the
cache rate, against fakes that bill caching as the providers do."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from bot.agents.models import CACHE_MARK, CACHE_PREFIX, plain_messages, price_of, user_message
from bot.agents.runtime import build_runner
from bot.agents.sandbox import SandboxStatus
from bot.engine.types import RunnerResult, Usage
from bot.runs.context import context_prompt
from bot.settings import Settings, load_settings
from tests.agents.conftest import invocation
from tests.fakes.anthropic_llm import FakeAnthropic, reply
from tests.fakes.llm import FakeLLM, text
from tests.fakes.prompt_cache import MIN_TOKENS, PromptCache

OFF = SandboxStatus(False, "off")
SHARED = "The pull request's context, the same for every unit. " * 200  # ~2,800 tokens


def settings_of(env: Mapping[str, str]) -> Settings:
    return load_settings(environ=dict(env), dotenv=None)


def unit_prompt(n: int) -> str:
    return context_prompt("Review part of the pull request.", "f" * 16, SHARED, tail=f"unit {n}")


def test_the_stable_part_comes_first_and_a_forged_mark_counts_for_nothing() -> None:
    first, second = unit_prompt(1), unit_prompt(2)
    assert first.count(CACHE_MARK) == 1
    assert first.split(CACHE_MARK)[0] == second.split(CACHE_MARK)[0]
    assert first.endswith(f"{CACHE_MARK}unit 1")
    forged = context_prompt("Task.", "f" * 16, f"an issue body{CACHE_MARK}more", tail="unit")
    assert forged.count(CACHE_MARK) == 1 and forged.endswith(f"{CACHE_MARK}unit")
    assert context_prompt("Task.", "f" * 16, "no unit").count(CACHE_MARK) == 0


def test_the_mark_never_reaches_the_model_as_text() -> None:
    message = user_message(unit_prompt(3))
    assert CACHE_MARK not in message["content"]
    stable = message[CACHE_PREFIX]
    assert message["content"][:stable].rstrip().endswith(SHARED.rstrip())
    assert message["content"][stable:] == "unit 3"
    assert plain_messages([message]) == [{"role": "user", "content": message["content"]}]
    assert user_message("plain") == {"role": "user", "content": "plain"}


@pytest.mark.anyio
async def test_anthropic_gets_breakpoints_and_the_second_unit_reads_the_cache() -> None:
    fake = FakeAnthropic([reply("one"), reply("two")])
    env = {"BOT_LLM_PROVIDER": "anthropic", "BOT_MODEL": "claude-x"}
    env |= {"BOT_LLM_BASE_URL": fake.base_url, "BOT_ANTHROPIC_API_KEY": fake.api_key}
    results: list[RunnerResult] = []
    async with fake.client() as client:
        runner = build_runner(settings_of(env), http_client=client, sandbox=OFF)
        for n in (1, 2):
            results.append(await runner.run(invocation(unit_prompt(n))))
    assert all(r.error is None for r in results)
    body = fake.bodies[0]
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    head, tail = body["messages"][0]["content"]
    assert head["cache_control"] == {"type": "ephemeral"} and "cache_control" not in tail
    assert tail["text"] == "unit 1" and CACHE_MARK not in head["text"]
    first, second = (r.usage for r in results)
    assert first.cache_read == 0 and first.cache_write >= MIN_TOKENS
    assert second.cache_read == first.cache_write and second.cache_write == 0
    assert second.input == first.input < 100  # after the last breakpoint: the unit alone


@pytest.mark.anyio
async def test_openai_caches_the_shared_prefix_on_its_own() -> None:
    fake = FakeLLM([text("one"), text("two")], prefix_cache=True)
    env = {"BOT_MODEL": "gpt-x", "BOT_LLM_BASE_URL": fake.base_url}
    results: list[RunnerResult] = []
    async with fake.client() as client:
        runner = build_runner(settings_of(env), http_client=client, sandbox=OFF)
        for n in (1, 2):
            results.append(await runner.run(invocation(unit_prompt(n))))
    assert all(r.error is None for r in results)
    assert all(CACHE_MARK not in str(b["messages"]) for b in fake.bodies)
    assert all(CACHE_PREFIX not in m for b in fake.bodies for m in b["messages"])
    first, second = (r.usage for r in results)
    assert first.cache_read == 0
    assert second.cache_read >= MIN_TOKENS and second.cache_read % 128 == 0
    assert second.input + second.cache_read > second.cache_read  # the rest billed in full


def test_cached_input_is_priced_at_the_cache_rate() -> None:
    price = {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}
    full = price_of(Usage(input=10_000, output=100), price)
    cached = price_of(Usage(input=1_000, output=100, cache_read=9_000), price)
    assert cached < full / 3


def test_the_fake_refuses_five_breakpoints_and_a_mark_of_another_kind() -> None:
    mark = {"type": "ephemeral"}
    blocks = [{"type": "text", "text": "x", "cache_control": mark} for _ in range(5)]
    body = {"messages": [{"role": "user", "content": blocks}]}
    with pytest.raises(ValueError, match="A maximum of 4 blocks with cache_control"):
        PromptCache().anthropic_usage(body, 1)
    blocks = [{"type": "text", "text": "x", "cache_control": {"type": "forever"}}]
    with pytest.raises(ValueError, match="ephemeral"):
        PromptCache().anthropic_usage({"messages": [{"role": "user", "content": blocks}]}, 1)


def test_the_fakes_forget_after_five_minutes_and_ignore_short_prefixes() -> None:
    now = [0.0]
    cache = PromptCache(clock=lambda: now[0])
    long = [{"role": "user", "content": "x" * 8000}]
    assert cache.automatic(None, long)[1] == 0
    prompt, cached = cache.automatic(None, long)
    assert MIN_TOKENS <= cached <= prompt and cached % 128 == 0
    now[0] = 301.0
    assert cache.automatic(None, long)[1] == 0  # expired, cached again now
    short = [{"role": "user", "content": "y" * 1000}]
    cache.automatic(None, short)
    assert cache.automatic(None, short)[1] == 0
