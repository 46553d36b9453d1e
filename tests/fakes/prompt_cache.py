"""Prompt caching as the providers bill it, for the fake model servers.

Both providers cache a prompt's prefix for five minutes once it is at least 1,024 tokens long,
and bill a repeat of it as cached input:

- OpenAI caches automatically: the longest prefix of the request (tools, then messages) that
  an earlier request shared, in steps of 128 tokens (`automatic`), reported as
  `prompt_tokens_details.cached_tokens` (part of `prompt_tokens`, which counts the tools too,
  as OpenAI's does).
- Anthropic caches up to the blocks marked `cache_control` (at most four; tools, then system,
  then messages, in that order): the longest marked prefix seen before is read
  (`cache_read_input_tokens`), the rest up to the last mark is written
  (`cache_creation_input_tokens`), and `input_tokens` counts only what comes after
  (`anthropic_usage`).

Tokens are characters / 4 of the JSON the request carries, like the fakes' other counts.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["MIN_TOKENS", "TTL_S", "PromptCache"]

MIN_TOKENS = 1024
TTL_S = 300.0
_STEP = 128


class CacheControlError(ValueError):
    """A request's `cache_control` Anthropic refuses (its message is Anthropic's)."""


class PromptCache:
    """What one fake server has cached: prefixes and when each was last used."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._texts: dict[str, float] = {}  # OpenAI: whole request texts, last seen at
        self._keys: dict[str, float] = {}  # Anthropic: hashes of marked prefixes

    def _fresh(self, seen: dict[str, float]) -> None:
        now = self.clock()
        for key in [k for k, at in seen.items() if now - at > TTL_S]:
            del seen[key]

    def automatic(self, tools: Any, messages: Any) -> tuple[int, int]:
        """OpenAI's (prompt tokens, cached tokens) of a request: the tools and the messages
        count, and the longest prefix of them shared with a request of the last five minutes
        is cached."""
        text = json.dumps(tools or [], sort_keys=True) + "\0" + json.dumps(messages)
        with self._lock:
            self._fresh(self._texts)
            shared = max((_shared(text, seen) for seen in self._texts), default=0)
            self._texts[text] = self.clock()
        prompt = len(text) // 4 + 1
        tokens = shared // 4
        if tokens < MIN_TOKENS:
            return prompt, 0
        return prompt, min(prompt, tokens // _STEP * _STEP)

    def anthropic_usage(self, body: dict[str, Any], output_tokens: int) -> dict[str, int]:
        """The usage of a Messages request: input, cache reads and cache writes."""
        segments: list[tuple[str, bool]] = []
        for tool in body.get("tools") or []:
            segments.append(_segment(tool))
        system = body.get("system")
        for block in (
            [{"type": "text", "text": system}] if isinstance(system, str) else system or []
        ):
            segments.append(_segment(block))
        for message in body.get("messages") or []:
            content = message.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            segments.append((message.get("role", ""), False))
            for block in blocks or []:
                segments.append(_segment(block))
        marks = sum(1 for _, marked in segments if marked)
        if marks > 4:
            raise CacheControlError(
                f"A maximum of 4 blocks with cache_control may be provided. Found {marks}."
            )
        hasher = hashlib.sha256()
        chars = 0
        marked: list[tuple[int, str]] = []  # (tokens up to the mark, key)
        for text, is_mark in segments:
            hasher.update(text.encode())
            chars += len(text)
            if is_mark and chars // 4 >= MIN_TOKENS:
                marked.append((chars // 4, hasher.copy().hexdigest()))
        total = chars // 4 + 1
        with self._lock:
            self._fresh(self._keys)
            read = max((tokens for tokens, key in marked if key in self._keys), default=0)
            for _, key in marked:
                self._keys[key] = self.clock()
        written = max(0, (marked[-1][0] if marked else 0) - read)
        return {
            "input_tokens": total - read - written,
            "output_tokens": output_tokens,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
        }


def _segment(block: Any) -> tuple[str, bool]:
    """A block's text as the cache sees it (without its mark), and whether it is marked."""
    if not isinstance(block, dict):
        return json.dumps(block), False
    control = block.get("cache_control")
    if control is not None and (
        not isinstance(control, dict)
        or control.get("type") != "ephemeral"
        or control.get("ttl", "5m") not in ("5m", "1h")
    ):
        raise CacheControlError("cache_control: Input should be {'type': 'ephemeral'}")
    plain = {k: v for k, v in block.items() if k != "cache_control"}
    return json.dumps(plain, sort_keys=True), control is not None


def _shared(a: str, b: str) -> int:
    """The length of the longest common prefix of `a` and `b` (slices compared, halving)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low
