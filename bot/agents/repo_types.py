"""The agent types a run may ask for: the app's own and the repository's, within the operator's
limits.

The app's own are the built-in presets and the operator's (BOT_AGENT_TYPES). A repository adds
its own with `agents` in `.github/bot.yml`, and only ever gets less than the operator allows:

- tools: only those BOT_REPO_AGENT_TOOLS lists (by default the read-only tools); a type that
  lists none gets the read-only ones among them;
- names: never one the app has already, so a repository cannot replace a built-in or an
  operator's type (and with it what a built-in workflow runs);
- models: only one the operator configured (BOT_MODEL, a BOT_ROLE_MODELS value or an
  operator type's model, with that type's provider); by default the deployment's model.

A file asking for more is refused like any other mistake in it: `rules` go to
`parse_repo_config`, which reports the key and its line, and the app does nothing in that
repository until the file is fixed (also when a change of the settings made it so: the error
says what to change). `RunAgentTypes(config)` then gives a run the app's types plus the
repository's; `local_agent_types` does the same for `bot workflow run --repo`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.agents.types import repo_allowed_tools, resolve_agent_types
from bot.engine.git import run_git
from bot.engine.types import ALL_TOOLS, READ_ONLY_TOOLS, AgentType
from bot.settings import Settings
from policies.config import CONFIG_PATH, AgentConfig, AgentRules, RepoConfig, parse_repo_config


@dataclass(frozen=True, slots=True)
class RunAgentTypes:
    """The app's agent types and the rules for a repository's (raises AgentTypeError when the
    settings declare an invalid type or tool)."""

    operator: Mapping[str, Mapping[str, Any]]
    app: Mapping[str, AgentType]
    rules: AgentRules

    @classmethod
    def from_settings(cls, settings: Settings) -> RunAgentTypes:
        app = resolve_agent_types(settings.agent_types, None)
        tools = repo_allowed_tools(settings.repo_agent_tools)
        models = {settings.model, *settings.role_models.values(), *(t.model for t in app.values())}
        rules = AgentRules(
            taken=frozenset(app),
            tools=tools,
            default_tools=tuple(sorted(READ_ONLY_TOOLS & tools)),
            known_tools=ALL_TOOLS,
            models=frozenset(m for m in models if m),
        )
        return cls(operator=settings.agent_types, app=app, rules=rules)

    def __call__(self, config: RepoConfig) -> dict[str, AgentType]:
        """The agent types of a run in the repository whose config this is."""
        if not config.agents:
            return dict(self.app)
        repo = {agent.name: self._fields(agent) for agent in config.agents}
        return resolve_agent_types(
            self.operator,
            repo,
            repo_allowed_tools=self.rules.tools,
            repo_models=self.rules.models,
        )

    def _fields(self, agent: AgentConfig) -> dict[str, Any]:
        tools = self.rules.default_tools if agent.tools is None else agent.tools
        return {
            "instructions": agent.instructions,
            "tools": list(tools),
            "model": agent.model,
            "effort": agent.effort,
            "description": agent.description,
        }


def local_agent_types(settings: Settings, repo: Path | None) -> dict[str, AgentType]:
    """For `bot workflow run --repo`: the app's types plus those of the repository's
    `.github/bot.yml` as committed at its HEAD (the commit the run reads), checked by the
    same rules; `_extends` is not followed there. Raises ConfigError for an invalid file."""
    types = RunAgentTypes.from_settings(settings)
    if repo is None:
        return dict(types.app)
    spec = f"HEAD:{CONFIG_PATH}"
    if run_git(["cat-file", "-e", spec], repo, check=False).returncode != 0:
        return dict(types.app)
    text = run_git(["show", spec], repo).stdout.decode("utf-8", "replace")
    return types(parse_repo_config(text, agent_rules=types.rules))
