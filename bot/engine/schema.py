"""Structured-output schemas: accept a JSON Schema dict or a pydantic model class, validate."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
from pydantic import BaseModel


class SchemaError(ValueError):
    """The schema given to an agent call is not a usable JSON Schema."""


def normalize_schema(schema: object) -> dict[str, Any] | None:
    """A checked JSON Schema dict (a deep copy) from a dict or a pydantic model class."""
    if schema is None:
        return None
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        result: dict[str, Any] = schema.model_json_schema()
    elif isinstance(schema, dict):
        result = copy.deepcopy(schema)
    else:
        raise SchemaError(
            f"schema must be a JSON Schema dict or a pydantic model class, not {type(schema).__name__}"
        )
    try:
        jsonschema.Draft202012Validator.check_schema(result)
    except jsonschema.SchemaError as exc:
        raise SchemaError(f"schema is not valid JSON Schema: {exc.message}") from exc
    return result


def schema_violation(value: object, schema: dict[str, Any]) -> str | None:
    """None when `value` validates against `schema`, else the first problem, readable."""
    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return f"at {where}: {error.message[:300]}"
