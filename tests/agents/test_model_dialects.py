"""Model endpoints in their own dialects, each against a fake that speaks it as strictly as the
real service: Azure OpenAI (deployment URL, `api-version`, `api-key`) and Anthropic's extended
thinking (signed thinking blocks replayed on later tool-use turns). The runtime is built from
settings the way the app builds it (`build_runner`)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from bot.agents.azure_model import AzureChatModel
from bot.agents.models import ModelError
from bot.agents.openai_model import OpenAIChatModel
from bot.agents.runtime import AgentRuntime, build_runner
from bot.agents.sandbox import SandboxStatus
from bot.settings import Settings, load_settings
from tests.agents.conftest import invocation
from tests.fakes.llm import FakeLLM, text, tool_call

OFF = SandboxStatus(False, "off")


def settings_of(env: Mapping[str, str]) -> Settings:
    return load_settings(environ=dict(env), dotenv=None)


# -- Azure OpenAI ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_azure_deployment_url_gets_api_version_and_api_key() -> None:
    fake = FakeLLM([tool_call("list_files", {"path": "."}), text("done")], api_key="az-key")
    settings = settings_of(
        {
            "BOT_MODEL": "gpt-4o",
            "BOT_LLM_PROVIDER": "azure",
            "BOT_LLM_BASE_URL": fake.azure_url("prod-gpt4o"),
            "BOT_LLM_API_KEY": "az-key",
            "BOT_LLM_API_VERSION": "2024-06-01",
        }
    )
    async with fake.client() as client:
        runner = build_runner(settings, http_client=client, sandbox=OFF)
        assert isinstance(runner, AgentRuntime) and sorted(runner.providers) == ["azure"]
        result = await runner.run(invocation())
    assert result.error is None and result.output == "done"
    assert len(fake.bodies) == 2
    for recorded in fake.requests:
        assert recorded.path == "/openai/deployments/prod-gpt4o/chat/completions"
        assert recorded.headers["api-key"] == "az-key"
        assert "authorization" not in recorded.headers
    assert fake.bodies[1]["messages"][-1]["role"] == "tool"


@pytest.mark.anyio
async def test_azure_resource_url_names_the_deployment_by_the_model() -> None:
    fake = FakeLLM([text("hi")], api_key="az-key")
    settings = settings_of(
        {
            "BOT_MODEL": "team-deployment",
            "BOT_LLM_PROVIDER": "azure",
            "BOT_LLM_BASE_URL": fake.base_url.removesuffix("/v1"),
            "BOT_LLM_API_KEY": "az-key",
        }
    )
    async with fake.client() as client:
        runner = build_runner(settings, http_client=client, sandbox=OFF)
        result = await runner.run(invocation())
    assert result.error is None and result.output == "hi"
    assert fake.requests[0].path == "/openai/deployments/team-deployment/chat/completions"


@pytest.mark.anyio
async def test_the_fake_refuses_what_azure_refuses() -> None:
    fake = FakeLLM([text("never")], api_key="az-key")
    url = fake.azure_url("d1")
    async with fake.client() as client:
        bearer = OpenAIChatModel(url, "az-key", http_client=client)
        with pytest.raises(ModelError) as refused:
            await bearer.complete([{"role": "user", "content": "x"}], (), model="m")
        assert refused.value.status == 401
        unversioned = AzureChatModel(url, "az-key", api_version="", http_client=client)
        with pytest.raises(ModelError) as missing:
            await unversioned.complete([{"role": "user", "content": "x"}], (), model="m")
        assert missing.value.status == 404
    assert fake.remaining == 1
