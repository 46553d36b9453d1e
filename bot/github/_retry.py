"""Sending one GitHub request: retries with backoff, rate-limit waits and write spacing.

What is retried, and how:

* 5xx answers and connection failures (refused, reset, timeouts) are retried with
  exponential backoff: `backoff_s` * 1, 2, 4 ... plus up to 25 % jitter, for at
  most `attempts` tries in all (default 4: waits of 0.5, 1 and 2 s; longer when
  a 5xx carries its own `retry-after`, and no retry when that is beyond the
  cap). GETs, PATCHes, PUTs and reactions are idempotent and simply sent again. A POST that creates
  something (a comment, a check run, a review) may have been applied although its
  answer was a 502 or was lost, so `InstallationClient` sends those with
  `attempts=1` and, after each failure, looks for what it was creating (the same
  body from the App, the same check run `external_id`) before sending again: a
  retried create never duplicates (for a pull request: an open one from the same
  branch). When the tries run out the caller gets `RetryableError`, so the job is
  re-queued.
* Rate limits (403 or 429): `retry-after` (seconds) is honoured; otherwise, with
  `x-ratelimit-remaining: 0`, the client waits until `x-ratelimit-reset` (epoch
  seconds); a 429 or a "secondary rate limit" 403 without either waits 60 s, as
  GitHub's documentation asks. A wait longer than `max_sleep_s` (default 60 s) is
  not slept inside the run: `RateLimited(retry_at)` is raised at once so the job
  can be scheduled for later. At most `rate_limit_waits` waits per request.
* A quota seen to be spent (`x-ratelimit-remaining: 0` on any answer) is remembered
  per installation (and for the App's JWT): later requests wait for its reset, or
  raise `RateLimited` at once when that is beyond the cap, without being sent.
* Writes (POST, PATCH, PUT, DELETE) made with one installation's token are
  serialised and spaced at least `mutation_interval_s` apart (default 1 s), as
  GitHub's secondary-rate-limit guidance asks: a per-installation lock plus the
  time the previous write finished; the next write is sent no sooner than that
  plus the interval. Reads are neither serialised nor spaced. The spacing, like the
  quota memory, is kept per process.

Every request carries `X-Bot-Delivery: <delivery id>` when a delivery is bound in
the log context, so GitHub-side traces can be tied back to the webhook. Tokens and
JWTs travel only in the Authorization header and are never logged.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
from githubkit import GitHub, UnauthAuthStrategy
from githubkit.exception import RequestError, RequestFailed

from bot import metrics
from bot.github.errors import AuthError, GitHubError, NotFound, RateLimited, RetryableError
from bot.log import current_fields, get_logger

log = get_logger(__name__)

MUTATING = frozenset({"POST", "PATCH", "PUT", "DELETE"})
USER_AGENT = "repo-agent-bot"


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How hard one request tries. Tests shrink the intervals; production keeps the defaults."""

    attempts: int = 4
    backoff_s: float = 0.5
    max_sleep_s: float = 60.0
    rate_limit_waits: int = 3
    mutation_interval_s: float = 1.0
    timeout_s: float = 30.0


def rate_limit_wait(status: int, headers: Mapping[str, str], body: str, now: float) -> float | None:
    """Seconds to wait before retrying a rate-limited answer; None when it is not a rate limit."""
    if status not in (403, 429):
        return None
    retry_after = headers.get("retry-after")
    if retry_after is not None:
        try:
            return max(0.0, float(retry_after))
        except ValueError:
            return 60.0
    if headers.get("x-ratelimit-remaining") == "0":
        try:
            reset = float(headers.get("x-ratelimit-reset", ""))
        except ValueError:
            return 60.0
        if reset > 1e11:  # milliseconds, as some proxies and recordings give
            reset /= 1000
        return max(0.0, reset - now) + 1.0
    if status == 429 or "rate limit" in body.lower():
        return 60.0
    return None


def error_for(response: httpx.Response) -> GitHubError:
    """The exception for a final error answer, with GitHub's message and docs link."""
    message, docs = "", None
    try:
        data = response.json()
        if isinstance(data, dict):
            message = str(data.get("message") or "")
            docs = data.get("documentation_url")
            details = _validation_details(data.get("errors"))
            if details:  # a 422 says "Validation Failed" and puts the reason here
                message = f"{message}: {details}" if message else details
    except ValueError:
        message = response.text[:200]
    status = response.status_code
    if status == 404:
        return NotFound(status, message, docs)
    if status == 401:
        return AuthError(status, message, docs)
    if status >= 500:
        return RetryableError(status, message, docs)
    return GitHubError(status, message, docs)


def _validation_details(errors: object) -> str:
    """The reasons in a 422's `errors` list: each one's `message`, or its field and code."""
    if not isinstance(errors, list):
        return ""
    parts: list[str] = []
    for error in errors[:5]:
        if isinstance(error, str):
            parts.append(error)
        elif isinstance(error, dict):
            text = error.get("message") or " ".join(
                str(error[key]) for key in ("field", "code") if error.get(key)
            )
            if text:
                parts.append(str(text))
    return "; ".join(parts)[:500]


def _seconds(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


class _SharedTransport(httpx.AsyncBaseTransport):
    """Keeps one connection pool across the short-lived httpx clients githubkit creates."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:  # the owner closes `inner` once, at shutdown
        return None


class _Spacer:
    """Serialises one installation's writes and keeps them `interval` apart."""

    def __init__(self) -> None:
        self.lock = anyio.Lock()
        self.last_done = float("-inf")


class Sender:
    """Sends requests through githubkit with the retry, rate-limit and spacing rules above."""

    def __init__(
        self,
        api_url: str,
        *,
        policy: RetryPolicy,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        self.policy = policy
        self._clock = clock
        self._sleep = sleep
        self._inner = transport or httpx.AsyncHTTPTransport(retries=0)
        self._github: GitHub[Any] = GitHub(
            UnauthAuthStrategy(),
            base_url=api_url,
            async_transport=_SharedTransport(self._inner),
            auto_retry=False,
            http_cache=False,
            timeout=policy.timeout_s,
            user_agent=USER_AGENT,
            # Proxy settings from the environment apply to the network, not to a given transport.
            trust_env=transport is None,
        )
        self._spacers: dict[int, _Spacer] = {}
        self._exhausted: dict[int, float] = {}  # installation id (-1: the App) -> reset time

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def send(
        self,
        method: str,
        path: str,
        *,
        authorization: str,
        json: Any = None,
        params: Mapping[str, str | int] | None = None,
        accept: str = "application/vnd.github+json",
        installation_id: int | None = None,
        attempts: int | None = None,
        spaced: bool | None = None,
        guard: Callable[[], Awaitable[None]] | None = None,
    ) -> httpx.Response:
        """One request, retried per the policy; a 2xx/3xx answer or a GitHubError.

        Writes (`POST`, `PATCH`, `PUT`, `DELETE`) to one installation are spaced apart;
        `spaced` overrides that for a POST that only reads (a GraphQL query). `guard` is
        awaited right before each try goes out (after any spacing or backoff wait); what
        it raises ends the request unsent.

        `attempts=1` turns off the retries of 5xx answers and connection failures (rate
        limits are still waited for: GitHub applied nothing) for a write the caller
        makes idempotent itself.
        """
        method = method.upper()
        tries = attempts or self.policy.attempts
        await self._respect_exhausted_quota(installation_id, method, path)
        write = method in MUTATING if spaced is None else spaced
        if write and installation_id is not None:
            spacer = self._spacers.setdefault(installation_id, _Spacer())
            async with spacer.lock:
                wait = spacer.last_done + self.policy.mutation_interval_s - time.monotonic()
                if wait > 0:
                    await self._sleep(wait)
                try:
                    return await self._with_retries(
                        method,
                        path,
                        authorization,
                        json,
                        params,
                        accept,
                        tries,
                        installation_id,
                        guard,
                    )
                finally:
                    spacer.last_done = time.monotonic()
        return await self._with_retries(
            method, path, authorization, json, params, accept, tries, installation_id, guard
        )

    async def _with_retries(
        self,
        method: str,
        path: str,
        authorization: str,
        json: Any,
        params: Mapping[str, str | int] | None,
        accept: str,
        attempts: int,
        installation_id: int | None,
        guard: Callable[[], Awaitable[None]] | None = None,
    ) -> httpx.Response:
        headers = {
            "Authorization": authorization,
            "Accept": accept,
            "X-GitHub-Api-Version": "2022-11-28",
        }
        delivery = current_fields().get("delivery_id")
        if delivery is not None:
            headers["X-Bot-Delivery"] = str(delivery)
        failures = 0
        rate_waits = 0
        while True:
            if guard is not None:
                await guard()
            try:
                answer = await self._github.arequest(
                    method,
                    path,
                    headers=headers,
                    json=json,
                    params=dict(params) if params else None,
                )
                self._note_quota(installation_id, answer.raw_response)
                metrics.github_request(method, answer.raw_response.status_code)
                return answer.raw_response
            except RequestFailed as exc:
                response = exc.response.raw_response
                self._note_quota(installation_id, response)
                metrics.github_request(method, response.status_code)
            except RequestError as exc:
                metrics.github_request(method, None)
                failures += 1
                if failures >= attempts:
                    raise RetryableError(0, f"{method} {path}: {type(exc.exc).__name__}") from None
                await self.backoff(method, path, 0, failures)
                continue
            status = response.status_code
            wait = rate_limit_wait(status, response.headers, response.text, self._clock())
            if wait is not None:
                rate_waits += 1
                if wait > self.policy.max_sleep_s or rate_waits > self.policy.rate_limit_waits:
                    raise RateLimited(self._clock() + wait, f"{method} {path} rate limited")
                log.warning(
                    "github rate limited",
                    extra={"method": method, "path": path, "status": status, "wait_s": wait},
                )
                metrics.rate_limit_wait(wait)
                await self._sleep(wait)
                continue
            if status >= 500:
                failures += 1
                asked = _seconds(response.headers.get("retry-after"))
                if failures < attempts and (asked is None or asked <= self.policy.max_sleep_s):
                    await self.backoff(method, path, status, failures, at_least=asked or 0.0)
                    continue
            raise error_for(response)

    def _note_quota(self, installation_id: int | None, response: httpx.Response) -> None:
        """Remember when a quota (per installation, or the App's) ran out, and until when."""
        key = -1 if installation_id is None else installation_id
        if response.headers.get("x-ratelimit-remaining") != "0":
            self._exhausted.pop(key, None)
            return
        wait = rate_limit_wait(429, response.headers, "", self._clock())
        if wait is not None and wait > 1.0:  # 1 s is the margin added to every reset
            self._exhausted[key] = self._clock() + wait

    async def _respect_exhausted_quota(
        self, installation_id: int | None, method: str, path: str
    ) -> None:
        """Do not send while a known quota is spent (GitHub may ban clients that keep trying)."""
        key = -1 if installation_id is None else installation_id
        until = self._exhausted.get(key)
        if until is None:
            return
        wait = until - self._clock()
        if wait <= 0:
            self._exhausted.pop(key, None)
            return
        if wait > self.policy.max_sleep_s:
            raise RateLimited(until, f"{method} {path}: quota spent")
        log.warning(
            "github quota spent, waiting for the reset",
            extra={"method": method, "path": path, "wait_s": round(wait, 1)},
        )
        metrics.rate_limit_wait(wait)
        await self._sleep(wait)
        self._exhausted.pop(key, None)

    async def backoff(
        self, method: str, path: str, status: int, failures: int, *, at_least: float = 0.0
    ) -> None:
        """Sleep before try number `failures + 1`: `backoff_s` * 2^(failures-1), plus jitter,
        and no less than `at_least` (a 503's own `retry-after`)."""
        delay = self.policy.backoff_s * 2 ** (failures - 1)
        delay = max(delay + random.uniform(0, delay / 4), at_least)
        log.warning(
            "github request failed, retrying",
            extra={"method": method, "path": path, "status": status, "attempt": failures},
        )
        await self._sleep(delay)
