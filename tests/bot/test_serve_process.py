"""`bot serve` as a real subprocess on 127.0.0.1: every shared payload, duplicates, kill -9, logs."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from bot.store.queue.sqlite import SqliteJobQueue
from bot.store.sqlite import Store
from tests.conftest import PAYLOADS

pytestmark = pytest.mark.slow

SECRET = "process-test-secret"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def corpus(shared_payloads_dir: Path) -> list[tuple[str, bytes]]:
    """(event name, body) for every payload under the shared folder; the folder is the event."""
    paths = sorted(shared_payloads_dir.glob("*/*.json"))
    found = [(path.parent.name, path.read_bytes()) for path in paths]
    assert len(found) == 273, f"expected the 273 shared payloads, found {len(found)}"
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    url: str
    data_dir: Path
    log_path: Path

    def post(
        self, client: httpx.Client, event: str, body: bytes, guid: str, secret: str = SECRET
    ) -> httpx.Response:
        signature = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        return client.post(
            self.url + "/webhooks/github",
            content=body,
            headers={
                "X-GitHub-Event": event,
                "X-GitHub-Delivery": guid,
                "X-Hub-Signature-256": signature,
                "Content-Type": "application/json",
            },
        )

    def log_lines(self) -> list[dict[str, object]]:
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait()


def start(data_dir: Path, *args: str, secret: str | None = SECRET) -> Server:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOT_")}
    env.update({"BOT_DATA_DIR": str(data_dir), "BOT_APP_SLUG": "repo-agent"})
    if secret is not None:
        env["BOT_WEBHOOK_SECRET"] = secret
    log_path = data_dir.parent / f"serve-{port}.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "serve", "--port", str(port), *args],
            cwd=data_dir.parent,
            env={**env, "PYTHONPATH": str(ROOT)},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    server = Server(proc, f"http://127.0.0.1:{port}", data_dir, log_path)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"bot serve exited with {proc.returncode}:\n{log_path.read_text()}")
        try:
            if httpx.get(server.url + "/readyz", timeout=1).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    server.stop()
    pytest.fail(f"bot serve did not become ready:\n{log_path.read_text()}")


def wait_for_decisions(store: Store, guids: set[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pending = {d.guid for d in store.list_deliveries() if d.decision is None} & guids
        if not pending and guids <= {d.guid for d in store.list_deliveries()}:
            return
        time.sleep(0.1)
    pytest.fail(f"{len(pending)} deliveries have no decision, e.g. {sorted(pending)[:3]}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data_dir = tmp_path_factory.mktemp("serve") / "data"
    data_dir.mkdir()
    running = start(data_dir)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def all_posted(corpus: list[tuple[str, bytes]], server: Server) -> dict[str, str]:
    """Post every shared payload once; returns guid -> event."""
    sent: dict[str, str] = {}
    with httpx.Client(timeout=30) as client:
        for event, body in corpus:
            guid = str(uuid.uuid4())
            response = server.post(client, event, body, guid)
            assert (response.status_code, response.json()) == (202, {"status": "accepted"}), (
                event,
                response.text,
            )
            sent[guid] = event
    return sent


def test_every_shared_payload_is_stored_once_and_decided(
    all_posted: dict[str, str], server: Server
) -> None:
    store = Store.open(server.data_dir / "bot.sqlite3")
    try:
        wait_for_decisions(store, set(all_posted))
        rows = {d.guid: d for d in store.list_deliveries()}
        assert set(rows) == set(all_posted)
        assert {guid: row.event for guid, row in rows.items()} == all_posted
        assert {row.decision for row in rows.values()} <= {"trigger", "skip", "lifecycle"}
        # installation.deleted/suspend/unsuspend, installation_repositories.added/removed
        lifecycle = [row for row in rows.values() if row.decision == "lifecycle"]
        assert sorted(f"{row.event}.{row.action}" for row in lifecycle) == [
            "installation.deleted",
            "installation.suspend",
            "installation.unsuspend",
            "installation_repositories.added",
            "installation_repositories.removed",
        ]
        # Without credentials, what would start a run is skipped `not_configured`, to be
        # replayed once they are set; that some were shows the triggers were found.
        assert any((row.reason or "").startswith("not_configured") for row in rows.values())
        assert sum(SqliteJobQueue(store).counts_sync().values()) == 273
    finally:
        store.close()


def test_posting_everything_again_gives_duplicates_and_no_new_jobs(
    corpus: list[tuple[str, bytes]], all_posted: dict[str, str], server: Server
) -> None:
    bodies = dict(zip(all_posted, (body for _, body in corpus), strict=True))
    with httpx.Client(timeout=30) as client, ThreadPoolExecutor(8) as pool:
        responses = list(
            pool.map(lambda g: server.post(client, all_posted[g], bodies[g], g), all_posted)
        )
    assert {(r.status_code, r.text) for r in responses} == {(200, '{"status":"duplicate"}')}
    store = Store.open(server.data_dir / "bot.sqlite3")
    try:
        assert store.count_deliveries() == 273
        assert sum(SqliteJobQueue(store).counts_sync().values()) == 273
    finally:
        store.close()


def test_every_worker_log_line_carries_the_delivery_id(
    all_posted: dict[str, str], server: Server
) -> None:
    store = Store.open(server.data_dir / "bot.sqlite3")
    try:
        wait_for_decisions(store, set(all_posted))
    finally:
        store.close()
    lines = server.log_lines()
    handling = [
        line
        for line in lines
        if line["logger"] in ("bot.intake.web", "bot.runs.worker")
        and line["msg"] != "worker pool started"
    ]
    assert handling
    for line in handling:
        assert line.get("delivery_id"), line
    decided = {line["delivery_id"] for line in handling if line["logger"] == "bot.runs.worker"}
    assert set(all_posted) <= decided
    received = [line for line in lines if line["logger"] == "bot.intake.web"]
    assert {line["outcome"] for line in received} <= {"accepted", "duplicate"}
    assert not any(SECRET in json.dumps(line) for line in lines)


def test_kill_9_right_after_202s_loses_nothing(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    receiver = start(data_dir, "--no-worker", "--receivers", "1")  # SIGKILL the one process
    opened = json.loads((PAYLOADS / "issues" / "opened.payload.json").read_bytes())
    guids = [str(uuid.uuid4()) for _ in range(40)]
    # Forty issues opened: one body under forty GUIDs would be one triage and 39 replays.
    bodies = {
        g: json.dumps(
            {**opened, "issue": {**opened["issue"], "id": 5000 + n, "number": 10 + n}}
        ).encode()
        for n, g in enumerate(guids)
    }
    try:
        with httpx.Client(timeout=30) as client, ThreadPoolExecutor(8) as pool:
            statuses = list(
                pool.map(lambda g: receiver.post(client, "issues", bodies[g], g).status_code, guids)
            )
        assert statuses == [202] * 40
    finally:
        receiver.proc.send_signal(signal.SIGKILL)
        receiver.proc.wait()
    restarted = start(data_dir)
    try:
        store = Store.open(data_dir / "bot.sqlite3")
        try:
            wait_for_decisions(store, set(guids))
            assert store.count_deliveries() == 40
            # Each decided as the triage it is; without credentials, skipped until they are set.
            decided = [store.get_delivery(g) for g in guids]
            assert all(d is not None and d.decision == "skip" for d in decided)
            assert all(
                d is not None
                and (d.reason or "").startswith("not_configured")
                and "runs this triage" in (d.reason or "")
                for d in decided
            )
        finally:
            store.close()
    finally:
        assert restarted.stop() == 0


def test_without_secret_or_credentials_it_starts_and_says_what_is_missing(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    server = start(data_dir, secret=None)
    try:
        with httpx.Client(timeout=10) as client:
            response = server.post(client, "ping", b"{}", "g-1", secret="anything")
        assert response.status_code == 503
        assert "BOT_WEBHOOK_SECRET" in response.json()["error"]
    finally:
        assert server.stop() == 0
    messages = " ".join(str(line["msg"]) for line in server.log_lines())
    assert "BOT_APP_ID" in messages and "bot setup" in messages
    assert "deliveries are refused" in messages and "BOT_WEBHOOK_SECRET" in messages
