"""RepoConfig: the schema of `.github/bot.yml`, with defaults and line-referenced errors."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from policies._config_checks import (
    MAX_LANGUAGE_CHARS,
    AgentRules,
    check_agent_model,
    check_agent_name,
    check_agent_tools,
    checked_language,
    rules_of,
)
from policies._config_yaml import (
    CONFIG_PATH,
    MAX_CONFIG_BYTES,
    MAX_CONFIG_NODES,
    ConfigError,
    ConfigProblem,
    got,
    load_yaml,
    problem_at,
)

__all__ = [
    "CONFIG_PATH",
    "MAX_CONFIG_BYTES",
    "MAX_CONFIG_NODES",
    "MAX_LANGUAGE_CHARS",
    "AgentConfig",
    "AgentRules",
    "AutoPause",
    "CommandsConfig",
    "ConfigError",
    "ConfigProblem",
    "ExtendsTarget",
    "FixConfig",
    "PathInstructions",
    "RepoConfig",
    "ReviewConfig",
    "TriageConfig",
    "checked_language",
    "extends_target",
    "load_config_data",
    "merge_repo_config",
    "parse_extends",
    "parse_repo_config",
]


Effort = Literal["off", "minimal", "low", "medium", "high", "xhigh", "max"]
_AGENT_NAME = r"^[a-z][a-z0-9_-]{0,39}$"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class AutoPause(_Section):
    """When automatic reviews of one pull request pause: `pushes` of them within `minutes`."""

    pushes: int = Field(
        ge=1, le=100, description="Automatic reviews of one pull request before it pauses."
    )
    minutes: int = Field(
        ge=1, le=1440, description="The window, in minutes, those reviews are counted in."
    )


class PathInstructions(_Section):
    """Review instructions for the files some globs match."""

    paths: list[str] = Field(
        min_length=1,
        max_length=50,
        description="Glob patterns of the files these instructions are about.",
    )
    instructions: str = Field(
        min_length=1,
        max_length=4000,
        description="What reviewers should look for in those files.",
    )


class ReviewConfig(_Section):
    """Pull request reviews."""

    enabled: bool = Field(
        default=True, description="Offer reviews here at all (also `@app review`)."
    )
    auto: bool = Field(default=True, description="Review pull requests when opened or updated.")
    drafts: bool = Field(
        default=False, description="Also review draft pull requests automatically."
    )
    max_files: int = Field(
        default=50,
        ge=1,
        le=3000,
        description="Review at most this many changed files; list the rest.",
    )
    max_tokens: int = Field(
        default=200_000,
        ge=1_000,
        le=5_000_000,
        description="Input tokens the file reviews may use; the rest are listed as over budget.",
    )
    paths: list[str] = Field(
        default_factory=list,
        max_length=200,
        description="Glob patterns of the only paths to review (empty: every path).",
    )
    ignore: list[str] = Field(
        default_factory=list, max_length=200, description="Glob patterns of paths to leave out."
    )
    ignore_paths: list[str] = Field(
        default_factory=list,
        max_length=200,
        description="The former name of `ignore`; both lists apply.",
    )
    max_comments: int = Field(
        default=10,
        ge=0,
        le=50,
        description="Inline comments per review, the most severe first; the rest are listed in "
        "the review's body and the summary.",
    )
    max_suggestions: int = Field(
        default=5, ge=0, le=20, description="Fixes to try and prove per review."
    )
    max_findings: int = Field(
        default=50,
        ge=1,
        le=500,
        description="Candidate findings per reviewed unit and per review; the most severe "
        "are kept.",
    )
    check_command: str | None = Field(
        default=None,
        max_length=500,
        description="The command that must pass on a suggested fix (run sandboxed, offline).",
    )
    check_timeout: int = Field(
        default=300, ge=10, le=1800, description="Seconds the check command may run."
    )
    fail_on: Literal["never", "critical", "high", "medium", "low"] = Field(
        default="never",
        description="Fail the review check when an open finding is at least this severe.",
    )
    lint_command: str | None = Field(
        default=None,
        max_length=500,
        description="A linter whose hits on changed lines become candidate findings, run "
        "sandboxed on the head; `{files}` stands for the reviewed files.",
    )
    lint_timeout: int = Field(
        default=120, ge=10, le=1800, description="Seconds the lint command may run."
    )
    lint: Literal["auto", "always"] = Field(
        default="auto",
        description="`auto`: skip the lint command when another App's check of the same tool "
        "already reported on the head; `always`: run it anyway.",
    )
    min_severity: Literal["critical", "high", "medium", "low", "info"] = Field(
        default="low",
        description="Inline comments only for findings at least this severe; the others are "
        "listed, collapsed, in the summary.",
    )
    quiet: bool = Field(
        default=False,
        description="An automatic follow-up review that finds nothing new and changes no "
        "finding's state posts nothing; only its check run says so.",
    )
    auto_pause: AutoPause | None = Field(
        default=None,
        description="Pause automatic reviews of a pull request after `pushes` of them within "
        "`minutes` (`@app resume` turns them on again).",
    )
    instructions: str | None = Field(
        default=None,
        max_length=4000,
        description="Instructions for every review here, with AGENTS.md, CLAUDE.md and "
        "the Copilot instruction files read at the pull request's base.",
    )
    path_instructions: list[PathInstructions] = Field(
        default_factory=list,
        max_length=50,
        description="Instructions for the review of the files that `paths` match only.",
    )
    prove_severity: Literal["critical", "high", "medium", "low", "info"] = Field(
        default="high",
        description="Prove verified findings of the categories a test can show (bug, "
        "security, error-handling, concurrency) at least this severe with a failing test.",
    )
    test_command: str | None = Field(
        default=None,
        max_length=500,
        description="The command that runs a proof's test, sandboxed and offline, e.g. "
        "`pytest -q {tests}` (`{tests}`: the test files); none: nothing is proven.",
    )
    require_proof: bool = Field(
        default=False,
        description="Post findings that could be proven inline only when their test "
        "reproduced them; the others are listed in the summary as not reproduced.",
    )
    max_proofs: int = Field(
        default=5, ge=0, le=20, description="Findings to prove per review, the most severe first."
    )


class TriageConfig(_Section):
    """Triage of newly opened issues."""

    enabled: bool = Field(default=True, description="Triage issues when they are opened.")
    apply_labels: bool = Field(
        default=False,
        description="Apply the labels triage chose that `labels` lists (otherwise only suggest).",
    )
    labels: list[str] = Field(
        default_factory=list,
        max_length=100,
        description="The only labels triage may apply (any case); with none, it applies none.",
    )


class CommandsConfig(_Section):
    """Comment commands (`@app review`, `@app ask ...`)."""

    enabled: bool = Field(default=True, description="Answer commands given in comments.")
    per_hour: int = Field(
        default=20,
        ge=1,
        le=1000,
        description="Commands one person may give in this repository per hour; past it, one "
        "short reply says so and the rest of the hour's commands are ignored.",
    )


class BudgetConfig(_Section):
    """What one run may use here, capped by the operator's BOT_MAX_RUN_TOKENS and
    BOT_MAX_RUN_COST_USD (`policies.budget`)."""

    max_tokens: int | None = Field(
        default=None,
        description="Model tokens one run may use (sent and received); a run that reaches it "
        "stops starting model calls and says what it did not do. Empty: the operator's cap.",
    )
    max_cost_usd: float | None = Field(
        default=None,
        description="US dollars one run may cost (from BOT_MODEL_PRICES); reached, the run "
        "stops the same way. Empty: the operator's cap.",
    )

    @field_validator("max_cost_usd", mode="before")
    @classmethod
    def _cost_number(cls, value: object) -> object:
        # YAML's `2` is an int; a cost is a number either way (strict mode takes no int).
        if isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        return value

    @field_validator("max_tokens", "max_cost_usd")
    @classmethod
    def _above_zero(cls, value: float | None) -> float | None:
        if value is not None and not 0 < value < float("inf"):
            raise ValueError(
                f"a budget must be more than 0, got {value:g}; leave the key out to use the "
                "operator's limit"
            )
        return value


class FixConfig(_Section):
    """The `fix` command, the one that writes code and pushes a branch."""

    enabled: bool = Field(default=True, description="Allow `fix` to change code on a new branch.")
    check_command: str | None = Field(
        default=None,
        max_length=500,
        description="The command a fix must be checked with (run sandboxed, offline).",
    )
    check_timeout: int = Field(
        default=300, ge=10, le=1800, description="Seconds the check command may run."
    )
    protected_paths: list[str] = Field(
        default_factory=list,
        max_length=200,
        description="Glob patterns of paths a fix may not change without a decision.",
    )
    max_deleted_lines: int = Field(
        default=200,
        ge=0,
        le=1_000_000,
        description="Deleted lines a fix may make in total before it needs a decision.",
    )
    max_iterations: int = Field(
        default=5,
        ge=0,
        le=100,
        description="Commits a writer's reviews may ask for on one of the app's own pull "
        "requests; past it, a note and nothing more.",
    )


class AgentConfig(_Section):
    """A custom agent type a workflow can ask for by name."""

    name: str = Field(pattern=_AGENT_NAME, description="Lower-case name, e.g. `security`.")
    description: str = Field(
        default="",
        max_length=200,
        description="What the agent is for, one line; the agent is told it as its role.",
    )
    instructions: str = Field(
        min_length=1, max_length=8000, description="The agent's standing instructions."
    )
    tools: list[str] | None = Field(
        default=None,
        max_length=32,
        description="Tool names, only those the operator allows repositories. Default: the "
        "read-only ones it allows.",
    )
    model: str | None = Field(
        default=None,
        max_length=100,
        description="A model the operator configured; default: the deployment's.",
    )
    effort: Effort | None = Field(
        default=None, description="Reasoning effort; default: the model's."
    )

    @field_validator("name")
    @classmethod
    def _name_free(cls, value: str, info: ValidationInfo) -> str:
        return check_agent_name(value, rules_of(info.context))

    @field_validator("tools")
    @classmethod
    def _tools_allowed(cls, value: list[str] | None, info: ValidationInfo) -> list[str] | None:
        return check_agent_tools(value, rules_of(info.context))

    @field_validator("model")
    @classmethod
    def _model_configured(cls, value: str | None, info: ValidationInfo) -> str | None:
        return check_agent_model(value, rules_of(info.context))


class RepoConfig(_Section):
    """Per-repository behaviour, read from `.github/bot.yml` on the default branch."""

    enabled: bool = Field(default=True, description="Set to false to turn the app off here.")
    extends: str | None = Field(
        default=None,
        alias="_extends",
        description="Inherit from `repo`, `owner/repo` or `owner/repo:path.yml` first.",
    )
    language: str | None = Field(
        default=None,
        max_length=MAX_LANGUAGE_CHARS,
        description="The language of what the app writes with a model, e.g. `German` or "
        "`pt-BR`; empty: the issue's or pull request's own.",
    )
    slash_commands: bool = Field(
        default=False, description="Also accept `/<command>` at the start of a comment line."
    )
    ignore_authors: list[str] = Field(
        default_factory=list, description="Logins whose events never start a run."
    )
    review: ReviewConfig = Field(
        default=ReviewConfig(), description="Automatic pull request reviews."
    )
    triage: TriageConfig = Field(default=TriageConfig(), description="Triage of new issues.")
    commands: CommandsConfig = Field(default=CommandsConfig(), description="Comment commands.")
    fix: FixConfig = Field(default=FixConfig(), description="The `fix` command.")
    agents: list[AgentConfig] = Field(
        default_factory=list, description="Custom agent types, each with a unique name."
    )
    budget: BudgetConfig = Field(
        default=BudgetConfig(), description="What one run may use (tokens, cost)."
    )

    @field_validator("extends")
    @classmethod
    def _check_extends(cls, value: str | None) -> str | None:
        if value is not None:
            parse_extends(value)
        return value

    @field_validator("language")
    @classmethod
    def _check_language(cls, value: str | None) -> str | None:
        return checked_language(value)

    @field_validator("agents")
    @classmethod
    def _unique_agents(cls, value: list[AgentConfig]) -> list[AgentConfig]:
        names = [agent.name for agent in value]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"agent names must be unique; repeated: {', '.join(repeated)}")
        return value


def load_config_data(text: str | None, *, file: str = CONFIG_PATH) -> dict[str, object]:
    """The raw mapping in a config file (used for `_extends` targets); None or empty -> {}."""
    return load_yaml(text, file)[0]


def parse_repo_config(
    text: str | None,
    *,
    base: Mapping[str, object] | None = None,
    file: str = CONFIG_PATH,
    agent_rules: AgentRules | None = None,
) -> RepoConfig:
    """Validate a `.github/bot.yml` text into a RepoConfig; None or empty gives the defaults.

    `base` is the data this file extends (already resolved by the caller), merged under it.
    `agent_rules` (from the app's settings) also checks each of `agents` against what the
    deployment allows; without them only the schema is checked.
    Raises ConfigError naming the file, the line of each problem and what is expected, e.g.
    `.github/bot.yml line 4: review.drafts: expected true or false, got "sometimes"`.
    """
    data, marks = load_yaml(text, file)
    merged = merge_repo_config(base, data) if base else data
    try:
        return RepoConfig.model_validate(merged, context={"agent_rules": agent_rules})
    except ValidationError as exc:
        problems = [problem_at(error, marks, RepoConfig) for error in exc.errors()]
        problems.sort(key=lambda p: (p.line is None, p.line or 0, p.key))
        raise ConfigError(problems, file=file) from None


# --- _extends -----------------------------------------------------------------------------


def merge_repo_config(
    base: Mapping[str, object] | None, override: Mapping[str, object] | None
) -> dict[str, object]:
    """Deep merge: mappings merge key by key, anything else in `override` replaces `base`."""
    merged: dict[str, object] = dict(base or {})
    for key, value in (override or {}).items():
        under = merged.get(key)
        if isinstance(under, Mapping) and isinstance(value, Mapping):
            merged[key] = merge_repo_config(under, value)
        else:
            merged[key] = value
    return merged


@dataclass(frozen=True, slots=True)
class ExtendsTarget:
    """The file an `_extends` value points to; owner None means the same owner."""

    owner: str | None
    repo: str
    path: str = CONFIG_PATH


_OWNER = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})"
_REPO = r"[A-Za-z0-9._-]{1,100}"
_EXTENDS = re.compile(rf"(?:(?P<owner>{_OWNER})/)?(?P<repo>{_REPO})(?::(?P<path>[^\s:]+))?")
_PATH_PART = re.compile(r"[A-Za-z0-9._-]+")


def _path_ok(path: str) -> bool:
    parts = path.split("/")
    return (
        path.endswith((".yml", ".yaml"))
        and all(_PATH_PART.fullmatch(part) for part in parts)
        and not any(part in (".", "..") for part in parts)
    )


def parse_extends(value: str) -> ExtendsTarget:
    """Read `repo`, `owner/repo`, `repo:path.yml` or `owner/repo:path.yml`."""
    match = _EXTENDS.fullmatch(value.strip())
    repo = match.group("repo") if match else ""
    path = (match.group("path") if match else None) or CONFIG_PATH
    if match is None or repo in (".", "..") or not _path_ok(path):
        raise ValueError(
            f"expected `repo`, `owner/repo` or `owner/repo:path/file.yml`, got {got(value)}"
        )
    return ExtendsTarget(owner=match.group("owner"), repo=repo, path=path)


def extends_target(data: Mapping[str, object], *, file: str = CONFIG_PATH) -> str | None:
    """The checked `_extends` value of raw config data, or None when it extends nothing.

    Resolving a chain (the fetching is the caller's): read the repository's file with
    load_config_data(); while extends_target() names another file, fetch it from that
    repository's default branch, read it with load_config_data(text, file=target) and
    stop with a ConfigError if a target repeats (a loop); then merge the chain, farthest
    first, with merge_repo_config() and call parse_repo_config(text, base=merged), so
    errors in the repository's own file keep their line numbers.
    """
    value = data.get("_extends")
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(
            [ConfigProblem(f"expected text, got {got(value)}", "_extends")], file=file
        )
    try:
        parse_extends(value)
    except ValueError as exc:
        raise ConfigError([ConfigProblem(str(exc), "_extends")], file=file) from None
    return value.strip()
