"""Azure OpenAI's chat completions: the OpenAI dialect at a deployment's URL.

Azure differs from OpenAI in three places only: the URL names the deployment
(`https://RESOURCE.openai.azure.com/openai/deployments/DEPLOYMENT/chat/completions`), every
request carries the `api-version` query parameter (Azure answers 404 without it), and the key
travels in an `api-key` header, not as `Authorization: Bearer` (Azure answers 401 to that).

`base_url` is either the deployment's URL (then every call goes there, whatever the model) or
the resource's URL (`https://RESOURCE.openai.azure.com`; then the call's model names the
deployment, so agent types can use other deployments of the same resource).
"""

from __future__ import annotations

from urllib.parse import quote

import httpx

from bot.agents.openai_model import OpenAIChatModel

DEFAULT_API_VERSION = "2024-10-21"


class AzureChatModel(OpenAIChatModel):
    """Chat completions on Azure OpenAI: deployment URL, `api-version`, `api-key`."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        api_version: str = DEFAULT_API_VERSION,
        http_client: httpx.AsyncClient | None = None,
        stream: bool = True,
        send_reasoning_effort: bool = False,
    ) -> None:
        super().__init__(
            base_url,
            None,
            http_client=http_client,
            stream=stream,
            send_reasoning_effort=send_reasoning_effort,
        )
        self.base = base_url.rstrip("/")
        self.per_deployment = "/openai/deployments/" not in self.base + "/"
        self._params = {"api-version": api_version}
        if api_key:
            self._headers["api-key"] = api_key

    def endpoint(self, model: str) -> str:
        if self.per_deployment:
            return f"{self.base}/openai/deployments/{quote(model, safe='')}/chat/completions"
        return self.url
