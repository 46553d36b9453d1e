"""The operator page through its ASGI app: sign-in, refusals, headers, and each page's content."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import httpx

from bot.intake.web import create_app
from bot.ops.doctor import DoctorContext, check_ui
from bot.settings import Settings
from bot.store.sqlite import Store
from tests.ui.conftest import Seeded, sign_in, ui_settings
from tests.ui.seed import PLANTED_TOKEN


def test_pages_need_the_cookie(client: httpx.Client) -> None:
    r = client.get("/ui/", follow_redirects=False)
    assert r.status_code == 303
    assert r.headers["location"] == "/ui/sign-in"
    assert client.get("/ui/runs/wf_000000000000/live").status_code == 401


def test_sign_in_sets_a_strict_http_only_cookie(client: httpx.Client) -> None:
    r = client.post(
        "/ui/sign-in", data={"token": "operator-token-0123456789abcdef"}, follow_redirects=False
    )
    assert r.status_code == 303
    cookie = r.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/ui/" in cookie
    assert "operator-token" not in cookie
    assert client.get("/ui/").status_code == 200


def test_a_wrong_token_is_refused_and_repeated_failures_are_rate_limited(
    client: httpx.Client,
) -> None:
    codes = [client.post("/ui/sign-in", data={"token": f"wrong-{i}"}).status_code for i in range(6)]
    assert codes == [401] * 5 + [429]
    r = client.post("/ui/sign-in", data={"token": "wrong-again"}, follow_redirects=False)
    assert r.status_code == 429
    assert "retry-after" in r.headers
    # The right token is never refused: the address may be a proxy every browser shares.
    r = client.post(
        "/ui/sign-in", data={"token": "operator-token-0123456789abcdef"}, follow_redirects=False
    )
    assert r.status_code == 303


def test_a_forged_cookie_is_refused(client: httpx.Client) -> None:
    client.cookies.set("bot_ui", "0" * 32 + ".1.deadbeef", path="/ui/")
    assert client.get("/ui/", follow_redirects=False).status_code == 303


def test_security_headers_on_every_page(client: httpx.Client) -> None:
    for path in ("/ui/sign-in", "/ui/static/ui.css"):
        r = client.get(path)
        assert r.headers["x-frame-options"] == "DENY"
        csp = r.headers["content-security-policy"]
        assert "default-src 'self'" in csp and "script-src 'self'" in csp
        assert "unsafe-inline" not in csp


def test_no_inline_script_or_style_in_any_page(client: httpx.Client, seeded: Seeded) -> None:
    sign_in(client)
    paths = [
        "/ui/",
        "/ui/deliveries/d-1",
        "/ui/runs",
        f"/ui/runs/{seeded.finished}",
        f"/ui/runs/{seeded.finished}/agents/0",
        f"/ui/runs/{seeded.writer}/agents/0",
        "/ui/costs",
    ]
    for path in paths:
        html = client.get(path).text
        assert re.search(r"<script(?![^>]*\bsrc=)", html) is None, path
        assert " style=" not in html and "<style" not in html, path
        assert re.search(r"\son[a-z]+=", html) is None, path


def test_deliveries_show_decisions_jobs_and_runs(client: httpx.Client, seeded: Seeded) -> None:
    sign_in(client)
    html = client.get("/ui/deliveries").text
    order = [html.index(g) for g in ("d-fix", "d-run", "d-hostile", "d-1", "d-skip")]
    assert order == sorted(order)  # newest first
    assert "draft pull request" in html
    assert seeded.finished in html
    skip_only = client.get("/ui/deliveries?decision=skip").text
    assert "d-skip" in skip_only and "d-1<" not in skip_only
    repo_only = client.get("/ui/deliveries?repo=octo/lib").text
    assert "d-fix" in repo_only and "d-run" not in repo_only


def test_deliveries_page_through_a_cursor(client: httpx.Client) -> None:
    sign_in(client)
    first = client.get("/ui/deliveries?size=2").text
    assert "d-fix" in first and "d-run" in first and "d-hostile" not in first
    link = re.search(r'rel="next" href="([^"]+)"', first)
    assert link is not None
    second = client.get(link.group(1).replace("&amp;", "&")).text
    assert "d-hostile" in second and "d-1<" in second and "d-fix" not in second


def test_a_delivery_shows_headers_without_the_signature(client: httpx.Client) -> None:
    sign_in(client)
    html = client.get("/ui/deliveries/d-1").text
    assert "x-github-event" in html and "GitHub-Hookshot" in html
    assert "signature" not in html.lower()
    assert '<details class="payload">' in html and "octo/app" in html


def test_runs_filter_and_show_usage(client: httpx.Client, seeded: Seeded) -> None:
    sign_in(client)
    html = client.get("/ui/runs").text
    assert all(run in html for run in (seeded.finished, seeded.running, seeded.writer))
    assert "$1.5000" in html and "10,000" in html
    assert "https://github.com/octo/app/pull/3" in html
    fixes = client.get("/ui/runs?workflow=fix").text
    assert seeded.writer in fixes and seeded.finished not in fixes


def test_a_run_page_draws_its_timeline(client: httpx.Client, seeded: Seeded) -> None:
    sign_in(client)
    html = client.get(f"/ui/runs/{seeded.finished}").text
    assert html.count('class="bar ') == 3
    # Two calls overlapped: two lanes; the replayed one is marked.
    assert 'class="bar s-done replayed"' in html
    assert re.search(r'<rect x="[\d.]+" y="46"', html)  # a second lane
    assert "Labelled it <strong>bug</strong>" in html
    assert "stop-run" not in html  # the run has ended


def test_an_agent_page_shows_its_transcript(client: httpx.Client, seeded: Seeded) -> None:
    sign_in(client)
    html = client.get(f"/ui/runs/{seeded.finished}/agents/0").text
    for part in ("Prompt for explore code", "read_file", "README.md", "has a summary", "accepted"):
        assert part in html
    writer = client.get(f"/ui/runs/{seeded.writer}/agents/0").text
    assert f"bot/implement-{seeded.writer}-0" in writer
    assert '<span class="d-add">+new = 2</span>' in writer
    assert "abc1234 Fix the parser" in writer


def test_hostile_text_is_escaped_and_the_token_redacted(
    client: httpx.Client, seeded: Seeded
) -> None:
    sign_in(client)
    pages = [
        client.get(f"/ui/runs/{seeded.hostile}").text,
        client.get(f"/ui/runs/{seeded.hostile}/agents/0").text,
        client.get("/ui/deliveries/d-hostile").text,
        client.get("/ui/deliveries").text,
    ]
    for html in pages:
        assert PLANTED_TOKEN not in html
        assert "<script>alert" not in html
        assert "<img" not in html
        assert 'href="javascript:' not in html
    assert "&lt;script&gt;" in pages[1]
    assert "[redacted github token]" in pages[1]


def test_stop_needs_the_csrf_token(client: httpx.Client, seeded: Seeded) -> None:
    sign_in(client)
    html = client.get(f"/ui/runs/{seeded.running}").text
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert csrf is not None
    r = client.post(f"/ui/runs/{seeded.running}/stop", data={}, follow_redirects=False)
    assert r.status_code == 403
    r = client.post(
        f"/ui/runs/{seeded.running}/stop", data={"csrf": "0" * 64}, follow_redirects=False
    )
    assert r.status_code == 403
    assert seeded.store.stop_requested(seeded.running) is None
    r = client.post(
        f"/ui/runs/{seeded.running}/stop", data={"csrf": csrf.group(1)}, follow_redirects=False
    )
    assert r.status_code == 303
    assert seeded.store.stop_requested(seeded.running) == "stopped from the operator's page"


def test_live_endpoint_follows_the_details(client: httpx.Client, seeded: Seeded) -> None:
    sign_in(client)
    data = client.get(f"/ui/runs/{seeded.running}/live").json()
    assert data["finished"] is False
    assert "read diff" in data["html"]


def test_costs_add_up_per_workflow_and_repository(client: httpx.Client, seeded: Seeded) -> None:
    sign_in(client)
    html = client.get("/ui/costs?days=7").text
    assert "$1.9300" in html  # 0.42 + 0.01 + 1.5
    assert '<svg xmlns="http://www.w3.org/2000/svg" class="chart"' in html
    assert html.index(seeded.writer) < html.index(seeded.finished)  # costliest first


def test_the_page_is_mounted_only_with_a_token(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "bot.db")
    try:
        off = create_app(Settings.model_validate({"data_dir": str(tmp_path)}), store)
        on = create_app(ui_settings(tmp_path), store)
        paths = lambda app: {getattr(r, "path", "") for r in app.routes}  # noqa: E731
        assert "/ui" not in paths(off)
        assert "/ui" in paths(on)
    finally:
        store.close()


def test_doctor_says_whether_the_page_is_on(tmp_path: Path) -> None:
    off = anyio.run(check_ui, DoctorContext(settings=Settings()))
    assert off.status == "ok" and "off" in off.detail
    on = anyio.run(check_ui, DoctorContext(settings=ui_settings(tmp_path)))
    assert on.status == "ok" and "/ui/" in on.detail
    assert "operator-token" not in on.line()
    short = anyio.run(check_ui, DoctorContext(settings=ui_settings(tmp_path, token="short")))
    assert short.status == "warn"


def test_sign_out_needs_the_csrf_token_and_ends_the_session(client: httpx.Client) -> None:
    sign_in(client)
    html = client.get("/ui/").text
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert csrf is not None
    assert client.post("/ui/sign-out", data={}).status_code == 403
    r = client.post("/ui/sign-out", data={"csrf": csrf.group(1)}, follow_redirects=False)
    assert r.status_code == 303
    assert client.get("/ui/", follow_redirects=False).status_code == 303


def test_unknown_runs_and_deliveries_are_404(client: httpx.Client) -> None:
    sign_in(client)
    assert client.get("/ui/runs/wf_000000000000").status_code == 404
    assert client.get("/ui/deliveries/nope").status_code == 404
    assert client.get("/ui/runs/wf_000000000000/agents/3").status_code == 404


def test_odd_sign_in_bodies_are_refused_not_errors(client: httpx.Client) -> None:
    many = {f"f{i}": "x" for i in range(20)}
    assert client.post("/ui/sign-in", data=many).status_code == 401
    assert client.post("/ui/sign-in", data={"token": "x" * 10_000}).status_code == 401
    r = client.post("/ui/sign-in", content=b"{}", headers={"content-type": "application/json"})
    assert r.status_code == 401


def test_a_run_page_says_how_much_input_came_from_the_providers_cache(
    client: httpx.Client, seeded: Seeded
) -> None:
    sign_in(client)
    run = seeded.store.get_run(seeded.finished)
    assert run is not None and run.outcome is not None
    before = client.get(f"/ui/runs/{seeded.finished}").text
    assert "from the provider's cache" not in before
    usage = {**run.outcome["usage"], "cache_read": 5_120}
    seeded.store.update_run(run.id, status=run.status, outcome={**run.outcome, "usage": usage})
    seeded.store.record_run_usage(
        run.id, input_tokens=6_660, output_tokens=740, cost=0.2, finished_at=run.updated_at
    )
    html = client.get(f"/ui/runs/{seeded.finished}").text
    assert "6,660 in (5,120 from the provider's cache), 740 out" in html
