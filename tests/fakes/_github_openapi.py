"""Every request to the fake GitHub checked against GitHub's published OpenAPI description.

The description is `fixtures/openapi/operations.json`: the operations the fake serves, cut out
of `@octokit/openapi` by `scripts/openapi_extract`. Each route of the fake is tied to its
operation (same method, same path with the placeholders in the same places) when the app is
built; a route with none fails the build, unless `NOT_REST` names it. For each request the
path parameters, the query parameters (only those the operation declares, of their type and
enum) and the JSON body are validated with jsonschema (draft 4, with `$ref`s inlined and
`format: date-time` checked as GitHub parses it). What does not validate is a `Violation`: the fake keeps it
in `openapi_violations` (the suite's conftest fails a test that leaves one behind) and answers
GitHub's 422 `Validation Failed` with an `errors` entry per problem; a method and path that
are no operation at all get 404 `Not Found`, and are a violation too.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from jsonschema import Draft4Validator, FormatChecker

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "openapi" / "operations.json"

# Routes of the fake that are not GitHub's REST API, so not in its REST description.
NOT_REST: dict[str, str] = {
    "POST /graphql": "GitHub's GraphQL API, described by its own schema",
    "GET /{owner}/{repo}.git/{rest:path}": "git's smart HTTP protocol, on github.com",
    "POST /{owner}/{repo}.git/{rest:path}": "git's smart HTTP protocol, on github.com",
    "GET /login/oauth/authorize": "the OAuth web flow's sign-in page, on github.com",
    "POST /login/oauth/access_token": "the OAuth web flow's code exchange, on github.com",
}


def shape(template: str) -> tuple[str | None, ...]:
    """A path template's segments, each placeholder as None:

    shape("/repos/{owner}/{repo}/issues/{number:int}") == ("repos", None, None, "issues", None)
    """
    return tuple(
        None if seg.startswith("{") and seg.endswith("}") and seg.count("{") == 1 else seg
        for seg in template.strip("/").split("/")
    )


def placeholders(template: str) -> list[str]:
    """The names of a template's placeholders in order, without Starlette's convertors."""
    return [
        seg[1:-1].split(":", 1)[0]
        for seg, kind in zip(template.strip("/").split("/"), shape(template), strict=True)
        if kind is None
    ]


def find_operation(method: str, template: str, operations: Iterable[str]) -> str | None:
    """The key ("METHOD /path") among `operations` of the operation `template` serves: the same
    method, and the same path with placeholders in the same places; None when there is none."""
    wanted = (method.upper(), shape(template))
    for key in operations:
        verb, path = key.split(" ", 1)
        if (verb, shape(path)) == wanted:
            return key
    return None


@dataclass(frozen=True)
class Problem:
    """One thing about a request that the description does not allow."""

    where: str  # "path", "query" or "body"
    field: str
    code: str  # GitHub's: "missing_field", "invalid", "unprocessable"
    message: str

    def __str__(self) -> str:
        return f"{self.where} {self.field or '(root)'}: {self.message}"


@dataclass(frozen=True)
class Violation:
    """A request to the fake that GitHub's description refuses."""

    method: str
    path: str
    operation: str | None  # "POST /repos/{owner}/{repo}/...", None for no operation
    problems: tuple[Problem, ...]

    def __str__(self) -> str:
        what = self.operation or "no operation of GitHub's REST API"
        lines = "; ".join(str(p) for p in self.problems)
        return f"{self.method} {self.path} ({what}): {lines}"


_FORMATS = FormatChecker(formats=())


@_FORMATS.checks("date-time", raises=ValueError)
def _date_time(value: object) -> bool:
    """ISO 8601 with a date and a time (`2024-01-01T00:00:00Z`), as GitHub takes it."""
    if not isinstance(value, str):
        return True
    return "T" in value.upper() and datetime.fromisoformat(value) is not None


def _validator(schema: Mapping[str, Any]) -> Draft4Validator:
    return Draft4Validator(schema, format_checker=_FORMATS)


def _resolve(fixture: Mapping[str, Any], ref: str) -> Any:
    _, section, name = ref[2:].split("/")  # "#/components/<section>/<name>"
    return fixture["components"][section][name]


def _json_schema(fixture: Mapping[str, Any], node: Any, seen: tuple[str, ...] = ()) -> Any:
    """An OpenAPI 3.0 schema as JSON Schema draft 4 (which 3.0's schemas extend), `$ref`s
    inlined."""
    if isinstance(node, list):
        return [_json_schema(fixture, item, seen) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        ref = node["$ref"]
        if ref in seen:
            raise ValueError(f"a recursive schema ({ref}) cannot be inlined")
        return _json_schema(fixture, _resolve(fixture, ref), (*seen, ref))
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "nullable":
            # The operations extracted use none; OpenAPI 3.0's `nullable` is no JSON Schema
            # draft 4 keyword and would be ignored, so stop rather than check too little.
            raise ValueError("`nullable` in the description: map it to a null type here")
        if key in ("enum", "default", "const", "required", "type"):
            out[key] = value
        elif key in ("properties", "patternProperties"):
            out[key] = {name: _json_schema(fixture, sub, seen) for name, sub in value.items()}
        else:
            out[key] = _json_schema(fixture, value, seen)
    return out


def _coerce(value: str, schema: Mapping[str, Any]) -> Any:
    """A parameter's text as the type its schema names (left as text when it is not one)."""
    types = schema.get("type")
    types = types if isinstance(types, list) else [types]
    if "integer" in types or "number" in types:
        try:
            return int(value) if "integer" in types else float(value)
        except ValueError:
            return value
    if "boolean" in types and value in ("true", "false"):
        return value == "true"
    return value


def _problems(where: str, field: str, validator: Draft4Validator, value: Any) -> list[Problem]:
    found = []
    for error in sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path)):
        message = error.message
        if len(message) > 200:  # it quotes the value: a 65 kB body is no message
            message = f"{message[:80]}…{message[-80:]}"
        inner = ".".join(str(part) for part in error.absolute_path)
        name = ".".join(part for part in (field, inner) if part)
        if error.validator == "required":
            missing = str(error.message).split("'")[1] if "'" in error.message else ""
            name = ".".join(part for part in (name, missing) if part)
            found.append(Problem(where, name, "missing_field", message))
        else:
            found.append(Problem(where, name, "invalid", message))
    return found


@dataclass(frozen=True)
class _Param:
    name: str
    where: str  # "path" or "query"
    required: bool
    schema: Mapping[str, Any]
    validator: Draft4Validator


class Operation:
    """One operation of the description, checking what a request to it sends."""

    def __init__(self, fixture: Mapping[str, Any], key: str, served: str) -> None:
        self.key = key
        spec = fixture["operations"][key]
        self.documentation_url: str = (
            spec.get("documentation_url") or "https://docs.github.com/rest"
        )
        self.resource = "".join(word.capitalize() for word in spec.get("tag", "").split("-"))
        params = [_json_schema(fixture, p) for p in spec.get("parameters", [])]
        self.params = {
            (p["in"], p["name"]): _Param(
                p["name"],
                p["in"],
                bool(p.get("required")),
                p.get("schema", {}),
                _validator(p.get("schema", {})),
            )
            for p in params
        }
        served_names = placeholders(served)
        spec_names = placeholders(key.split(" ", 1)[1])
        self.path_names = dict(zip(served_names, spec_names, strict=True))
        body = spec.get("requestBody")
        self.body_required = bool(body and body.get("required"))
        schema = ((body or {}).get("content", {}).get("application/json") or {}).get("schema")
        self.body: Draft4Validator | None = None
        if schema is not None:
            self.body = _validator(_json_schema(fixture, schema))
        self.takes_body = body is not None

    def check(
        self, path_params: Mapping[str, Any], query: Iterable[tuple[str, str]], body: bytes
    ) -> list[Problem]:
        found: list[Problem] = []
        for served_name, value in path_params.items():
            name = self.path_names.get(served_name, served_name)
            param = self.params.get(("path", name))
            if param is None:
                found.append(Problem("path", name, "invalid", "not a parameter of the path"))
                continue
            found += _problems("path", name, param.validator, _coerce(str(value), param.schema))
        given = set()
        for name, value in query:
            given.add(name)
            param = self.params.get(("query", name))
            if param is None:
                message = f"{name!r} is not a query parameter of {self.key}"
                found.append(Problem("query", name, "invalid", message))
                continue
            found += _problems("query", name, param.validator, _coerce(value, param.schema))
        for (where, name), param in self.params.items():
            if where == "query" and param.required and name not in given:
                found.append(Problem("query", name, "missing_field", f"{name!r} is required"))
        found += self._check_body(body)
        return found

    def _check_body(self, body: bytes) -> list[Problem]:
        if not body.strip():
            if self.body_required:
                return [Problem("body", "", "missing_field", "a JSON request body is required")]
            return []
        if not self.takes_body:
            return [Problem("body", "", "unprocessable", f"{self.key} takes no request body")]
        try:
            payload = json.loads(body)
        except ValueError:
            return [Problem("body", "", "invalid", "the request body is not JSON")]
        if self.body is None:
            return [Problem("body", "", "invalid", "the operation's body is not JSON")]
        return _problems("body", "", self.body, payload)

    def refusal(self, problems: Iterable[Problem]) -> dict[str, Any]:
        """GitHub's 422 answer (`fixtures/api/error-validation.json`'s shape)."""
        return {
            "message": "Validation Failed",
            "errors": [
                {
                    "resource": self.resource,
                    "field": p.field,
                    "code": p.code,
                    "message": p.message,
                }
                for p in problems
            ],
            "documentation_url": self.documentation_url,
        }


@functools.cache
def load_fixture(path: Path = FIXTURE) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


# Off only while scripts/openapi_extract lists the fake's routes to build the fixture anew
# (a route added since the last extract would otherwise stop the fake before it is listed).
BIND_ROUTES = True


def operation_for(method: str, template: str) -> Operation | None:
    """The operation a route of the fake serves; None for a `NOT_REST` route (and while
    routes are listed for the extract). Raises for a route that GitHub's description (as
    extracted) does not have."""
    if f"{method} {template}" in NOT_REST or not BIND_ROUTES:
        return None
    return _bound(method, template)


@functools.cache
def _bound(method: str, template: str) -> Operation:
    fixture = load_fixture()
    key = find_operation(method, template, fixture["operations"])
    if key is None:
        raise LookupError(
            f"{method} {template} is not an operation of GitHub's REST API as "
            f"{FIXTURE.name} has it: serve what GitHub serves, then run scripts/openapi_extract"
        )
    return Operation(fixture, key, template)
