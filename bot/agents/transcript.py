"""A bounded record of one agent's conversation: what it was offered (the system prompt and the
tools' specifications, each under its own cap), the first entry plus the newest, capped."""

from __future__ import annotations

from typing import Any

ENTRY_CAP = 4 * 1024
TOTAL_CAP = 64 * 1024
MAX_ENTRIES = 200
SYSTEM_CAP = 32 * 1024
"""Characters of the system prompt kept (it is the app's own text, written per agent type)."""
DESCRIPTION_CAP = 2 * 1024
"""Characters of one tool's description kept; its parameters' schema is kept whole."""


def clip(text: str, cap: int = ENTRY_CAP) -> str:
    if len(text) <= cap:
        return text
    return text[:cap] + f"… [{len(text) - cap} more characters]"


def _size(entry: dict[str, Any]) -> int:
    return sum(len(str(v)) for v in entry.values()) + 16


class Transcript:
    """Keeps the first entry and as many of the newest as fit the caps; counts the rest."""

    def __init__(
        self,
        *,
        entry_cap: int = ENTRY_CAP,
        total_cap: int = TOTAL_CAP,
        max_entries: int = MAX_ENTRIES,
    ) -> None:
        self.entry_cap = entry_cap
        self.total_cap = total_cap
        self.max_entries = max_entries
        self._first: dict[str, Any] | None = None
        self._offered: dict[str, Any] | None = None
        self._rest: list[dict[str, Any]] = []
        self._size = 0
        self.dropped = 0

    def add(self, role: str, content: str = "", **fields: Any) -> None:
        entry: dict[str, Any] = {"role": role}
        if content:
            entry["content"] = clip(content, self.entry_cap)
        for key, value in fields.items():
            if value is None:
                continue
            entry[key] = clip(value, self.entry_cap) if isinstance(value, str) else value
        if self._first is None:
            self._first = entry
            return
        self._rest.append(entry)
        self._size += _size(entry)
        first_size = _size(self._first)
        while self._rest and (
            self._size + first_size > self.total_cap or len(self._rest) + 1 > self.max_entries
        ):
            self._size -= _size(self._rest.pop(0))
            self.dropped += 1

    def offered(self, system: str, tools: list[dict[str, Any]]) -> None:
        """Record the system prompt and the tools offered (`name`, `description`,
        `parameters` each): the entry `{"role": "system", ...}` that leads the transcript."""
        self._offered = {
            "role": "system",
            "content": clip(system, SYSTEM_CAP),
            "tools": [
                {**tool, "description": clip(str(tool.get("description", "")), DESCRIPTION_CAP)}
                for tool in tools
            ],
        }

    def entries(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [] if self._offered is None else [self._offered]
        if self._first is not None:
            out.append(self._first)
        if self.dropped:
            out.append({"role": "note", "content": f"{self.dropped} older entries dropped"})
        return out + list(self._rest)
