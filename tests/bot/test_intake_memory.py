"""The webhook route's memory: the body budget, refusals before reading, and a flood of bodies."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx
import pytest
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from starlette.routing import Route

from bot.intake.budget import IntakeBudget
from bot.intake.delivery_writer import DeliveryWriter
from bot.intake.web import WebhookReceiver, create_app
from bot.settings import SettingsError, load_settings
from bot.store.sqlite import Store

SECRET = b"memory-test-secret"
ROOT = Path(__file__).resolve().parents[2]
MiB = 1024 * 1024

Message = dict[str, object]


def sign(body: bytes, secret: bytes = SECRET) -> bytes:
    return b"sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest().encode()


def json_body(size: int) -> bytes:
    """A JSON object of exactly `size` bytes."""
    body = b'{"action":"opened","pad":"' + b"x" * (size - 28) + b'"}'
    assert len(body) == size
    return body


@dataclass
class Pending:
    """One request to the raw ASGI receiver, whose body the test hands over piece by piece."""

    headers: list[tuple[bytes, bytes]]
    inbox: MemoryObjectSendStream[Message]
    outbox: MemoryObjectReceiveStream[Message]
    sent: list[Message] = field(default_factory=list)
    reads: int = 0
    done: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)

    async def run(self, receiver: WebhookReceiver) -> None:
        async def receive() -> Message:
            message = await self.outbox.receive()
            self.reads += 1
            return message

        async def send(message: Message) -> None:
            self.sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/webhooks/github"}
        try:
            with self.scope:
                await receiver({**scope, "headers": self.headers}, receive, send)  # type: ignore[arg-type]
        finally:
            self.done.set()

    async def feed(self, chunk: bytes, *, more: bool = True) -> None:
        await self.inbox.send({"type": "http.request", "body": chunk, "more_body": more})

    async def disconnect(self) -> None:
        await self.inbox.send({"type": "http.disconnect"})

    async def wait_reads(self, reads: int) -> None:
        """Until the receiver has taken `reads` messages and waits for the next one."""
        with anyio.fail_after(10):
            await anyio.wait_all_tasks_blocked()
        assert (self.reads, self.done.is_set()) == (reads, False)

    @property
    def status(self) -> int:
        assert self.done.is_set(), "the request has not been answered"
        return int(self.sent[0]["status"])  # type: ignore[call-overload]

    @property
    def response_headers(self) -> dict[bytes, bytes]:
        return dict(self.sent[0]["headers"])  # type: ignore[call-overload]

    async def answered(self) -> int:
        with anyio.fail_after(10):
            await self.done.wait()
        return self.status


def request_headers(
    *,
    length: int | None,
    signature: bytes | None = b"sha256=" + b"0" * 64,
    guid: bytes = b"0f2c6a9e-1d4b-11ef-8c3a-2f1e4c5b6a7d",
) -> list[tuple[bytes, bytes]]:
    headers = [(b"x-github-event", b"issues"), (b"x-github-delivery", guid)]
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    if signature is not None:
        headers.append((b"x-hub-signature-256", signature))
    return headers


class Intake:
    """A receiver with a small budget, a running writer, and requests started in a task group."""

    def __init__(self, receiver: WebhookReceiver, tasks: TaskGroup, store: Store) -> None:
        self.receiver = receiver
        self.tasks = tasks
        self.store = store

    @property
    def in_use(self) -> int:
        return self.receiver.budget.in_use

    def start(self, headers: list[tuple[bytes, bytes]]) -> Pending:
        inbox, outbox = anyio.create_memory_object_stream[Message](64)
        pending = Pending(headers, inbox, outbox)
        self.tasks.start_soon(pending.run, self.receiver)
        return pending

    async def post(self, body: bytes, guid: bytes, *, chunk: int = 512) -> int:
        """A whole signed delivery, sent in pieces; returns its status."""
        pending = self.start(request_headers(length=len(body), signature=sign(body), guid=guid))
        pieces = [body[i : i + chunk] for i in range(0, len(body), chunk)] or [b""]
        for n, piece in enumerate(pieces, 1):
            await pending.feed(piece, more=n < len(pieces))
        return await pending.answered()


@asynccontextmanager
async def intake(
    data_dir: Path,
    *,
    total: int = 4000,
    reserve: int = 1000,
    small: int = 500,
    max_body: int = 2000,
    body_deadline: float = 30.0,
) -> AsyncIterator[Intake]:
    store = Store.open(data_dir / "bot.sqlite3")
    writer = DeliveryWriter(store.path)
    writer.start()
    receiver = WebhookReceiver(
        secrets=[SECRET],
        insecure_no_signature=False,
        writer=writer,
        max_body=max_body,
        budget=IntakeBudget(total, reserve=reserve, small=small),
        body_deadline=body_deadline,
    )
    try:
        async with anyio.create_task_group() as tasks:
            yield Intake(receiver, tasks, store)
    finally:
        writer.stop()
        store.close()


pytestmark = pytest.mark.anyio


# -- refusals before the body is read ---------------------------------------------------------


@pytest.mark.parametrize(
    "signature",
    [
        pytest.param(None, id="missing"),
        pytest.param(b"", id="empty"),
        pytest.param(b"sha1=" + b"0" * 40, id="sha1"),
        pytest.param(b"sha256=" + b"0" * 63, id="short"),
        pytest.param(b"sha256=" + b"g" * 64, id="not-hex"),
    ],
)
async def test_an_unusable_signature_header_is_401_before_the_body_is_read(
    data_dir: Path, signature: bytes | None
) -> None:
    async with intake(data_dir) as h:
        pending = h.start(request_headers(length=1500, signature=signature))
        await pending.feed(json_body(1500), more=False)
        assert (await pending.answered(), pending.reads) == (401, 0)
        assert pending.response_headers.get(b"connection") == b"close"
        assert h.in_use == 0


@pytest.mark.parametrize(
    "guid",
    [
        pytest.param(b"a" * 101, id="over-100"),
        pytest.param(b"0f2c6a9e-1d4b-11ef-8c3a-2f1e4c5b6a7d" * 30, id="guid-times-30"),
        pytest.param(b"guid with spaces", id="space"),
        pytest.param(b"guid/../../etc", id="slash"),
        pytest.param(b"<script>", id="markup"),
        pytest.param(b"guid\x1b[31m", id="escape"),
        pytest.param("guíd".encode(), id="non-ascii"),
    ],
)
async def test_an_odd_delivery_id_is_400_before_the_body_is_read(
    data_dir: Path, guid: bytes
) -> None:
    body = json_body(600)
    async with intake(data_dir) as h:
        pending = h.start(request_headers(length=len(body), signature=sign(body), guid=guid))
        await pending.feed(body, more=False)
        assert (await pending.answered(), pending.reads) == (400, 0)
        assert h.in_use == 0 and h.store.count_deliveries() == 0


async def test_an_odd_event_name_is_400_before_the_body_is_read(data_dir: Path) -> None:
    body = json_body(600)
    async with intake(data_dir) as h:
        headers = request_headers(length=len(body), signature=sign(body))
        headers[0] = (b"x-github-event", b"issues" * 100)
        pending = h.start(headers)
        await pending.feed(body, more=False)
        assert (await pending.answered(), pending.reads) == (400, 0)
        assert h.in_use == 0 and h.store.count_deliveries() == 0


async def test_a_guid_and_the_ids_tools_make_up_are_accepted(data_dir: Path) -> None:
    async with intake(data_dir) as h:
        for guid in (b"0f2c6a9e-1d4b-11ef-8c3a-2f1e4c5b6a7d", b"guid-1", b"c16-1-42", b"a" * 100):
            assert await h.post(json_body(300), guid) == 202, guid
        assert h.store.count_deliveries() == 4


# -- the budget -------------------------------------------------------------------------------


async def test_a_body_that_would_pass_the_budget_is_503_with_retry_after_before_reading(
    data_dir: Path,
) -> None:
    # 4000 bytes in all, of which 1000 only for bodies of at most 500 bytes.
    async with intake(data_dir) as h:
        first = h.start(request_headers(length=2000))
        await first.feed(b"{" * 1000)
        await first.wait_reads(1)
        assert h.in_use == 2000  # the whole declared length, reserved before reading

        second = h.start(request_headers(length=1500))
        await second.feed(b"{" * 1500, more=False)
        assert (await second.answered(), second.reads) == (503, 0)
        assert second.response_headers[b"retry-after"].isdigit()
        assert second.response_headers.get(b"connection") == b"close"

        # A small delivery still fits, in the part kept for small bodies.
        assert await h.post(json_body(450), b"small-1") == 202
        assert h.in_use == 2000

        await first.disconnect()
        await first.done.wait()
        assert h.in_use == 0
        assert await h.post(json_body(1500), b"large-after") == 202
        assert h.in_use == 0


async def test_a_chunked_body_reserves_as_it_reads_and_gets_503_when_it_runs_out(
    data_dir: Path,
) -> None:
    async with intake(data_dir) as h:
        holder = h.start(request_headers(length=2000))
        await holder.feed(b"{")
        await holder.wait_reads(1)

        chunked = h.start(request_headers(length=None))
        for _ in range(4):
            await chunked.feed(b"x" * 500)
        # 500 (small, from anywhere), 1000 (large: up to 3000 in all), 1500: over.
        assert await chunked.answered() == 503
        assert chunked.reads == 3
        assert chunked.response_headers[b"retry-after"].isdigit()
        assert h.in_use == 2000

        await holder.disconnect()
        await holder.done.wait()
        assert h.in_use == 0


async def test_a_body_over_the_whole_budget_cannot_be_configured(data_dir: Path) -> None:
    store = Store.open(data_dir / "bot.sqlite3")
    try:
        with pytest.raises(ValueError, match="BOT_INTAKE_BUFFER_MB"):
            WebhookReceiver(
                secrets=[SECRET],
                insecure_no_signature=False,
                writer=DeliveryWriter(store.path),
                max_body=3001,
                budget=IntakeBudget(4000, reserve=1000, small=500),
            )
    finally:
        store.close()


async def test_the_reservation_is_released_on_every_way_out(data_dir: Path) -> None:
    async with intake(data_dir) as h:
        # A wrong signature, known only at the end.
        body = json_body(1500)
        pending = h.start(request_headers(length=1500, signature=sign(body, b"other")))
        await pending.feed(body, more=False)
        assert await pending.answered() == 401 and h.in_use == 0

        # Signed, but not JSON.
        pending = h.start(request_headers(length=3, signature=sign(b"[1]")))
        await pending.feed(b"[1]", more=False)
        assert await pending.answered() == 400 and h.in_use == 0

        # A streamed body past the size cap.
        pending = h.start(request_headers(length=None))
        for _ in range(5):
            await pending.feed(b"x" * 450)
        assert await pending.answered() == 413 and h.in_use == 0

        # The client goes away half way.
        pending = h.start(request_headers(length=1500))
        await pending.feed(b"x" * 700)
        await pending.wait_reads(1)
        assert h.in_use == 1500
        await pending.disconnect()
        await pending.done.wait()
        assert h.in_use == 0

        # The server gives up on a request (shutdown, a cancelled task).
        pending = h.start(request_headers(length=1500))
        await pending.feed(b"x" * 700)
        await pending.wait_reads(1)
        assert h.in_use == 1500
        pending.scope.cancel()
        await pending.done.wait()
        assert h.in_use == 0 and not pending.sent

        assert await h.post(json_body(2000), b"after-all") == 202
        assert h.in_use == 0


async def test_a_body_that_stalls_is_cut_at_the_deadline_and_releases_its_reservation(
    data_dir: Path,
) -> None:
    async with intake(data_dir, body_deadline=0.2) as h:
        stalled = h.start(request_headers(length=2000))
        await stalled.feed(b"x" * 100)
        assert await stalled.answered() == 408
        assert stalled.response_headers.get(b"connection") == b"close"
        assert h.in_use == 0
        assert await h.post(json_body(2000), b"after-stall") == 202


async def test_a_store_error_releases_the_reservation(data_dir: Path) -> None:
    async with intake(data_dir) as h:
        h.receiver.writer.stop()
        assert await h.post(json_body(1000), b"no-store") == 503
        assert h.in_use == 0


def test_the_budget_keeps_a_part_for_small_bodies() -> None:
    budget = IntakeBudget(4000, reserve=1000, small=500)
    assert budget.take(0, 3000)
    assert not budget.take(0, 501)  # a large body gets nothing of the reserve
    assert budget.take(0, 500)
    assert budget.take(0, 500)
    assert not budget.take(0, 1)  # everything is taken
    budget.give_back(1000)
    assert budget.take(400, 100)  # still small: 500 in all
    assert not budget.take(500, 1)  # grown past small
    assert budget.in_use == 3100


# -- a flood against `bot serve` as a process -------------------------------------------------

FLOOD = 40
FLOOD_BODY = 20 * MiB
PIECE = MiB
FLOOD_ATTEMPTS = 30
SIGNED = 20


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def memory_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOT_")}
    env.update(
        {
            "BOT_DATA_DIR": str(tmp_path / "data"),
            "BOT_WEBHOOK_SECRET": SECRET.decode(),
            "BOT_APP_SLUG": "repo-agent",
            "PYTHONPATH": str(ROOT),
        }
    )
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            # One process: its memory is what is measured.
            [
                *(sys.executable, "-m", "bot.cli", "serve", "--no-worker", "--receivers", "1"),
                *("--port", str(port)),
            ],
            cwd=tmp_path,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        for _ in range(300):
            if proc.poll() is not None:
                pytest.fail(f"bot serve exited with {proc.returncode}:\n{log_path.read_text()}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        else:
            pytest.fail(f"bot serve did not become ready:\n{log_path.read_text()}")
        yield proc, port
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def flood_one(port: int, n: int, signature: bytes | None, piece: bytes) -> int | None:
    """POST a 20 MB body a piece at a time, stopping when the server answers or hangs up.
    Returns the status, or None when the connection was cut before an answer could be read."""
    head = (
        b"POST /webhooks/github HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nX-GitHub-Event: issues\r\n"
        + f"X-GitHub-Delivery: flood-{n}\r\nContent-Length: {FLOOD_BODY}\r\n".encode()
        + (b"" if signature is None else b"X-Hub-Signature-256: " + signature + b"\r\n")
        + b"\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        try:
            sock.sendall(head)
            for _ in range(FLOOD_BODY // len(piece)):
                if select.select([sock], [], [], 0)[0]:
                    break  # answered early
                sock.sendall(piece)
                time.sleep(0.02)  # slow enough that the forty overlap
            answer = b""
            while b"\r\n" not in answer and len(answer) < 4096:
                got = sock.recv(4096)
                if not got:
                    break
                answer += got
        except OSError:
            return None
    parts = answer.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


@pytest.mark.slow
def test_forty_unsigned_20_mb_bodies_stay_within_the_budget_and_signed_deliveries_pass(
    serve: tuple[subprocess.Popen[bytes], int],
) -> None:
    proc, port = serve
    url = f"http://127.0.0.1:{port}/webhooks/github"
    signed_body = json.dumps({"action": "opened", "pad": "x" * 13_000}).encode()

    def post_signed(client: httpx.Client, guid: str) -> int:
        headers = {
            "X-GitHub-Event": "issues",
            "X-GitHub-Delivery": guid,
            "X-Hub-Signature-256": sign(signed_body).decode(),
            "Content-Type": "application/json",
        }
        return client.post(url, content=signed_body, headers=headers).status_code

    with httpx.Client(timeout=60) as client:
        assert [post_signed(client, f"warm-{i}") for i in range(5)] == [202] * 5
    before = memory_kib(proc.pid, "VmRSS")

    flood: list[int | None] = []
    signed: list[int] = []
    piece = b"x" * PIECE
    signed_done = threading.Event()

    def one(n: int) -> None:
        # Half send no signature at all, half a forged one that is only known bad at the end;
        # each tries again when refused, as a flood would, until the signed ones are through.
        signature = None if n % 2 else b"sha256=" + b"0" * 64
        for attempt in range(FLOOD_ATTEMPTS):
            flood.append(flood_one(port, n * FLOOD_ATTEMPTS + attempt, signature, piece))
            if signed_done.wait(0.05):
                return

    def signed_meanwhile() -> None:
        time.sleep(0.2)
        try:
            with httpx.Client(timeout=60) as client:
                for i in range(SIGNED):
                    signed.append(post_signed(client, f"signed-{i}"))
                    time.sleep(0.05)
        finally:
            signed_done.set()

    threads = [threading.Thread(target=one, args=(n,)) for n in range(FLOOD)]
    threads.append(threading.Thread(target=signed_meanwhile))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not any(thread.is_alive() for thread in threads)

    peak_growth_mib = (memory_kib(proc.pid, "VmHWM") - before) / 1024
    budget_mib = 64  # BOT_INTAKE_BUFFER_MB's default
    assert signed == [202] * SIGNED
    assert peak_growth_mib < budget_mib + 40, f"the server grew by {peak_growth_mib:.0f} MiB"
    assert set(flood) <= {401, 503, None}, flood
    assert flood.count(503) > FLOOD  # the budget was full again and again
    with httpx.Client(timeout=60) as client:
        assert post_signed(client, "after-flood") == 202


def test_the_buffer_setting_sizes_the_budget(data_dir: Path) -> None:
    settings = load_settings({"BOT_INTAKE_BUFFER_MB": "40"}, dotenv=None)
    store = Store.open(data_dir / "bot.sqlite3")
    try:
        app = create_app(settings, store)
        routes = [r for r in app.routes if isinstance(r, Route)]
        (receiver,) = [r.app for r in routes if r.path == "/webhooks/github"]
        assert isinstance(receiver, WebhookReceiver)
        assert (receiver.budget.total, receiver.budget.reserve) == (40 * MiB, 10 * MiB)
    finally:
        store.close()
    with pytest.raises(SettingsError, match="BOT_INTAKE_BUFFER_MB: must be at least 34"):
        load_settings({"BOT_INTAKE_BUFFER_MB": "33"}, dotenv=None)
