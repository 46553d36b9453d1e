"""RepoConfig: defaults, the files in fixtures/config, line-referenced errors, `_extends`."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from policies._config_yaml import ConfigProblem, Marks, _Loader, got, problem_at
from policies.config import (
    CONFIG_PATH,
    MAX_CONFIG_BYTES,
    AgentConfig,
    ConfigError,
    ExtendsTarget,
    RepoConfig,
    extends_target,
    load_config_data,
    merge_repo_config,
    parse_extends,
    parse_repo_config,
)

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "fixtures" / "config"
EXAMPLE = ROOT / "docs" / "bot.yml.example"


def fixture(name: str) -> str:
    return (CONFIGS / name).read_text()


def error_of(text: str | None, **kwargs: object) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        parse_repo_config(text, **kwargs)  # type: ignore[arg-type]
    return caught.value


# --- defaults and valid files -------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(None, id="no-file"),
        pytest.param("", id="empty"),
        pytest.param("  \n\n", id="blank"),
        pytest.param("# only a comment\n", id="comment"),
        pytest.param("---\n", id="empty-document"),
        pytest.param("~\n", id="null"),
    ],
)
def test_missing_or_empty_gives_defaults(text: str | None) -> None:
    assert parse_repo_config(text) == RepoConfig()


def test_defaults() -> None:
    config = RepoConfig()
    assert config.enabled and not config.slash_commands
    assert config.review.enabled and config.review.auto and not config.review.drafts
    assert config.review.max_files == 50 and config.review.ignore_paths == []
    assert config.triage.enabled and config.commands.enabled and config.fix.enabled
    assert (config.language, config.extends, config.ignore_authors, config.agents) == (
        None,
        None,
        [],
        [],
    )


def test_fix_and_triage_settings() -> None:
    assert (RepoConfig().fix.check_command, RepoConfig().fix.check_timeout) == (None, 300)
    assert (RepoConfig().fix.protected_paths, RepoConfig().fix.max_deleted_lines) == ([], 200)
    assert RepoConfig().triage.apply_labels is False
    assert RepoConfig().triage.labels == []  # an allow-list: empty applies nothing
    text = (
        "triage: {apply_labels: true, labels: [bug, docs]}\n"
        "fix:\n  check_command: make test\n  check_timeout: 60\n"
        '  protected_paths: ["deploy/**"]\n  max_deleted_lines: 0\n'
    )
    config = parse_repo_config(text)
    assert config.triage.apply_labels is True
    assert config.triage.labels == ["bug", "docs"]
    assert (config.fix.check_command, config.fix.check_timeout) == ("make test", 60)
    assert (config.fix.protected_paths, config.fix.max_deleted_lines) == (["deploy/**"], 0)
    with pytest.raises(ConfigError, match=r"fix\.check_timeout"):
        parse_repo_config("fix: {check_timeout: 5}\n")
    with pytest.raises(ConfigError, match=r"triage\.labels"):
        parse_repo_config("triage: {labels: bug}\n")


def test_full_file() -> None:
    config = parse_repo_config(fixture("full.yml"))
    assert config.language == "German"
    assert config.slash_commands is True
    assert config.ignore_authors == ["renovate-user", "Some-Bot-Account"]
    assert (config.review.auto, config.review.drafts, config.review.max_files) == (False, True, 20)
    assert config.review.ignore_paths == ["docs/**", "*.lock"]
    assert (config.triage.enabled, config.fix.enabled) == (False, False)
    assert config.agents[0] == AgentConfig(
        name="security",
        description="Looks for injection and secrets in changed code.",
        instructions="Review only for security problems. Cite the file and line of each.\n",
        tools=["read", "grep", "find", "ls"],
        model="gpt-4.1-mini",
        effort="high",
    )
    assert (config.agents[1].tools, config.agents[1].model, config.agents[1].effort) == (
        None,
        None,
        None,
    )


def test_disabled_file() -> None:
    assert parse_repo_config(fixture("disabled.yml")).enabled is False


def test_extends_is_read_and_checked() -> None:
    assert parse_repo_config(fixture("extends.yml")).extends == "acme/.github:policies/bot.yml"


def test_yaml_merge_keys_work() -> None:
    text = "review:\n  <<: {drafts: true, max_files: 3}\n  max_files: 4\n"
    review = parse_repo_config(text).review
    assert (review.enabled, review.auto, review.drafts, review.max_files) == (True, True, True, 4)


def test_config_is_frozen() -> None:
    config = RepoConfig()
    with pytest.raises(ValidationError):
        config.enabled = False  # type: ignore[misc]


def _models(model: type[BaseModel]) -> list[type[BaseModel]]:
    found = [model]
    for field in model.model_fields.values():
        for arg in (field.annotation, *getattr(field.annotation, "__args__", ())):
            for inner in (arg, *getattr(arg, "__args__", ())):
                if isinstance(inner, type) and issubclass(inner, BaseModel):
                    found += _models(inner)
    return found


def test_every_field_is_documented() -> None:
    for model in _models(RepoConfig):
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no description"


def test_example_file_is_valid_and_names_every_field() -> None:
    text = EXAMPLE.read_text()
    parse_repo_config(text)
    for model in _models(RepoConfig):
        for name, field in model.model_fields.items():
            assert f"{field.alias or name}:" in text, f"{name} is not in {EXAMPLE.name}"


# --- errors -------------------------------------------------------------------------------

ERRORS = [
    pytest.param(
        fixture("wrong-types.yml"),
        [
            'line 4: review.drafts: expected true or false, got "sometimes"',
            'line 5: review.max_files: expected a whole number, got "many"',
            'line 6: ignore_authors: expected a list, got "octocat"',
            "line 8: agents[0].instructions: required, but missing",
            'line 8: agents[0].name: expected a lower-case name of letters, digits, - and _, got "Security Checker"',
            "line 9: agents[0].effort: expected one of 'off', 'minimal', 'low', 'medium', 'high', 'xhigh' or 'max', got \"extreme\"",
        ],
        id="wrong-types",
    ),
    pytest.param(
        fixture("typo.yml"),
        [
            "line 3: review.draft: unknown key; did you mean `drafts`? expected one of: enabled, auto, drafts, max_files, max_tokens, paths, ignore, ignore_paths, max_comments, max_suggestions, max_findings, check_command, check_timeout, fail_on, lint_command, lint_timeout, lint, min_severity, quiet, auto_pause, instructions, path_instructions, prove_severity, test_command, require_proof, max_proofs",
            "line 5: triage.enabeld: unknown key; did you mean `enabled`? expected one of: enabled, apply_labels, labels",
        ],
        id="typo",
    ),
    pytest.param(fixture("syntax.yml"), ["line 3, column 14: invalid YAML: mapping values are not allowed here"], id="syntax"),
    pytest.param(fixture("not-a-mapping.yml"), ['line 1: expected a mapping of keys to values, got ["review", "triage"]'], id="not-a-mapping"),
    pytest.param(fixture("duplicate-keys.yml"), ["line 4: enabled: duplicate key"], id="duplicate-keys"),
    pytest.param(fixture("billion-laughs.yml"), ["too many values (over 10000, aliases expanded)"], id="billion-laughs"),
    pytest.param(fixture("recursive.yml"), ["line 1: alias *loop refers to a value that contains it"], id="recursive-alias"),
    pytest.param("review: &r\n  drafts: true\n  again: *r\n", ["line 3: alias *r refers to a value that contains it"], id="recursive-mapping"),
    pytest.param("x: " + "[" * 40 + "]" * 40, ["line 1: values are nested too deeply (over 32 levels)"], id="nesting-over-limit"),
    pytest.param("review: &r {drafts: true}\ntriage: *r\n", ["line 1: triage.drafts: unknown key; expected one of: enabled, apply_labels, labels"], id="alias-reused"),
    pytest.param("review: *nowhere\n", ["line 1, column 9: invalid YAML: found undefined alias 'nowhere'"], id="undefined-alias"),
    pytest.param(fixture("python-tag.yml"), ["line 1, column 10: invalid YAML: could not determine a constructor for the tag 'tag:yaml.org,2002:python/object/apply:os.system'"], id="python-tag"),
    pytest.param("x: " + "[" * 5000 + "]" * 5000, ["line 1: values are nested too deeply (over 32 levels)"], id="deep-nesting"),
    pytest.param("a" * (MAX_CONFIG_BYTES + 1), [f"file is over {MAX_CONFIG_BYTES} bytes"], id="too-large"),
    pytest.param("1: x\n", ["line 1: keys must be plain text"], id="number-key"),
    pytest.param("review:\n  ? [a]\n  : x\n", ["line 2: review: keys must be plain text"], id="complex-key"),
    pytest.param("review:\n\tdrafts: true\n", ["line 2, column 1: invalid YAML: found character '\\t' that cannot start any token (while scanning for the next token)"], id="tab"),
    pytest.param("enabled: \"yes\"\n", ['line 1: enabled: expected true or false, got "yes"'], id="quoted-bool"),
    pytest.param("review: yes\n", ["line 1: review: expected a mapping of keys to values, got true"], id="section-not-mapping"),
    pytest.param("review: {max_files: 0}\n", ["line 1: review.max_files: expected a number of at least 1, got 0"], id="below-minimum"),
    pytest.param("review: {max_files: 2.5}\n", ["line 1: review.max_files: expected a whole number, got 2.5"], id="float"),
    pytest.param("language: 2020-01-01\n", ['line 1: language: expected text, got "2020-01-01"'], id="date"),
    pytest.param("language: " + "x" * 36, [f'line 1: language: expected text of at most 35 characters, got "{"x" * 36}"'], id="too-long"),
    pytest.param("agents:\n  - {name: a, instructions: ''}\n", ['line 2: agents[0].instructions: expected text of at least 1 character(s), got ""'], id="empty-instructions"),
    pytest.param("agents:\n  - {name: a, instructions: x}\n  - {name: a, instructions: y}\n", ["line 2: agents: agent names must be unique; repeated: a"], id="duplicate-agent"),
    pytest.param("agents:\n  - {name: a, instructions: x, tool: [read]}\n", ["line 2: agents[0].tool: unknown key; did you mean `tools`? expected one of: name, description, instructions, tools, model, effort"], id="agent-typo"),
    pytest.param("agents:\n  - name: a\n    instructions: x\n    tools: [" + ", ".join(["read"] * 33) + "]\n", ["line 4: agents[0].tools: expected at most 32 items, got 33"], id="too-many-tools"),
    pytest.param("agents:\n  - {name: a, instructions: " + "x" * 8001 + "}\n", [f'line 2: agents[0].instructions: expected text of at most 8000 characters, got "{"x" * 56}...'], id="instructions-too-long"),
    pytest.param("ignore_authors: [bob, 7]\n", ["line 1: ignore_authors[1]: expected text, got 7"], id="list-item"),
    pytest.param("bogus: 1\n", ["line 1: bogus: unknown key; expected one of: enabled, _extends, language, slash_commands, ignore_authors, review, triage, commands, fix, agents, budget"], id="unknown-top-level"),
    pytest.param("_extends: ../../etc/passwd\n", ['line 1: _extends: expected `repo`, `owner/repo` or `owner/repo:path/file.yml`, got "../../etc/passwd"'], id="bad-extends"),
    pytest.param("enabled: true\n\x00\n", ["line 2, column 1: invalid YAML: character U+0000 is not allowed"], id="nul-byte"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), ERRORS)
def test_error_names_file_line_and_expectation(text: str, expected: list[str]) -> None:
    error = error_of(text)
    assert str(error).splitlines() == [
        f"{CONFIG_PATH} {line}" if line.startswith("line") else f"{CONFIG_PATH}: {line}"
        for line in expected
    ]


# Values the YAML parser accepts but cannot build: every one is a line-referenced ConfigError,
# never a plain exception (which the worker would treat as transient and retry).
UNBUILDABLE = [
    pytest.param("language: 2001-13-45\n", ['line 1, column 11: "2001-13-45" cannot be read as a date: month must be in 1..12 (quote it to keep it as text)'], id="month-13"),
    pytest.param("enabled: true\nlanguage: 2001-02-30\n", ['line 2, column 11: "2001-02-30" cannot be read as a date: day is out of range for month (quote it to keep it as text)'], id="february-30"),
    pytest.param("language: 0000-01-01\n", ['line 1, column 11: "0000-01-01" cannot be read as a date: year 0 is out of range (quote it to keep it as text)'], id="year-0"),
    pytest.param("ignore_authors: [bob, 2001-13-45]\n", ['line 1, column 23: "2001-13-45" cannot be read as a date: month must be in 1..12 (quote it to keep it as text)'], id="date-in-a-list"),
    pytest.param("language: 2001-01-01 00:00:00 +99:00\n", ['line 1, column 11: "2001-01-01 00:00:00 +99:00" cannot be read as a date: the time zone offset is out of range (quote it to keep it as text)'], id="zone-offset"),
    pytest.param("language: !!timestamp soon\n", ['line 1, column 11: "soon" cannot be read as a date'], id="timestamp-tag"),
    pytest.param("review:\n  max_files: !!int 12x\n", ['line 2, column 14: "12x" cannot be read as a whole number: invalid literal for int() with base 10: \'12x\''], id="int-tag"),
    pytest.param("review:\n  max_files: !!int 0x\n", ['line 2, column 14: "0x" cannot be read as a whole number: invalid literal for int() with base 16: \'\''], id="int-tag-empty-hex"),
    pytest.param("language: !!float abc\n", ['line 1, column 11: "abc" cannot be read as a number: could not convert string to float: \'abc\''], id="float-tag"),
    pytest.param("enabled: !!bool maybe\n", ['line 1, column 10: "maybe" cannot be read as true or false'], id="bool-tag"),
    pytest.param("review:\n  max_files: " + "9" * 5000 + "\n", ["line 2, column 14: a number of 5000 characters is too long (at most 100)"], id="huge-int"),
    pytest.param("review:\n  max_files: 0x" + "f" * 100_000 + "\n", ["line 2, column 14: a number of 100002 characters is too long (at most 100)"], id="huge-hex"),
    pytest.param("language: " + ":".join(["59"] * 30_000) + ".5\n", ["line 1, column 11: a number of 90001 characters is too long (at most 100)"], id="huge-sexagesimal-float"),
    pytest.param("language: !!binary 'abc'\n", ["line 1, column 11: invalid YAML: failed to decode base64 data: Incorrect padding"], id="bad-base64"),
    pytest.param('language: "\\ud800"\n', ["line 1, column 11: text cannot hold U+D800 (half of a surrogate pair)"], id="lone-surrogate"),
    pytest.param('"\\udfff": 1\n', ["line 1, column 1: text cannot hold U+DFFF (half of a surrogate pair)"], id="surrogate-key"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), UNBUILDABLE)
def test_unbuildable_values_are_config_errors_with_lines(text: str, expected: list[str]) -> None:
    error = error_of(text)
    assert str(error).splitlines() == [f"{CONFIG_PATH} {line}" for line in expected]
    assert all(problem.line is not None for problem in error.problems)


def test_unbuildable_values_in_an_extends_target_name_that_file() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config_data("review:\n  drafts: 2001-13-45\n", file="acme/.github:bot.yml")
    assert str(caught.value).startswith('acme/.github:bot.yml line 2, column 11: "2001-13-45"')


def test_any_other_failure_while_building_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def overflow(self: object, node: object) -> object:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(_Loader, "construct_document", overflow)
    assert str(error_of("enabled: true\n")) == (
        f"{CONFIG_PATH}: cannot be read (RecursionError: maximum recursion depth exceeded)"
    )


def test_error_keeps_structured_problems() -> None:
    error = error_of("review:\n  drafts: sometimes\n")
    (problem,) = error.problems
    assert (problem.key, problem.line, error.file) == ("review.drafts", 2, CONFIG_PATH)
    syntax = error_of("a: [\n").problems[0]
    assert syntax.line is not None and syntax.column is not None
    assert syntax.key == ""


def test_error_names_another_file() -> None:
    error = error_of("enabled: maybe\n", file="org/.github:bot.yml")
    assert str(error) == 'org/.github:bot.yml line 1: enabled: expected true or false, got "maybe"'


def test_config_error_is_a_value_error() -> None:
    assert issubclass(ConfigError, ValueError)


# --- _extends -----------------------------------------------------------------------------


def test_base_is_merged_under_the_file() -> None:
    base = {"enabled": True, "language": "en", "review": {"drafts": True, "max_files": 9}}
    config = parse_repo_config("review:\n  max_files: 3\n", base=base)
    assert (config.language, config.review.drafts, config.review.max_files) == ("en", True, 3)


def test_error_from_the_base_says_so() -> None:
    error = error_of("review:\n  drafts: true\n", base={"review": {"max_files": "x"}})
    assert str(error) == (
        f'{CONFIG_PATH}: review.max_files: expected a whole number, got "x" '
        "(in the `_extends` config)"
    )
    assert error.problems[0].line is None


def test_load_config_data() -> None:
    assert load_config_data(None) == {}
    assert load_config_data("review: {drafts: true}\n") == {"review": {"drafts": True}}
    with pytest.raises(ConfigError, match=r"^org.yml line \d+, column \d+: invalid YAML"):
        load_config_data("a: [\n", file="org.yml")


MERGES = [
    pytest.param({}, {}, {}, id="empty"),
    pytest.param({"a": 1}, {}, {"a": 1}, id="base-only"),
    pytest.param({}, {"a": 1}, {"a": 1}, id="override-only"),
    pytest.param({"a": 1, "b": 2}, {"b": 3}, {"a": 1, "b": 3}, id="override-wins"),
    pytest.param({"r": {"x": 1, "y": 2}}, {"r": {"y": 3}}, {"r": {"x": 1, "y": 3}}, id="deep"),
    pytest.param({"r": {"x": {"p": 1}}}, {"r": {"x": {"q": 2}}}, {"r": {"x": {"p": 1, "q": 2}}}, id="deeper"),
    pytest.param({"l": [1, 2]}, {"l": [3]}, {"l": [3]}, id="lists-replace"),
    pytest.param({"r": {"x": 1}}, {"r": None}, {"r": None}, id="null-replaces"),
    pytest.param({"r": 1}, {"r": {"x": 1}}, {"r": {"x": 1}}, id="mapping-replaces-scalar"),
]  # fmt: skip


@pytest.mark.parametrize(("base", "override", "expected"), MERGES)
def test_merge(
    base: dict[str, object], override: dict[str, object], expected: dict[str, object]
) -> None:
    assert merge_repo_config(base, override) == expected


def test_merge_leaves_inputs_alone() -> None:
    base: dict[str, object] = {"r": {"x": 1}}
    override: dict[str, object] = {"r": {"y": 2}}
    merge_repo_config(base, override)
    assert (base, override) == ({"r": {"x": 1}}, {"r": {"y": 2}})
    assert merge_repo_config(None, None) == {}


EXTENDS = [
    pytest.param("shared-config", ExtendsTarget(None, "shared-config", CONFIG_PATH), id="repo"),
    pytest.param(".github", ExtendsTarget(None, ".github", CONFIG_PATH), id="dot-github"),
    pytest.param("acme/.github", ExtendsTarget("acme", ".github", CONFIG_PATH), id="owner-repo"),
    pytest.param("acme/base:bots/bot.yml", ExtendsTarget("acme", "base", "bots/bot.yml"), id="with-path"),
    pytest.param("base:bot.yaml", ExtendsTarget(None, "base", "bot.yaml"), id="repo-path"),
    pytest.param("  acme/base  ", ExtendsTarget("acme", "base", CONFIG_PATH), id="spaces"),
]  # fmt: skip


@pytest.mark.parametrize(("value", "expected"), EXTENDS)
def test_parse_extends(value: str, expected: ExtendsTarget) -> None:
    assert parse_extends(value) == expected
    assert extends_target({"_extends": value}) == value.strip()


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("", id="empty"),
        pytest.param("..", id="dot-dot-repo"),
        pytest.param("a/b/c", id="three-parts"),
        pytest.param("acme/base:../secrets.yml", id="path-escape"),
        pytest.param("acme/base:/etc/bot.yml", id="absolute-path"),
        pytest.param("acme/base:bot.json", id="not-yaml"),
        pytest.param("acme/base:a//b.yml", id="empty-segment"),
        pytest.param("-acme/base", id="owner-hyphen"),
        pytest.param("https://example.com/x.yml", id="url"),
        pytest.param("acme/base:bot.yml:extra", id="two-colons"),
    ],
)
def test_parse_extends_rejects(value: str) -> None:
    with pytest.raises(ValueError, match="expected `repo`"):
        parse_extends(value)
    with pytest.raises(ConfigError, match=r"^\.github/bot\.yml: _extends: expected `repo`"):
        extends_target({"_extends": value})


def test_extends_target_absent_or_not_text() -> None:
    assert extends_target({}) is None
    assert extends_target({"_extends": None}) is None
    with pytest.raises(ConfigError, match=r"_extends: expected text, got \[1\]"):
        extends_target({"_extends": [1]})


def test_error_types_without_a_dedicated_message_still_read_well() -> None:
    error = {"type": "new_kind", "loc": ("language",), "msg": "Something odd", "input": [1]}
    marks = Marks({}, {("language",): yaml.Mark("f", 0, 2, 0, "", 0)})
    problem = problem_at(error, marks, RepoConfig)
    assert problem == ConfigProblem("something odd, got [1]", "language", 3)


def test_self_containing_value_is_shown_without_crashing() -> None:
    loop: list[object] = []
    loop.append(loop)
    assert got(loop) == "a value that contains itself"
    assert got("x" * 100) == '"' + "x" * 56 + "..."


def test_extends_needs_its_underscore() -> None:
    """`extends:` would be silently ignored by the resolver, so it is an unknown key."""
    message = str(error_of("extends: acme/.github\n"))
    assert message.startswith(
        f"{CONFIG_PATH} line 1: extends: unknown key; did you mean `_extends`?"
    )


YAML_PIECES = ["review", "drafts", ":", " ", "\n", "  ", "- ", "[", "]", "{", "}", "&a", "*a"]
YAML_PIECES += ["!!str", "true", "1", "'", '"', "#", "<<", "?", ",", "enabled", "agents", "name"]
YAML_PIECES += ["\t", "%", "|", ">", "---", "...", "!!python/name:os.system", "\x00", "\ufeff"]
YAML_PIECES += [
    "2001-13-45",
    "!!int",
    "!!bool",
    "!!float",
    "!!timestamp",
    "!!binary",
    "0x",
    "9" * 120,
]
YAML_PIECES += ["1:2", '"\\ud800"', "language", "max_files", "x"]


def test_any_text_gives_a_config_or_a_config_error() -> None:
    """Seeded random YAML-ish text: never an exception other than ConfigError."""
    rnd = random.Random(11)
    for _ in range(1500):
        text = "".join(rnd.choice(YAML_PIECES) for _ in range(rnd.randint(0, 25)))
        try:
            parse_repo_config(text)
        except ConfigError as exc:
            assert str(exc).startswith(CONFIG_PATH), repr(text)
