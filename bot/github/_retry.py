"""Our policy for every GitHub request, as the httpx transport under githubkit.

githubkit builds, authenticates and checks each request; every try then passes through
`Sender.send`, which owns what GitHub's guidance asks of an App and githubkit does not do
(its own retries and cache are off):

* 5xx answers and connection failures (refused, reset, timeouts) are retried with
  exponential backoff: `backoff_s` * 1, 2, 4 ... plus up to 25 % jitter, for at
  most `attempts` tries in all (default 4: waits of 0.5, 1 and 2 s; longer when
  a 5xx carries its own `retry-after`, and no retry when that is beyond the
  cap). GETs, PATCHes, PUTs and reactions are idempotent and simply sent again. A POST that creates
  something (a comment, a check run, a review) may have been applied although its
  answer was a 502 or was lost, so `InstallationClient` sends those under `call_options(attempts=1)`
  and, after each failure, looks for what it was creating (the same body from the App, the
  same check run `external_id`) before sending again: a retried create never duplicates
  (for a pull request: an open one from the same branch). When the tries run out the caller
  gets `RetryableError`, so the job is re-queued.
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
  GitHub's secondary-rate-limit guidance asks. Reads (and GraphQL queries, sent under `call_options(spaced=False)`) are neither
  serialised nor spaced. The spacing, like the quota memory, is kept per process. Before
  each try of a write, the installation's `guard` is awaited (the job's lease, see
  `bot.store.queue.fence`); what it raises ends the request unsent.

Every request carries `X-Bot-Delivery: <delivery id>` when a delivery is bound in
the log context, so GitHub-side traces can be tied back to the webhook. Tokens and
JWTs travel only in the Authorization header and are never logged.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import anyio
import httpx

from bot import metrics
from bot.github.errors import AuthError, GitHubError, NotFound, RateLimited, RetryableError
from bot.log import current_fields, get_logger

log = get_logger(__name__)

MUTATING = frozenset({"POST", "PATCH", "PUT", "DELETE"})
USER_AGENT = "repo-agent-bot"
Guard = Callable[[], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How hard one request tries. Tests shrink the intervals; production keeps the defaults."""

    attempts: int = 4
    backoff_s: float = 0.5
    max_sleep_s: float = 60.0
    rate_limit_waits: int = 3
    mutation_interval_s: float = 1.0
    timeout_s: float = 30.0


@dataclass(frozen=True, slots=True)
class _CallOptions:
    attempts: int | None = None
    spaced: bool | None = None


_DEFAULTS = _CallOptions()
_OPTIONS: ContextVar[_CallOptions] = ContextVar("github_call_options", default=_DEFAULTS)


@contextmanager
def call_options(*, attempts: int | None = None, spaced: bool | None = None) -> Iterator[None]:
    """Installation requests made inside: `attempts=1` tries once on a 5xx or a lost answer
    (a create, see above; rate limits are still waited for); `spaced=False` is a POST that
    only reads (a GraphQL query): neither spaced nor fenced."""
    outer = _OPTIONS.get()
    reset = _OPTIONS.set(
        _CallOptions(
            attempts=attempts or outer.attempts, spaced=outer.spaced if spaced is None else spaced
        )
    )
    try:
        yield
    finally:
        _OPTIONS.reset(reset)


def _seconds(value: str | None) -> float | None:
    """A header's number of seconds (at least 0); None when absent or not a number."""
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def rate_limit_wait(status: int, headers: Mapping[str, str], body: str, now: float) -> float | None:
    """Seconds to wait before retrying a rate-limited answer; None when it is not a rate limit."""
    if status not in (403, 429):
        return None
    if "retry-after" in headers:
        asked = _seconds(headers["retry-after"])
        return 60.0 if asked is None else asked
    if headers.get("x-ratelimit-remaining") == "0":
        reset = _seconds(headers.get("x-ratelimit-reset"))
        if reset is None:
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
    accepted = response.headers.get("x-accepted-github-permissions")
    if status == 403 and accepted:  # a token without the permission: say which would do
        message = f"{message} (the token needs {accepted.replace('; ', ' or ')})"
    if status >= 500:
        return RetryableError(status, message, docs)
    return {404: NotFound, 401: AuthError}.get(status, GitHubError)(status, message, docs)


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


class Sender:
    """The state the rules above keep per process (spacing, spent quotas) and the network."""

    def __init__(
        self,
        policy: RetryPolicy,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        self.policy = policy
        self._clock = clock
        self._sleep = sleep
        self._inner = transport or httpx.AsyncHTTPTransport(retries=0)
        # Per installation: its writes' lock and when the last one finished.
        self._write_locks: dict[int, anyio.Lock] = {}
        self._last_write: dict[int, float] = {}
        self._exhausted: dict[int, float] = {}  # installation id (-1: the App) -> reset time

    def transport(
        self, installation_id: int | None = None, guard: Guard | None = None
    ) -> httpx.AsyncBaseTransport:
        """The transport for githubkit: the App's (None) or one installation's requests."""
        return _PolicyTransport(self, installation_id, guard)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def send(
        self, request: httpx.Request, installation_id: int | None, guard: Guard | None
    ) -> httpx.Response:
        """One request, retried per the policy: an answer that is no rate limit or 5xx any more
        (githubkit turns an error answer into its exception), or RetryableError/RateLimited."""
        options = _OPTIONS.get() if installation_id is not None else _DEFAULTS
        method = request.method
        delivery = current_fields().get("delivery_id")
        if delivery is not None:
            request.headers["X-Bot-Delivery"] = str(delivery)
        quota = -1 if installation_id is None else installation_id
        await self._respect_exhausted_quota(quota, request)
        write = method in MUTATING if options.spaced is None else options.spaced
        tries = options.attempts or self.policy.attempts
        if not write or installation_id is None:
            return await self._with_retries(request, tries, quota, None)
        async with self._write_locks.setdefault(installation_id, anyio.Lock()):
            last = self._last_write.get(installation_id, float("-inf"))
            wait = last + self.policy.mutation_interval_s - time.monotonic()
            if wait > 0:
                await self._sleep(wait)
            try:
                return await self._with_retries(request, tries, quota, guard)
            finally:
                self._last_write[installation_id] = time.monotonic()

    async def _with_retries(
        self,
        request: httpx.Request,
        attempts: int,
        quota: int,
        guard: Guard | None,
    ) -> httpx.Response:
        method, path = request.method, request.url.path
        failures = 0
        rate_waits = 0
        while True:
            if guard is not None:
                await guard()
            try:
                response = await self._inner.handle_async_request(request)
                if response.status_code >= 400:
                    body = await response.aread()
                    await response.aclose()
            except httpx.TransportError as exc:
                metrics.github_request(method, None)
                failures += 1
                if failures >= attempts:
                    raise RetryableError(0, f"{method} {path}: {type(exc).__name__}") from None
                await self.backoff(method, path, 0, failures)
                continue
            status, headers = response.status_code, response.headers
            self._note_quota(quota, headers)
            metrics.github_request(method, status)
            if status < 400:
                return response
            text = body.decode("utf-8", errors="replace")
            wait = rate_limit_wait(status, headers, text, self._clock())
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
                asked = _seconds(headers.get("retry-after"))
                if failures < attempts and (asked is None or asked <= self.policy.max_sleep_s):
                    await self.backoff(method, path, status, failures, at_least=asked or 0.0)
                    continue
            return httpx.Response(status, headers=headers, content=body, request=request)

    def _note_quota(self, quota: int, headers: httpx.Headers) -> None:
        """Remember when a quota (an installation's, or the App's: -1) ran out, and until when."""
        if headers.get("x-ratelimit-remaining") != "0":
            self._exhausted.pop(quota, None)
            return
        wait = rate_limit_wait(429, headers, "", self._clock())
        if wait is not None and wait > 1.0:  # 1 s is the margin added to every reset
            self._exhausted[quota] = self._clock() + wait

    async def _respect_exhausted_quota(self, quota: int, request: httpx.Request) -> None:
        """Do not send while a known quota is spent (GitHub may ban clients that keep trying)."""
        until = self._exhausted.get(quota)
        if until is None:
            return
        wait = until - self._clock()
        if wait <= 0:
            self._exhausted.pop(quota, None)
            return
        method, path = request.method, request.url.path
        if wait > self.policy.max_sleep_s:
            raise RateLimited(until, f"{method} {path}: quota spent")
        log.warning(
            "github quota spent, waiting for the reset",
            extra={"method": method, "path": path, "wait_s": round(wait, 1)},
        )
        metrics.rate_limit_wait(wait)
        await self._sleep(wait)
        self._exhausted.pop(quota, None)

    async def backoff(
        self, method: str, path: str, status: int, failures: int, *, at_least: float = 0.0
    ) -> None:
        """Sleep before try `failures + 1`, at least `at_least` (a 503's own `retry-after`)."""
        delay = self.policy.backoff_s * 2 ** (failures - 1)
        delay = max(delay + random.uniform(0, delay / 4), at_least)
        log.warning(
            "github request failed, retrying",
            extra={"method": method, "path": path, "status": status, "attempt": failures},
        )
        await self._sleep(delay)


@dataclass(frozen=True, slots=True)
class _PolicyTransport(httpx.AsyncBaseTransport):
    """What githubkit sends through: `Sender.send` for one installation (or the App).

    githubkit opens a short-lived httpx client per call and closes its transport with it;
    the network under `Sender` stays open until `Sender.aclose`."""

    sender: Sender
    installation_id: int | None
    guard: Guard | None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self.sender.send(request, self.installation_id, self.guard)

    async def aclose(self) -> None:
        return None
