"""What the operator's page does with input it did not write: malformed cookies, CSRF values
and numbers are refusals (303 to the sign-in, 403, 400), never a 500; the sign-in limit is per
address and never keeps the right token out; a signed-out session is over on the server, not
only in the browser that signed out. Through the real app on both storage backends."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from bot.store.contract import Storage
from bot.ui.app import operator_page
from tests.backends import BACKENDS, backend_store
from tests.ui.conftest import TOKEN, Seeded, seed, sign_in, ui_settings
from tests.ui.server import serve

Connect = Callable[..., httpx.Client]
"""A client of one page process (`page`, 0 or 1) from the loopback address `source`."""


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, data_dir: Path) -> Iterator[Storage]:
    yield from backend_store(request, data_dir)


@pytest.fixture
def seeded(store: Storage) -> Seeded:
    return seed(store)


@pytest.fixture
def connect(seeded: Seeded, tmp_path: Path) -> Iterator[Connect]:
    """Two page processes over one store (as `bot serve --receivers 2` runs them), and clients
    of either from any loopback address."""
    with ExitStack() as stack:
        urls = [
            stack.enter_context(
                serve(Starlette(routes=[operator_page(ui_settings(tmp_path), seeded.store)]))
            )
            for _ in range(2)
        ]

        def make(page: int = 0, source: str = "127.0.0.1") -> httpx.Client:
            transport = httpx.HTTPTransport(local_address=source)
            return stack.enter_context(
                httpx.Client(base_url=urls[page], transport=transport, timeout=10)
            )

        yield make


@pytest.fixture
def client(connect: Connect) -> httpx.Client:
    return connect()


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert found is not None, html[:500]
    return found.group(1)


SIGNED_IN_PAGES = (
    "/ui/",
    "/ui/deliveries",
    "/ui/deliveries/d-1",
    "/ui/runs",
    "/ui/costs",
)


@pytest.mark.parametrize(
    "value",
    [
        "0" * 32 + ".1." + "\u00e9" * 64,  # a non-ASCII signature
        "\u00e9" * 32 + ".1." + "0" * 64,  # a non-ASCII session id
        "0" * 32 + ".\u00b2." + "0" * 64,  # a digit int() does not read
        "0" * 32 + ".\u0663." + "0" * 64,  # an Arabic-Indic digit
        "0" * 32 + "." + "9" * 5000 + "." + "0" * 64,  # more digits than int() reads
        "\u00ff\u00fe",
    ],
    ids=["signature", "session-id", "superscript", "arabic-digit", "long-number", "latin-1"],
)
def test_a_malformed_cookie_is_a_sign_in_not_an_error(client: httpx.Client, value: str) -> None:
    # Sent as the raw UTF-8 bytes a browser (or anyone) may put in the header.
    raw = f"bot_ui={value}".encode()
    for path in SIGNED_IN_PAGES:
        r = client.get(path, headers={"cookie": raw}, follow_redirects=False)  # type: ignore[dict-item]
        assert r.status_code == 303, (path, r.status_code, r.text[:300])
        assert r.headers["location"] == "/ui/sign-in"
    r = client.get("/ui/runs/wf_000000000000/live", headers={"cookie": raw})  # type: ignore[dict-item]
    assert r.status_code == 401
    r = client.post("/ui/sign-out", headers={"cookie": raw}, follow_redirects=False)  # type: ignore[dict-item]
    assert r.status_code == 303


@pytest.mark.parametrize(
    "csrf",
    ["\u00e9" * 64, "\u00b2", "\u00e9", "0" * 63 + "\u0663", "\x00"],
    ids=["accents", "superscript", "short", "arabic-digit", "nul"],
)
def test_a_malformed_csrf_value_is_forbidden(
    client: httpx.Client, seeded: Seeded, csrf: str
) -> None:
    sign_in(client)
    r = client.post(f"/ui/runs/{seeded.running}/stop", data={"csrf": csrf}, follow_redirects=False)
    assert r.status_code == 403
    assert seeded.store.stop_requested(seeded.running) is None
    r = client.post("/ui/sign-out", data={"csrf": csrf}, follow_redirects=False)
    assert r.status_code == 403
    # A CSRF value whose bytes are not UTF-8 at all.
    r = client.post(
        "/ui/sign-out",
        content=b"csrf=%FF%FE" + b"%C3" * 30,
        headers={"content-type": "application/x-www-form-urlencoded"},
        follow_redirects=False,
    )
    assert r.status_code == 403
    assert client.get("/ui/", follow_redirects=False).status_code == 200  # still signed in


MALFORMED_NUMBERS = {
    "superscript": "\u00b2",
    "arabic-digit": "\u0663",
    "exponent": "1e3",
    "negative": "-1",
    "hex": "0x10",
    "space": " 7",
    "fraction": "7.5",
    "long": "9" * 5000,
    "nul": "\x00",
}


@pytest.mark.parametrize("number", MALFORMED_NUMBERS.values(), ids=MALFORMED_NUMBERS.keys())
def test_a_malformed_number_in_any_parameter_is_a_bad_request(
    client: httpx.Client, seeded: Seeded, number: str
) -> None:
    sign_in(client)
    for path, name in (
        ("/ui/costs", "days"),
        ("/ui/deliveries", "size"),
        ("/ui/", "size"),
        ("/ui/runs", "size"),
    ):
        r = client.get(path, params={name: number})
        assert r.status_code == 400, (path, name, r.status_code)
        assert "<h1>Bad request</h1>" in r.text
    if number != MALFORMED_NUMBERS["fraction"]:  # a cursor's time has a fraction
        for path in ("/ui/deliveries", "/ui/runs"):
            r = client.get(path, params={"before": f"{number}~d-1"})
            assert r.status_code == 400, (path, r.status_code)
    r = client.get(f"/ui/runs/{seeded.finished}/agents/{urllib.parse.quote(number)}")
    assert r.status_code in (400, 404), r.status_code


def test_numbers_the_page_wrote_still_work(client: httpx.Client, seeded: Seeded) -> None:
    sign_in(client)
    assert client.get("/ui/costs", params={"days": "7"}).status_code == 200
    assert client.get("/ui/costs", params={"days": "100000"}).status_code == 200  # capped
    assert client.get("/ui/costs", params={"days": ""}).status_code == 200  # the default
    assert client.get("/ui/deliveries", params={"size": "2"}).status_code == 200
    assert client.get(f"/ui/runs/{seeded.finished}/agents/0").status_code == 200
    big = "9" * 9
    assert client.get(f"/ui/runs/{seeded.finished}/agents/{big}").status_code == 404


@pytest.mark.parametrize("text", ["\x00", "a\x00b"], ids=["nul", "inner-nul"])
def test_a_nul_in_a_text_parameter_is_a_bad_request(
    client: httpx.Client, seeded: Seeded, text: str
) -> None:
    sign_in(client)
    for path, name in (
        ("/ui/deliveries", "repo"),
        ("/ui/deliveries", "event"),
        ("/ui/runs", "repo"),
    ):
        r = client.get(path, params={name: text})
        assert r.status_code == 400, (path, name, r.status_code)
    quoted = text.replace("\x00", "%00")
    for path in (f"/ui/runs/{quoted}", f"/ui/deliveries/{quoted}", f"/ui/runs/{quoted}/live"):
        r = client.get(path)
        assert r.status_code == 400, (path, r.status_code)
    r = client.post(f"/ui/runs/{quoted}/stop", data={"csrf": _csrf(client.get("/ui/").text)})
    assert r.status_code == 400


def test_failures_from_one_address_never_keep_the_right_token_out(connect: Connect) -> None:
    attacker = connect(source="127.0.0.2")
    codes = [attacker.post("/ui/sign-in", data={"token": f"no-{i}"}).status_code for i in range(5)]
    assert codes == [401] * 5
    # That address is limited: its wrong guesses are refused...
    r = attacker.post("/ui/sign-in", data={"token": "still-wrong"})
    assert r.status_code == 429 and "retry-after" in r.headers
    # ...the operator at another address signs in as ever...
    operator = connect(source="127.0.0.3")
    assert operator.post("/ui/sign-in", data={"token": "wrong-once"}).status_code == 401
    r = operator.post("/ui/sign-in", data={"token": TOKEN}, follow_redirects=False)
    assert r.status_code == 303
    assert operator.get("/ui/", follow_redirects=False).status_code == 200
    # ...and so does the right token from the limited address itself (a shared proxy's).
    same = connect(source="127.0.0.2")
    r = same.post("/ui/sign-in", data={"token": TOKEN}, follow_redirects=False)
    assert r.status_code == 303
    assert same.get("/ui/", follow_redirects=False).status_code == 200
    # The right token did not lift the limit on the wrong ones.
    assert attacker.post("/ui/sign-in", data={"token": "wrong-again"}).status_code == 429


def test_a_signed_out_cookie_is_refused_everywhere(connect: Connect, seeded: Seeded) -> None:
    browser = connect(page=0)
    sign_in(browser)
    cookie = browser.cookies["bot_ui"]
    csrf = _csrf(browser.get("/ui/").text)
    other = connect(page=0)
    sign_in(other)  # another session, which outlives this one's sign-out

    # The other page process accepts the session: it is the store's, not a process's.
    elsewhere = connect(page=1)
    elsewhere.cookies.set("bot_ui", cookie, path="/ui/")
    assert elsewhere.get("/ui/", follow_redirects=False).status_code == 200

    r = browser.post("/ui/sign-out", data={"csrf": csrf}, follow_redirects=False)
    assert r.status_code == 303

    # The cookie, replayed by whoever kept a copy, no longer signs anyone in, on either process.
    for page in (0, 1):
        replay = connect(page=page)
        replay.cookies.set("bot_ui", cookie, path="/ui/")
        r = replay.get("/ui/", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/ui/sign-in"
        assert replay.get(f"/ui/runs/{seeded.running}/live").status_code == 401
        r = replay.post(
            f"/ui/runs/{seeded.running}/stop", data={"csrf": csrf}, follow_redirects=False
        )
        assert r.status_code == 303 and r.headers["location"] == "/ui/sign-in"
    assert seeded.store.stop_requested(seeded.running) is None
    assert other.get("/ui/", follow_redirects=False).status_code == 200
