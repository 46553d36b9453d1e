"""Reading a tool call's arguments: types checked, ranges clamped, clear errors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.agents.paths import ToolError


def str_arg(args: Mapping[str, Any], key: str, *, required: bool = False) -> str | None:
    value = args.get(key)
    if value is None:
        if required:
            raise ToolError(f"`{key}` is required")
        return None
    if not isinstance(value, str):
        raise ToolError(f"`{key}` must be a string")
    return value


def int_arg(args: Mapping[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = args.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolError(f"`{key}` must be an integer")
    return max(low, min(high, value))
