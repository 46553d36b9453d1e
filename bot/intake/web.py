"""The Starlette app: the signed webhook route, health, readiness and metrics, and the
operator's page under /ui/ when BOT_UI_TOKEN is set (bot/ui)."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
import orjson
from starlette.applications import Starlette
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from bot import metrics
from bot.intake.budget import IntakeBudget, Reservation
from bot.intake.delivery_writer import DeliveryWriter, IncomingDelivery, IntakeWriter
from bot.intake.refusals import RefusalLog, for_store, header_text
from bot.log import get_logger
from bot.probes import probe_routes
from bot.settings import Settings
from bot.store.backend import job_queue
from bot.store.contract import Storage, StoreError, storable
from bot.store.refusals import Refusal
from bot.store.sqlite import Store
from policies.github_events import GITHUB_EVENTS

if TYPE_CHECKING:
    from bot.runs.worker import Worker

log = get_logger(__name__)

WEBHOOK_PATH = "/webhooks/github"
MiB = 1024 * 1024
MAX_BODY = 25 * MiB  # GitHub's own cap on a delivery's payload
DEFAULT_BUDGET_MB = 64  # BOT_INTAKE_BUFFER_MB's default
# GitHub gives up on a delivery after 10 s, so a body still arriving then is not GitHub's.
BODY_DEADLINE = 10.0
RETRY_AFTER = b"10"  # seconds, with a 503 for a full buffer; bodies in flight free it fast

_EVENT = b"x-github-event"
_DELIVERY = b"x-github-delivery"
_SIGNATURE = b"x-hub-signature-256"
_LENGTH = b"content-length"
# Headers kept with the stored delivery; never the signature.
_KEPT = (
    _EVENT,
    _DELIVERY,
    b"x-github-hook-id",
    b"x-github-hook-installation-target-type",
    b"x-github-hook-installation-target-id",
    b"user-agent",
    b"content-type",
)
_WANTED = frozenset((*_KEPT, _SIGNATURE, _LENGTH))
_JSON_HEADERS = [(b"content-type", b"application/json")]
# GitHub's ids are 36-character GUIDs; tools and tests make up shorter tokens.
_DELIVERY_ID = re.compile(rb"[A-Za-z0-9._:-]{1,100}")
_EVENT_NAME = _DELIVERY_ID  # the shape of a name; which names: policies.github_events
_HEX64 = re.compile(rb"[0-9a-f]{64}")
# The shape of GitHub's delivery GUIDs: what a refusal keeps of the header.
_GUID = re.compile(rb"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_MISMATCH_HINT = (
    "check that BOT_WEBHOOK_SECRET matches the webhook secret in the GitHub App's settings"
)


def _body(payload: dict[str, str]) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


_ACCEPTED = _body({"status": "accepted"})
_DUPLICATE = _body({"status": "duplicate"})
_BUSY = _body({"error": "too many request bodies in flight; retry later"})


def signature_matches(body: bytes, header: bytes | None, secrets: Sequence[bytes]) -> bool:
    """True when `header` is `sha256=<hex>` of the HMAC of `body` under one of `secrets`."""
    given = _signature_digest(header)
    if given is None:
        return False
    macs = [hmac.new(secret, body, hashlib.sha256) for secret in secrets]
    return _any_matches(macs, given)


def _signature_digest(header: bytes | None) -> bytes | None:
    """The lower-case hex digest of a well-formed `sha256=<64 hex>` header, else None."""
    if header is None or not header.startswith(b"sha256="):
        return None
    given = header[7:].strip().lower()
    return given if _HEX64.fullmatch(given) else None


def _any_matches(macs: Sequence[hmac.HMAC], given: bytes) -> bool:
    found = False
    for mac in macs:
        # Compare against every secret so the time taken says nothing about which matched.
        found |= hmac.compare_digest(mac.hexdigest().encode(), given)
    return found


class WebhookReceiver:
    """A raw ASGI handler for POST /webhooks/github: verify, store, acknowledge.

    What it refuses before reading a byte of the body: a missing or malformed signature header
    (401), a missing event or delivery header, one that is not a short token of safe
    characters, or an event name that is not one of GitHub's (`policies.github_events`) (400),
    a declared length over the cap (413), and a declared length the memory budget cannot hold
    now (503 with Retry-After; see `bot/intake/budget.py`). While the body streams in, the
    HMAC is updated piece by piece for every configured secret, and the pieces are kept (an
    unverified body can only be judged at its end): a chunked body that passes the cap is 413,
    one the budget cannot hold is 503, one that has not arrived within `body_deadline` seconds
    is 408. Every refusal before the end of the body closes the connection. The reservation
    is held until the answer is sent and released on every way out, a disconnect or a
    cancelled task included.

    The body is parsed only to check that it is a JSON object and to read its `action`; the
    worker reads the payload's fields later, from the stored bytes.
    """

    def __init__(
        self,
        *,
        secrets: Sequence[bytes],
        insecure_no_signature: bool,
        writer: IntakeWriter,
        max_body: int = MAX_BODY,
        budget: IntakeBudget | None = None,
        body_deadline: float = BODY_DEADLINE,
        refusals: RefusalLog | None = None,
    ) -> None:
        if max_body < 1:
            raise ValueError("max_body must be at least 1 byte")
        budget = IntakeBudget(DEFAULT_BUDGET_MB * MiB) if budget is None else budget
        if budget.largest < max_body:
            raise ValueError(
                f"the intake buffer ({budget.total} bytes, BOT_INTAKE_BUFFER_MB) leaves "
                f"{budget.largest} bytes for one body, under the {max_body} bytes a delivery "
                "may have; raise BOT_INTAKE_BUFFER_MB"
            )
        self.secrets = tuple(secrets)
        # Keyed once; each request copies them instead of hashing the keys again.
        self._macs = tuple(hmac.new(secret, digestmod=hashlib.sha256) for secret in secrets)
        self.insecure_no_signature = insecure_no_signature
        self.writer = writer
        self.max_body = max_body
        self.budget = budget
        self.body_deadline = body_deadline
        self.refusals = refusals

    def _refused(self, scope: Scope, headers: dict[bytes, bytes], status: int, reason: str) -> None:
        """Note a refusal (`bot.intake.refusals`): never the body, never the signature."""
        if self.refusals is None:
            return
        client = scope.get("client")
        raw_id = headers.get(_DELIVERY, b"")
        self.refusals.note(
            Refusal(
                at=time.time(),
                source=str(client[0]) if client else "",
                event=header_text(headers.get(_EVENT, b"")),
                guid=raw_id.decode("ascii") if _GUID.fullmatch(raw_id) else None,
                status=status,
                reason=reason,
            )
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        headers: dict[bytes, bytes] = {}
        for key, value in scope["headers"]:
            if key in _WANTED:
                headers[key] = value
        raw_id = headers.get(_DELIVERY, b"")
        # An id that is not a plain token is never written to a log line.
        delivery_id = raw_id.decode("ascii") if _DELIVERY_ID.fullmatch(raw_id) else ""
        raw_event = headers.get(_EVENT, b"")
        event = raw_event.decode("ascii") if _EVENT_NAME.fullmatch(raw_event) else ""

        if not self.secrets and not self.insecure_no_signature:
            log.error(
                "delivery refused: no webhook secret is configured; set BOT_WEBHOOK_SECRET",
                extra={"delivery_id": delivery_id, "event": event, "outcome": "no_secret"},
            )
            metrics.delivery(metrics.UNVERIFIED, "no_secret")
            self._refused(scope, headers, 503, "no_secret")
            await _reply(send, 503, "no webhook secret is configured; set BOT_WEBHOOK_SECRET")
            return
        given = _signature_digest(headers.get(_SIGNATURE))
        if self.secrets and given is None:
            log.warning(
                "delivery refused: no usable X-Hub-Signature-256 header",
                extra={"delivery_id": delivery_id, "event": event, "outcome": "unsigned"},
            )
            metrics.delivery(metrics.UNVERIFIED, "unsigned")
            self._refused(scope, headers, 401, "unsigned")
            await _reply(send, 401, "invalid or missing X-Hub-Signature-256", close=True)
            return
        if not raw_event or not raw_id:
            self._log(delivery_id, event, "missing_headers")
            self._refused(scope, headers, 400, "missing_headers")
            await _reply(
                send,
                400,
                "X-GitHub-Event and X-GitHub-Delivery headers are required",
                close=True,
            )
            return
        if not delivery_id or not event:
            self._log(delivery_id, event, "bad_headers", length=len(raw_id) + len(raw_event))
            self._refused(scope, headers, 400, "bad_headers")
            await _reply(
                send,
                400,
                "X-GitHub-Delivery and X-GitHub-Event must be at most 100 letters, digits "
                "and . _ : -",
                close=True,
            )
            return
        if event not in GITHUB_EVENTS:
            # The signature does not cover the headers: a captured body sent under made-up
            # event names would be stored once per name.
            self._log(delivery_id, event, "unknown_event")
            self._refused(scope, headers, 400, "unknown_event")
            await _reply(send, 400, "X-GitHub-Event is not one of GitHub's events", close=True)
            return

        declared = 0
        length = headers.get(_LENGTH)
        if length is not None:
            try:
                declared = int(length)
            except ValueError:
                metrics.delivery(metrics.UNVERIFIED, "bad_length")
                self._refused(scope, headers, 400, "bad_length")
                await _reply(send, 400, "invalid Content-Length", close=True)
                return
            if declared > self.max_body:
                self._log(delivery_id, event, "too_large", size=declared)
                self._refused(scope, headers, 413, "too_large")
                await _reply(send, 413, f"payload over {self.max_body} bytes", close=True)
                return

        reservation = self.budget.reservation()
        try:
            if not reservation.grow_to(declared):
                self._log(delivery_id, event, "over_budget", size=declared)
                self._refused(scope, headers, 503, "over_budget")
                await _busy(send)
                return
            await self._receive(
                delivery_id, event, given, reservation, receive, send, headers, started, scope
            )
        finally:
            reservation.release()

    async def _receive(
        self,
        delivery_id: str,
        event: str,
        given: bytes | None,
        reservation: Reservation,
        receive: Receive,
        send: Send,
        headers: dict[bytes, bytes],
        started: float,
        scope: Scope,
    ) -> None:
        macs = [mac.copy() for mac in self._macs]
        chunks: list[bytes] = []
        size = 0
        refusal = ""
        with anyio.move_on_after(self.body_deadline) as deadline:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                chunk: bytes = message.get("body", b"")
                size += len(chunk)
                if size > self.max_body:
                    refusal = "too_large"
                    break
                if not reservation.grow_to(size):
                    refusal = "over_budget"
                    break
                for mac in macs:
                    mac.update(chunk)
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
        if deadline.cancelled_caught:
            self._log(delivery_id, event, "too_slow", size=size)
            self._refused(scope, headers, 408, "too_slow")
            await _reply(send, 408, f"the body took over {self.body_deadline:g} s", close=True)
            return
        if refusal == "too_large":
            self._log(delivery_id, event, "too_large", size=size)
            self._refused(scope, headers, 413, "too_large")
            await _reply(send, 413, f"payload over {self.max_body} bytes", close=True)
            return
        if refusal == "over_budget":
            self._log(delivery_id, event, "over_budget", size=size)
            self._refused(scope, headers, 503, "over_budget")
            await _busy(send)
            return
        if self.secrets and (given is None or not _any_matches(macs, given)):
            log.warning(
                f"delivery refused: signature mismatch; {_MISMATCH_HINT}",
                extra={"delivery_id": delivery_id, "event": event, "outcome": "bad_signature"},
            )
            metrics.delivery(metrics.UNVERIFIED, "bad_signature")
            self._refused(scope, headers, 401, "bad_signature")
            await _reply(send, 401, "invalid or missing X-Hub-Signature-256")
            return
        # Joined only once verified: the copy doubles the body for a moment.
        body = b"".join(chunks)
        del chunks
        try:
            # orjson: the same check as json.loads at about a third of the cost, which is a
            # sixth of the route's CPU on a typical 13 KB delivery.
            payload = orjson.loads(body)
        except (ValueError, RecursionError):  # orjson.JSONDecodeError is a ValueError
            payload = None
        if not isinstance(payload, dict):
            self._log(delivery_id, event, "not_json", verified=True)
            self._refused(scope, headers, 400, "not_json")
            await _reply(send, 400, "the body must be a JSON object")
            return
        action = payload.get("action")

        # Text columns get no NUL on either backend (see bot.store.contract.storable); the JSON of
        # the headers escapes one already, and the body is kept as it came.
        kept = {
            key.decode(): storable(headers[key].decode("latin-1"))
            for key in _KEPT
            if key in headers
        }
        incoming = IncomingDelivery(
            guid=delivery_id,
            event=event,
            action=storable(action) if isinstance(action, str) else None,
            hook_id=kept.get("x-github-hook-id"),
            target_type=kept.get("x-github-hook-installation-target-type"),
            target_id=kept.get("x-github-hook-installation-target-id"),
            headers_json=json.dumps(kept, separators=(",", ":")),
            body=body,
            received_at=time.time(),
        )
        try:
            is_new = await self.writer.submit(incoming)
        except StoreError as exc:
            log.error(
                "delivery not stored",
                extra={"delivery_id": delivery_id, "event": event, "error": str(exc)},
            )
            self._count(event, "store_error", verified=True)
            self._refused(scope, headers, 503, "store_error")
            # A 5xx makes GitHub show the delivery as failed, so it can be redelivered.
            await _reply(send, 503, "the store is unavailable; redeliver later")
            return
        outcome = "accepted" if is_new else "duplicate"
        log.info("delivery", extra={"delivery_id": delivery_id, "event": event, "outcome": outcome})
        await send(
            {
                "type": "http.response.start",
                "status": 202 if is_new else 200,
                "headers": _JSON_HEADERS,
            }
        )
        await send({"type": "http.response.body", "body": _ACCEPTED if is_new else _DUPLICATE})
        self._count(event, outcome, verified=True, seconds=time.perf_counter() - started)

    def _log(
        self, delivery_id: str, event: str, outcome: str, *, verified: bool = False, **extra: object
    ) -> None:
        log.info(
            "delivery",
            extra={"delivery_id": delivery_id, "event": event, "outcome": outcome, **extra},
        )
        self._count(event, outcome, verified=verified)

    def _count(
        self, event: str, outcome: str, *, verified: bool, seconds: float | None = None
    ) -> None:
        # An event name is a label only once a secret vouched for the body, and only one of
        # GitHub's (bot/metrics.py holds to that list whoever calls it).
        label = event if verified and self.secrets else metrics.UNVERIFIED
        metrics.delivery(label, outcome, seconds)


async def _busy(send: Send) -> None:
    headers = [*_JSON_HEADERS, (b"retry-after", RETRY_AFTER), (b"connection", b"close")]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": _BUSY})


async def _reply(send: Send, status: int, error: str, *, close: bool = False) -> None:
    headers = list(_JSON_HEADERS)
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": _body({"error": error})})


def _writer(
    store: Storage,
    on_commit: Callable[[int], None] | None,
    checkpoint_interval: float,
    durability: str,
) -> IntakeWriter:
    """The store's own way of committing deliveries with their jobs (`durability` is
    SQLite's: Postgres commits as its server is configured to)."""
    if isinstance(store, Store):
        return DeliveryWriter(
            store.path,
            checkpoint_interval=checkpoint_interval,
            on_commit=on_commit,
            durability=durability,
        )
    from bot.intake.postgres_writer import PostgresIntake  # psycopg is imported only for Postgres
    from bot.store.postgres.store import PostgresStore

    if isinstance(store, PostgresStore):
        return PostgresIntake(store, on_commit=on_commit)
    raise TypeError(f"no intake for a {type(store).__name__}")


def create_app(
    settings: Settings,
    store: Storage,
    *,
    worker: Worker | None = None,
    max_body: int = MAX_BODY,
    checkpoint_interval: float = 1.0,
    on_commit: Callable[[int], None] | None = None,
) -> Starlette:
    """The web app. Its lifespan runs the delivery writer and, when given, the worker pool.

    `max_body` caps a delivery's size (GitHub's 25 MB by default); `worker` runs in the same
    event loop as the server and is woken whenever new deliveries are committed; `on_commit`
    (called on the event loop with the number of new deliveries) wakes a worker elsewhere.
    `GET /metrics` serves `bot/metrics.py`'s page, with the queue read from `store`.
    """
    if on_commit is None and worker is not None:
        on_commit = worker.wake
    writer = _writer(store, on_commit, checkpoint_interval, settings.durability)
    read_queue = job_queue(store).stats_sync
    refusals = for_store(store)
    receiver = WebhookReceiver(
        secrets=settings.webhook_secrets,
        insecure_no_signature=settings.insecure_no_signature,
        writer=writer,
        max_body=max_body,
        budget=IntakeBudget(settings.intake_buffer_mb * MiB),
        refusals=refusals,
    )

    closing: list[Callable[[], Awaitable[None]]] = []

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        writer.start()
        refusals.start()
        try:
            async with anyio.create_task_group() as tasks:
                if worker is not None:
                    await tasks.start(worker.run)
                yield
                tasks.cancel_scope.cancel()
        finally:
            await anyio.to_thread.run_sync(writer.stop)
            await anyio.to_thread.run_sync(refusals.stop)
            for close in closing:
                await close()

    routes: list[BaseRoute] = [
        Route(WEBHOOK_PATH, receiver, methods=["POST"]),
        *probe_routes(lambda: writer.running, store, read_queue),
    ]
    if settings.ui_token is not None or settings.github_sign_in:
        from bot.ui.app import OperatorPage  # Jinja2 is loaded only when the page is on

        page = OperatorPage(settings, store)
        routes.append(page.mount())
        closing.append(page.aclose)
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.writer = writer
    app.state.refusals = refusals
    app.state.store = store
    return app
