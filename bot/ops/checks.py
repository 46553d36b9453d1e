"""What `bot doctor`'s checks share: their context, their result, and a check's shape.

Apart from `bot.ops.doctor`, so a check written elsewhere (`bot.ops.doctor_checks`) imports
these without importing the command that runs it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from bot.settings import Settings

Status = Literal["ok", "warn", "fail"]


@dataclass(frozen=True, slots=True)
class CheckResult:
    name: str
    status: Status
    detail: str
    fix: str = ""

    def line(self) -> str:
        label = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}[self.status]
        detail = "; ".join(part.strip() for part in self.detail.splitlines() if part.strip())
        text = f"{label}  {self.name}: {detail}"
        return f"{text} -> {self.fix}" if self.fix and self.status != "ok" else text


@dataclass(slots=True)
class DoctorContext:
    """What the checks share: the settings (None when they could not be read) and limits."""

    settings: Settings | None
    settings_error: str | None = None
    # Every BOT_* variable set (upper case) and where, unknown ones included.
    variables: Mapping[str, str] = field(default_factory=dict)
    model_timeout: float = 20.0
    skip_model: bool = False


Check = Callable[[DoctorContext], Awaitable[CheckResult]]
