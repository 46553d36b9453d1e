"""Checks of `.github/bot.yml` values that go further than their types: `language`, and
`agents` against what the deployment allows (`AgentRules`).

Each raises ValueError with the message the config's error shows at the value's line.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

from policies._config_yaml import got

MAX_LANGUAGE_CHARS = 35


def checked_language(value: object) -> str | None:
    """A `language` value as the prompts may carry it; None when empty (or None).

    The file is the repository's text, and the value goes into every published agent's
    task, so only a language's name or tag passes: letters (any script), digits, and single
    spaces or hyphens between them, starting with a letter, at most MAX_LANGUAGE_CHARS
    characters (`German`, `pt-BR`, `zh-Hant-TW`, `Brazilian Portuguese`). No punctuation,
    line break, markup or invisible character can get through.
    """
    if value is None:
        return None
    text = unicodedata.normalize("NFC", value.strip()) if isinstance(value, str) else None
    if text == "":
        return None
    if text is None or len(text) > MAX_LANGUAGE_CHARS or not _language_shape(text):
        raise ValueError(
            "expected a language name or tag of letters, digits, spaces and hyphens (at most "
            f"{MAX_LANGUAGE_CHARS} characters, e.g. `German` or `pt-BR`), got {got(value)}"
        )
    return text


def _language_shape(text: str) -> bool:
    words = text.replace("-", " ").split(" ")
    return (
        text[0].isalpha()
        and all(words)  # no leading, trailing or doubled separator
        and all(char.isalpha() or char in "0123456789" for word in words for char in word)
    )


@dataclass(frozen=True, slots=True)
class AgentRules:
    """What the deployment lets a repository's own agent types (`agents`) have.

    The app's settings decide these, and the caller that reads the file passes them in:
    `taken`, the names of the built-in and the operator's types (a repository type cannot
    take one); `tools`, the tools a repository type may list (BOT_REPO_AGENT_TOOLS);
    `default_tools`, what a type that lists none gets; `known_tools`, every tool there is;
    `models`, the models a repository type may name (those the operator configured).
    """

    taken: frozenset[str]
    tools: frozenset[str]
    default_tools: tuple[str, ...]
    known_tools: frozenset[str]
    models: frozenset[str]


def rules_of(context: object) -> AgentRules | None:
    """The rules in a validation context (`{"agent_rules": ...}`), if any."""
    rules = context.get("agent_rules") if isinstance(context, Mapping) else None
    return rules if isinstance(rules, AgentRules) else None


def check_agent_name(name: str, rules: AgentRules | None) -> str:
    if rules is not None and name in rules.taken:
        raise ValueError(
            f"`{name}` is an agent type of this app already "
            f"({', '.join(sorted(rules.taken))}); choose another name"
        )
    return name


def check_agent_tools(tools: list[str] | None, rules: AgentRules | None) -> list[str] | None:
    if rules is None or tools is None:
        return tools
    unknown = sorted(set(tools) - rules.known_tools)
    if unknown:
        raise ValueError(
            f"unknown tool(s) {', '.join(unknown)}; known tools: "
            + ", ".join(sorted(rules.known_tools))
        )
    denied = sorted(set(tools) - rules.tools)
    if denied:
        raise ValueError(
            f"tool(s) {', '.join(denied)} are not allowed for a repository's agent types "
            "here; this app allows: " + (", ".join(sorted(rules.tools)) or "none")
        )
    return tools


def check_agent_model(model: str | None, rules: AgentRules | None) -> str | None:
    if rules is None or model is None or model in rules.models:
        return model
    if not rules.models:
        raise ValueError(
            f"{got(model)} cannot be chosen: this app lets a repository choose no model: "
            "leave `model` out"
        )
    raise ValueError(
        f"{got(model)} is not a model this app is configured with; name one of "
        f"{', '.join(sorted(rules.models))}, or leave `model` out"
    )
