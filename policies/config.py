"""RepoConfig: the schema of `.github/bot.yml`, with defaults and line-referenced errors."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

__all__ = [
    "CONFIG_PATH",
    "AgentConfig",
    "CommandsConfig",
    "ConfigError",
    "ConfigProblem",
    "ExtendsTarget",
    "FixConfig",
    "RepoConfig",
    "ReviewConfig",
    "TriageConfig",
    "extends_target",
    "load_config_data",
    "merge_repo_config",
    "parse_extends",
    "parse_repo_config",
]

CONFIG_PATH = ".github/bot.yml"
MAX_CONFIG_BYTES = 128 * 1024
"""Larger files are refused before parsing."""
MAX_CONFIG_NODES = 10_000
"""Values counted with aliases expanded; more means an alias bomb or a runaway file."""

Effort = Literal["off", "minimal", "low", "medium", "high", "xhigh", "max"]
_AGENT_NAME = r"^[a-z][a-z0-9_-]{0,39}$"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ReviewConfig(_Section):
    """Automatic pull request reviews."""

    enabled: bool = Field(True, description="Offer reviews here at all (also `@app review`).")
    auto: bool = Field(True, description="Review pull requests when opened or updated.")
    drafts: bool = Field(False, description="Also review draft pull requests automatically.")
    max_files: int = Field(
        50, ge=1, le=3000, description="Review at most this many changed files; list the rest."
    )
    ignore_paths: list[str] = Field(
        default_factory=list, description="Glob patterns of paths the review leaves out."
    )


class TriageConfig(_Section):
    """Triage of newly opened issues."""

    enabled: bool = Field(True, description="Triage issues when they are opened.")


class CommandsConfig(_Section):
    """Comment commands (`@app review`, `@app ask ...`)."""

    enabled: bool = Field(True, description="Answer commands given in comments.")


class FixConfig(_Section):
    """The `fix` command, the one that writes code and pushes a branch."""

    enabled: bool = Field(True, description="Allow `fix` to change code on a new branch.")


class AgentConfig(_Section):
    """A custom agent type a workflow can ask for by name."""

    name: str = Field(pattern=_AGENT_NAME, description="Lower-case name, e.g. `security`.")
    description: str = Field("", description="What the agent is for, one line.")
    instructions: str = Field(min_length=1, description="The agent's standing instructions.")
    tools: list[str] | None = Field(
        None, description="Tool names; the runtime checks them. Default: read-only tools."
    )
    model: str | None = Field(None, description="Model name; default: the deployment's.")
    effort: Effort | None = Field(None, description="Reasoning effort; default: the model's.")


class RepoConfig(_Section):
    """Per-repository behaviour, read from `.github/bot.yml` on the default branch."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)

    enabled: bool = Field(True, description="Set to false to turn the app off here.")
    extends: str | None = Field(
        None,
        alias="_extends",
        description="Inherit from `repo`, `owner/repo` or `owner/repo:path.yml` first.",
    )
    language: str | None = Field(
        None, max_length=40, description="Language for replies, e.g. `en` or `German`."
    )
    slash_commands: bool = Field(
        False, description="Also accept `/<command>` at the start of a comment line."
    )
    ignore_authors: list[str] = Field(
        default_factory=list, description="Logins whose events never start a run."
    )
    review: ReviewConfig = Field(
        ReviewConfig.model_validate({}), description="Automatic pull request reviews."
    )
    triage: TriageConfig = Field(
        TriageConfig.model_validate({}), description="Triage of new issues."
    )
    commands: CommandsConfig = Field(
        CommandsConfig.model_validate({}), description="Comment commands."
    )
    fix: FixConfig = Field(FixConfig.model_validate({}), description="The `fix` command.")
    agents: list[AgentConfig] = Field(
        default_factory=list, description="Custom agent types, each with a unique name."
    )

    @field_validator("extends")
    @classmethod
    def _check_extends(cls, value: str | None) -> str | None:
        if value is not None:
            parse_extends(value)
        return value

    @field_validator("agents")
    @classmethod
    def _unique_agents(cls, value: list[AgentConfig]) -> list[AgentConfig]:
        names = [agent.name for agent in value]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"agent names must be unique; repeated: {', '.join(repeated)}")
        return value


# --- errors -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """One thing wrong with a config file, with where it is when that is known."""

    message: str
    key: str = ""
    line: int | None = None
    column: int | None = None

    def render(self, file: str) -> str:
        where = file
        if self.line is not None:
            where += f" line {self.line}"
            if self.column is not None and not self.key:
                where += f", column {self.column}"
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"


class ConfigError(ValueError):
    """The repository config cannot be used; the message says where and what to fix."""

    def __init__(self, problems: Sequence[ConfigProblem], *, file: str = CONFIG_PATH) -> None:
        self.problems = tuple(problems)
        self.file = file
        super().__init__("\n".join(problem.render(file) for problem in self.problems))


# --- YAML with positions ------------------------------------------------------------------

Loc = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class _Marks:
    """Where each key (and its value) sits in the file, by path."""

    keys: dict[Loc, yaml.Mark]
    values: dict[Loc, yaml.Mark]


def _walk(node: yaml.Node, loc: Loc, marks: _Marks, problems: list[ConfigProblem]) -> None:
    stack: list[tuple[yaml.Node, Loc]] = [(node, loc)]
    seen = 0
    while stack:
        current, here = stack.pop()
        seen += 1
        if seen > MAX_CONFIG_NODES:
            raise ConfigError(
                [ConfigProblem(f"too many values (over {MAX_CONFIG_NODES}, aliases expanded)")]
            )
        marks.values.setdefault(here, current.start_mark)
        if isinstance(current, yaml.SequenceNode):
            stack.extend((item, (*here, i)) for i, item in enumerate(current.value))
        elif isinstance(current, yaml.MappingNode):
            names: set[str] = set()
            for key_node, value_node in current.value:
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
                line = key_node.start_mark.line + 1
                if key is None or key_node.tag != "tag:yaml.org,2002:str":
                    problems.append(ConfigProblem("keys must be plain text", _dotted(here), line))
                    continue
                if key in names:
                    problems.append(ConfigProblem("duplicate key", _dotted((*here, key)), line))
                names.add(key)
                marks.keys.setdefault((*here, key), key_node.start_mark)
                stack.append((value_node, (*here, key)))


def _syntax_problem(exc: yaml.YAMLError) -> ConfigProblem:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        text = " ".join(part for part in (exc.context, exc.problem) if part)
        if mark is not None:
            return ConfigProblem(f"invalid YAML: {text}", "", mark.line + 1, mark.column + 1)
        return ConfigProblem(f"invalid YAML: {text}")
    return ConfigProblem(f"invalid YAML: {exc}")


def _load(text: str | None, file: str) -> tuple[dict[str, object], _Marks]:
    marks = _Marks({}, {})
    if text is None or not text.strip():
        return {}, marks
    if len(text.encode("utf-8", "replace")) > MAX_CONFIG_BYTES:
        raise ConfigError([ConfigProblem(f"file is over {MAX_CONFIG_BYTES} bytes")], file=file)
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return {}, marks
        problems: list[ConfigProblem] = []
        data = loader.construct_document(node)
        _walk(node, (), marks, problems)
    except yaml.YAMLError as exc:
        raise ConfigError([_syntax_problem(exc)], file=file) from None
    except RecursionError:
        raise ConfigError([ConfigProblem("values are nested too deeply")], file=file) from None
    except ConfigError as exc:
        raise ConfigError(exc.problems, file=file) from None
    finally:
        loader.dispose()
    if data is None:
        return {}, marks
    if not isinstance(data, dict):
        found = ConfigProblem(f"expected a mapping of keys to values, got {_got(data)}", "", 1)
        raise ConfigError([found], file=file)
    if problems:
        raise ConfigError(problems, file=file)
    return data, marks


def load_config_data(text: str | None, *, file: str = CONFIG_PATH) -> dict[str, object]:
    """The raw mapping in a config file (used for `_extends` targets); None or empty -> {}."""
    return _load(text, file)[0]


# --- validation errors mapped to lines ----------------------------------------------------


def _dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def _got(value: object) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _model_at(loc: Loc) -> type[BaseModel] | None:
    """The model class whose field list applies at `loc`, following nested sections."""
    model: type[BaseModel] = RepoConfig
    for part in loc:
        if isinstance(part, int):
            continue
        field = next((f for name, f in model.model_fields.items() if part in (name, f.alias)), None)
        annotation = field.annotation if field else None
        inner = _section_type(annotation)
        if inner is None:
            return None
        model = inner
    return model


def _section_type(annotation: object) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _section_type(arg)
        if found is not None:
            return found
    return None


def _keys(model: type[BaseModel]) -> str:
    return ", ".join(f.alias or name for name, f in model.model_fields.items())


_EXPECTED = {
    "bool_type": "expected true or false",
    "int_type": "expected a whole number",
    "string_type": "expected text",
    "list_type": "expected a list",
    "model_type": "expected a mapping of keys to values",
    "dict_type": "expected a mapping of keys to values",
}


def _explain(error: Mapping[str, object], loc: Loc) -> str:
    kind = str(error["type"])
    raw_ctx = error.get("ctx")
    ctx: Mapping[str, object] = raw_ctx if isinstance(raw_ctx, Mapping) else {}
    msg = str(error["msg"])
    got = _got(error.get("input"))
    if kind in _EXPECTED:
        return f"{_EXPECTED[kind]}, got {got}"
    if kind == "extra_forbidden":
        model = _model_at(loc[:-1])
        known = f"; expected one of: {_keys(model)}" if model else ""
        return f"unknown key{known}"
    if kind == "missing":
        return "required, but missing"
    if kind == "literal_error":
        return f"expected one of {ctx.get('expected', '')}, got {got}"
    if kind == "string_pattern_mismatch":
        return f"expected a lower-case name of letters, digits, - and _, got {got}"
    if kind == "value_error":
        return str(ctx.get("error", msg))
    return f"{msg[:1].lower()}{msg[1:]}, got {got}"


def _problem(error: Mapping[str, object], marks: _Marks) -> ConfigProblem:
    raw_loc = error["loc"]
    loc: Loc = tuple(raw_loc) if isinstance(raw_loc, tuple) else ()
    message = _explain(error, loc)
    mark: yaml.Mark | None
    if error["type"] == "extra_forbidden":
        mark = marks.keys.get(loc)
    elif error["type"] == "missing":
        # The key is absent, so point at the mapping that lacks it.
        mark = next(
            (
                marks.values[loc[:end]]
                for end in range(len(loc) - 1, 0, -1)
                if loc[:end] in marks.values
            ),
            None,
        )
    else:
        mark = marks.values.get(loc)
    if mark is None:
        return ConfigProblem(f"{message} (in the `_extends` config)", _dotted(loc))
    return ConfigProblem(message, _dotted(loc), mark.line + 1)


def parse_repo_config(
    text: str | None,
    *,
    base: Mapping[str, object] | None = None,
    file: str = CONFIG_PATH,
) -> RepoConfig:
    """Validate a `.github/bot.yml` text into a RepoConfig; None or empty gives the defaults.

    `base` is the data this file extends (already resolved by the caller), merged under it.
    Raises ConfigError naming the file, the line of each problem and what is expected, e.g.
    `.github/bot.yml line 4: review.drafts: expected true or false, got "sometimes"`.
    """
    data, marks = _load(text, file)
    merged = merge_repo_config(base, data) if base else data
    try:
        return RepoConfig.model_validate(merged)
    except ValidationError as exc:
        problems = [_problem(error, marks) for error in exc.errors()]
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
            f"expected `repo`, `owner/repo` or `owner/repo:path/file.yml`, got {_got(value)}"
        )
    return ExtendsTarget(owner=match.group("owner"), repo=repo, path=path)


def extends_target(data: Mapping[str, object], *, file: str = CONFIG_PATH) -> str | None:
    """The checked `_extends` value of raw config data, or None when it extends nothing."""
    value = data.get("_extends")
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(
            [ConfigProblem(f"expected text, got {_got(value)}", "_extends")], file=file
        )
    try:
        parse_extends(value)
    except ValueError as exc:
        raise ConfigError([ConfigProblem(str(exc), "_extends")], file=file) from None
    return value.strip()
