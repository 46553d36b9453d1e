"""What an endpoint of the fake GitHub receives (`Ctx`), and small answer helpers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tests.fakes._github_state import FakeError

if TYPE_CHECKING:
    from tests.fakes._github_state import FakeRepo, Token


@dataclass
class Ctx:
    request: Request
    body: bytes
    json: Any
    token: Token | None
    repo: FakeRepo | None

    def param(self, name: str) -> str:
        return str(self.request.path_params[name])

    def number(self, name: str = "number") -> int:
        return int(self.request.path_params[name])

    @property
    def fr(self) -> FakeRepo:
        assert self.repo is not None
        return self.repo


Handler = Callable[[Ctx], Awaitable[Response]]


def ok(content: Any, status: int = 200) -> Response:
    return JSONResponse(content, status)


def body_field(ctx: Ctx, name: str) -> Any:
    if not isinstance(ctx.json, dict) or name not in ctx.json:
        raise FakeError(422, f"Invalid request: '{name}' wasn't supplied.")
    return ctx.json[name]
