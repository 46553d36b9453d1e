"""An ASGI app served by uvicorn on a free port of 127.0.0.1, in a thread."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import uvicorn
from starlette.types import ASGIApp


def bound_socket() -> socket.socket:
    """A socket bound to a free port of 127.0.0.1, for an app that must know its own URL
    before it is served (`serve(app, sock=...)`)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@contextlib.contextmanager
def serve(
    app: ASGIApp, *, lifespan: str = "off", sock: socket.socket | None = None
) -> Iterator[str]:
    """Yields the server's base URL (`http://127.0.0.1:<port>`); stops it afterwards."""
    sock = sock or bound_socket()
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, log_level="warning", lifespan=lifespan, timeout_graceful_shutdown=2, loop="asyncio"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the operator page's server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
