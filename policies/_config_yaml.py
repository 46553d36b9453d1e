"""Reading `.github/bot.yml`: YAML with line marks, and errors that point at lines."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import yaml
from pydantic import BaseModel

CONFIG_PATH = ".github/bot.yml"
MAX_CONFIG_BYTES = 128 * 1024
"""Larger files are refused before parsing."""
MAX_CONFIG_NODES = 10_000
"""Values counted with aliases expanded; more means an alias bomb or a runaway file."""
MAX_CONFIG_DEPTH = 32
"""Lists and mappings nested deeper than this are refused before the tree is built."""
MAX_NUMBER_CHARS = 100
"""Longer numbers are refused unread: no setting needs one, and big ones are slow to build."""

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
_MERGE_TAG = "tag:yaml.org,2002:merge"


@dataclass(frozen=True, slots=True)
class Marks:
    """Where each key (and its value) sits in the file, by path."""

    keys: dict[Loc, yaml.Mark]
    values: dict[Loc, yaml.Mark]


def _too_many() -> ConfigError:
    return ConfigError(
        [ConfigProblem(f"too many values (over {MAX_CONFIG_NODES}, aliases expanded)")]
    )


def _bound(text: str) -> None:
    """Refuse deep nesting, alias loops and alias bombs from the event stream.

    The event parser is a loop, not a recursion, and an alias is counted as the size of
    what it stands for; so this costs one pass however hostile the file is, and what is
    composed afterwards is small and shallow.
    """
    open_: list[tuple[str | None, int]] = []  # (anchor, values inside so far)
    sizes: dict[str, int] = {}
    total = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        line = event.start_mark.line + 1 if event.start_mark else None
        if isinstance(event, yaml.CollectionStartEvent):
            if len(open_) >= MAX_CONFIG_DEPTH:
                message = f"values are nested too deeply (over {MAX_CONFIG_DEPTH} levels)"
                raise ConfigError([ConfigProblem(message, "", line)])
            open_.append((event.anchor, 0))
            size = 1
        elif isinstance(event, yaml.ScalarEvent):
            size = 1
            if event.anchor:
                sizes[event.anchor] = 1
        elif isinstance(event, yaml.AliasEvent):
            if any(anchor == event.anchor for anchor, _ in open_):
                message = f"alias *{event.anchor} refers to a value that contains it"
                raise ConfigError([ConfigProblem(message, "", line)])
            size = sizes.get(event.anchor or "", 0)  # undefined: composing reports it
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, inside = open_.pop()
            if anchor:
                sizes[anchor] = inside + 1
            if open_:
                open_[-1] = (open_[-1][0], open_[-1][1] + inside + 1)
            continue
        else:
            continue
        total += size
        if total > MAX_CONFIG_NODES:
            raise _too_many()
        if open_ and not isinstance(event, yaml.CollectionStartEvent):
            open_[-1] = (open_[-1][0], open_[-1][1] + size)


def _walk(node: yaml.Node, loc: Loc, marks: Marks, problems: list[ConfigProblem]) -> None:
    """Record where every path sits and collect bad or repeated keys (size is bounded)."""
    stack: list[tuple[yaml.Node, Loc]] = [(node, loc)]
    while stack:
        current, here = stack.pop()
        marks.values.setdefault(here, current.start_mark)
        if isinstance(current, yaml.SequenceNode):
            stack.extend((item, (*here, i)) for i, item in enumerate(current.value))
        elif isinstance(current, yaml.MappingNode):
            names: set[str] = set()
            for key_node, value_node in current.value:
                if key_node.tag == _MERGE_TAG:
                    # `<<: *defaults` merges other mappings here, at the same path.
                    merged = (
                        value_node.value
                        if isinstance(value_node, yaml.SequenceNode)
                        else [value_node]
                    )
                    stack.extend((item, here) for item in merged)
                    continue
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


def _syntax_problem(exc: yaml.YAMLError, source: str) -> ConfigProblem:
    """A YAML error as a problem at its line and column (1-based)."""
    line = column = None
    text = str(exc)
    if isinstance(exc, yaml.reader.ReaderError):
        line = source.count("\n", 0, exc.position) + 1
        column = exc.position - source.rfind("\n", 0, exc.position)
        char = exc.character
        shown = f"U+{char:04X}" if isinstance(char, int) else repr(char)
        text = f"character {shown} is not allowed"
    elif isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        text = exc.problem or exc.context or "cannot be read"
        if exc.context and exc.problem:
            started = f" started on line {exc.context_mark.line + 1}" if exc.context_mark else ""
            text += f" ({exc.context}{started})"
        line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
    if isinstance(exc, _UnreadableValue):
        return ConfigProblem(text, "", line, column)
    return ConfigProblem(f"invalid YAML: {text}", "", line, column)


def load_yaml(text: str | None, file: str) -> tuple[dict[str, object], Marks]:
    """The mapping in a config file and where its keys and values are; {} when empty."""
    marks = Marks({}, {})
    if text is None or not text.strip():
        return {}, marks
    if len(text.encode("utf-8", "replace")) > MAX_CONFIG_BYTES:
        raise ConfigError([ConfigProblem(f"file is over {MAX_CONFIG_BYTES} bytes")], file=file)
    try:
        data = _construct(text, marks)
    except yaml.YAMLError as exc:
        raise ConfigError([_syntax_problem(exc, text)], file=file) from None
    except ConfigError as exc:
        raise ConfigError(exc.problems, file=file) from None
    except Exception as exc:  # whatever else building the values raised: still the file's fault
        problem = ConfigProblem(f"cannot be read ({type(exc).__name__}: {exc})"[:300])
        raise ConfigError([problem], file=file) from None
    if data is None:
        return {}, marks
    if not isinstance(data, dict):
        found = ConfigProblem(f"expected a mapping of keys to values, got {got(data)}", "", 1)
        raise ConfigError([found], file=file)
    return data, marks


_KINDS = {
    "timestamp": "a date",
    "int": "a whole number",
    "float": "a number",
    "bool": "true or false",
}
_NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
_SURROGATE = re.compile("[\ud800-\udfff]")


class _UnreadableValue(yaml.constructor.ConstructorError):
    """Well-formed YAML holding a value that cannot be built; the problem says which."""

    def __init__(self, problem: str, node: yaml.Node) -> None:
        super().__init__(None, None, problem, node.start_mark)


class _Loader(yaml.SafeLoader):
    """The safe loader, with every failure to build a value reported at that value's line.

    PyYAML's constructors raise plain ValueError, KeyError or AttributeError for values
    the parser accepted (a date `2001-13-45`, `!!bool maybe`); here each becomes a
    ConstructorError marked with the node. Numbers too long to be settings are refused
    before they are built, and text holding half of a surrogate pair (which no encoder
    will write back out) is refused after.
    """

    def construct_object(self, node: yaml.Node, deep: bool = False) -> object:
        if (
            isinstance(node, yaml.ScalarNode)
            and node.tag in _NUMBER_TAGS
            and len(node.value) > MAX_NUMBER_CHARS
        ):
            length = len(node.value)
            raise _UnreadableValue(
                f"a number of {length} characters is too long (at most {MAX_NUMBER_CHARS})", node
            )
        try:
            value: object = super().construct_object(node, deep)
        except yaml.YAMLError:
            raise
        except Exception as exc:  # PyYAML's constructors fail with plain Python errors
            raise self._unreadable(node, exc) from None
        if isinstance(value, str) and (half := _SURROGATE.search(value)):
            message = f"text cannot hold U+{ord(half.group()):04X} (half of a surrogate pair)"
            raise _UnreadableValue(message, node)
        return value

    def _unreadable(self, node: yaml.Node, exc: Exception) -> _UnreadableValue:
        tag = str(node.tag)
        kind = _KINDS.get(tag.rsplit(":", 1)[-1], f"a value tagged `{tag}`")
        shown = got(node.value) if isinstance(node, yaml.ScalarNode) else "this value"
        message = f"{shown} cannot be read as {kind}"
        detail = str(exc) if type(exc) in (ValueError, OverflowError) else ""
        if detail.startswith("offset must be a timedelta"):
            detail = "the time zone offset is out of range"
        if detail:
            message += f": {detail}"
        if isinstance(node, yaml.ScalarNode) and node.style is None:
            # Read this way only because it was written unquoted: quoting makes it text.
            implicit = self.resolve(yaml.ScalarNode, node.value, (True, False))  # type: ignore[no-untyped-call]
            if implicit == tag:
                message += " (quote it to keep it as text)"
        return _UnreadableValue(message, node)


def _construct(text: str, marks: Marks) -> object:
    """Compose the node tree, check and mark it, then build plain values from it."""
    _bound(text)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        problems: list[ConfigProblem] = []
        # Walk first: the walk bounds the size, and construction rewrites merge keys.
        _walk(node, (), marks, problems)
        if problems:
            raise ConfigError(problems)
        return loader.construct_document(node)
    finally:
        loader.dispose()


# --- validation errors mapped to lines ----------------------------------------------------


def _dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def got(value: object) -> str:
    """A short JSON rendering of a value from the file, for an error message."""
    try:
        text = json.dumps(value, default=str, ensure_ascii=False)
    except ValueError:  # a value that contains itself
        text = "a value that contains itself"
    return text if len(text) <= 60 else text[:57] + "..."


def _model_at(root: type[BaseModel], loc: Loc) -> type[BaseModel]:
    """The section model whose keys apply at `loc` (a path of sections and list items)."""
    model = root
    for part in loc:
        fields = {f.alias or name: f for name, f in model.model_fields.items()}
        field = fields.get(part) if isinstance(part, str) else None
        inner = _section_type(field.annotation) if field else None
        model = inner or model
    return model


def _section_type(annotation: object) -> type[BaseModel] | None:
    """The section model of a field typed `Section` or `list[Section]`, else None."""
    candidates = (annotation, *getattr(annotation, "__args__", ()))
    return next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)


def _distance(a: str, b: str) -> int:
    """Edit distance (insert, delete, substitute, swap neighbours) between two short keys."""
    rows = [list(range(len(b) + 1))]
    for i, char_a in enumerate(a, 1):
        row = [i]
        for j, char_b in enumerate(b, 1):
            cost = min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + (char_a != char_b))
            if i > 1 and j > 1 and char_a == b[j - 2] and a[i - 2] == char_b:
                cost = min(cost, rows[-2][j - 2] + 1)
            row.append(cost)
        rows.append(row)
    return rows[-1][-1]


def _unknown_key(key: object, model: type[BaseModel]) -> str:
    known = [f.alias or name for name, f in model.model_fields.items()]
    close = [k for k in known if isinstance(key, str) and _distance(key.lower(), k) <= 2]
    hint = f"did you mean `{close[0]}`? " if close else ""
    return f"unknown key; {hint}expected one of: {', '.join(known)}"


_EXPECTED = {
    "bool_type": "expected true or false",
    "int_type": "expected a whole number",
    "string_type": "expected text",
    "list_type": "expected a list",
    "model_type": "expected a mapping of keys to values",
    "dict_type": "expected a mapping of keys to values",
}


_BOUNDS = {
    "greater_than_equal": "expected a number of at least {}",
    "less_than_equal": "expected a number of at most {}",
    "string_too_short": "expected text of at least {} character(s)",
    "string_too_long": "expected text of at most {} characters",
}


def _explain(error: Mapping[str, object], loc: Loc, root: type[BaseModel]) -> str:
    kind = str(error["type"])
    raw_ctx = error.get("ctx")
    ctx: Mapping[str, object] = raw_ctx if isinstance(raw_ctx, Mapping) else {}
    msg = str(error["msg"])
    shown = got(error.get("input"))
    if kind in _EXPECTED:
        return f"{_EXPECTED[kind]}, got {shown}"
    if kind == "extra_forbidden":
        return _unknown_key(loc[-1] if loc else None, _model_at(root, loc[:-1]))
    if kind == "missing":
        return "required, but missing"
    if kind == "literal_error":
        return f"expected one of {ctx.get('expected', '')}, got {shown}"
    if kind in _BOUNDS:
        bound = next(iter(ctx.values()), "")
        return f"{_BOUNDS[kind].format(bound)}, got {shown}"
    if kind == "too_long":
        return f"expected at most {ctx.get('max_length')} items, got {ctx.get('actual_length')}"
    if kind == "string_pattern_mismatch":
        return f"expected a lower-case name of letters, digits, - and _, got {shown}"
    if kind == "value_error":
        return str(ctx.get("error", msg))
    return f"{msg[:1].lower()}{msg[1:]}, got {shown}"


def problem_at(error: Mapping[str, object], marks: Marks, root: type[BaseModel]) -> ConfigProblem:
    """One pydantic error as a ConfigProblem on the line of the value (or key) it is about."""
    raw_loc = error["loc"]
    loc: Loc = tuple(raw_loc) if isinstance(raw_loc, tuple) else ()
    message = _explain(error, loc, root)
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
