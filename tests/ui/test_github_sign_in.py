"""Signing in to the operator's page with GitHub, through `bot serve`'s app and the fake
GitHub's OAuth endpoints over HTTP: who is let in, who is not, forged and replayed callbacks,
a person taken off the team, revoked sessions, and the audit of what each person did."""

from __future__ import annotations

import contextlib
import re
import sqlite3
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from bot.intake.web import create_app
from bot.settings import load_settings
from bot.store.sqlite import Store
from tests.fakes.github import FakeGitHub, make_fake_github, serve_fake_github
from tests.ui.conftest import TOKEN, seed
from tests.ui.server import bound_socket, serve


@dataclass
class World:
    fake: FakeGitHub
    gh: str
    ui: str
    store: Store
    running: str


@contextmanager
def world(
    tmp_path: Path, *, allow: str = "team:acme/ops", recheck: str = "60", web_host: str = ""
) -> Iterator[World]:
    """The app on 127.0.0.1 and the fake GitHub; with `web_host` (`localhost`) the browser
    reaches GitHub's pages under that name, another site than the app's, as github.com is."""
    fake = make_fake_github(tmp_path / "gh", owner="acme", repo="hello")
    fake.add_team_member("acme", "ops", "mona")
    fake.web_user = "mona"
    store = Store.open(tmp_path / "bot.db")
    seeded = seed(store)
    sock = bound_socket()
    ui = f"http://127.0.0.1:{sock.getsockname()[1]}"
    fake.oauth_callback_urls = [f"{ui}/ui/oauth/callback"]
    try:
        with serve_fake_github(fake) as gh:
            env = {
                "BOT_APP_ID": str(fake.app_id),
                "BOT_PRIVATE_KEY": fake.private_key_pem,
                "BOT_APP_SLUG": fake.slug,
                "BOT_GITHUB_API_URL": gh,
                "BOT_GITHUB_WEB_URL": gh.replace("127.0.0.1", web_host) if web_host else gh,
                "BOT_DATA_DIR": str(tmp_path),
                "BOT_WEBHOOK_SECRET": "webhook-secret-0123456789",
                "BOT_UI_TOKEN": TOKEN,
                "BOT_OAUTH_CLIENT_ID": fake.oauth_client_id,
                "BOT_OAUTH_CLIENT_SECRET": fake.oauth_client_secret,
                "BOT_UI_ALLOW": allow,
                "BOT_UI_URL": ui,
                "BOT_UI_RECHECK_SECONDS": recheck,
            }
            app = create_app(load_settings(environ=env, dotenv=None), store)
            with serve(app, lifespan="on", sock=sock):
                web = gh.replace("127.0.0.1", web_host) if web_host else gh
                yield World(fake, web, ui, store, seeded.running)
    finally:
        store.close()


def to_github(w: World, client: httpx.Client) -> str:
    """Start a sign-in; the callback URL the fake GitHub sends the browser back to."""
    start = client.get(f"{w.ui}/ui/oauth/start")
    assert start.status_code == 303
    authorize = start.headers["location"]
    assert authorize.startswith(f"{w.gh}/login/oauth/authorize?")
    sent = urllib.parse.parse_qs(urllib.parse.urlsplit(authorize).query)
    assert sent["redirect_uri"] == [f"{w.ui}/ui/oauth/callback"]
    back = httpx.get(authorize)  # the person approves on github.com
    assert back.status_code == 302, back.text
    return back.headers["location"]


def sign_in(w: World, client: httpx.Client) -> httpx.Response:
    return client.get(to_github(w, client))


def csrf(page: httpx.Response) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]{64})"', page.text)
    assert found, page.text[:500]
    return found.group(1)


def audit_rows(w: World) -> list[tuple[str, str, str]]:
    return [(e.actor, e.action, e.target) for e in reversed(w.store.audit_entries())]


def test_a_team_member_signs_in_and_the_audit_shows_their_stop(tmp_path: Path) -> None:
    with world(tmp_path) as w, httpx.Client() as browser:
        signed = sign_in(w, browser)
        # A page that moves on to /ui/ by itself (a redirect would carry no Strict cookie
        # on a way back that github.com started).
        assert signed.status_code == 200 and "Signed in as mona" in signed.text
        assert '<meta http-equiv="refresh" content="0;url=/ui/">' in signed.text
        cookie = signed.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
        home = browser.get(f"{w.ui}/ui/")
        assert home.status_code == 200 and 'id="signed-in-as">mona<' in home.text
        stop = browser.post(f"{w.ui}/ui/runs/{w.running}/stop", data={"csrf": csrf(home)})
        assert stop.status_code == 303
        audit = browser.get(f"{w.ui}/ui/audit")
        assert audit.status_code == 200
        assert audit_rows(w) == [("mona", "sign-in", ""), ("mona", "stop", w.running)]
        assert "GitHub, as team:acme/ops" in audit.text and w.running in audit.text
        out = browser.post(f"{w.ui}/ui/sign-out", data={"csrf": csrf(audit)})
        assert out.status_code == 303 and browser.get(f"{w.ui}/ui/").status_code == 303
        assert audit_rows(w)[-1] == ("mona", "sign-out", "")
        # The person's GitHub token is nowhere in the store.
        [token] = list(w.fake.user_tokens)
        with contextlib.closing(sqlite3.connect(w.store.path)) as db:
            dump = "\n".join(db.iterdump())
        assert "mona" in dump and token not in dump


def test_someone_no_rule_lets_in_is_refused_and_that_is_audited(tmp_path: Path) -> None:
    with world(tmp_path) as w, httpx.Client() as browser:
        w.fake.web_user = "eve"
        refused = sign_in(w, browser)
        assert refused.status_code == 403
        assert "eve may not sign in here (allowed: team:acme/ops)" in refused.text
        assert "bot_ui=" not in refused.headers.get("set-cookie", "")
        assert browser.get(f"{w.ui}/ui/").status_code == 303
        assert audit_rows(w) == [("eve", "sign-in refused", "")]


def test_a_forged_a_replayed_and_a_foreign_callback_are_refused(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        with httpx.Client() as browser:
            callback = to_github(w, browser)
            forged = re.sub(r"state=[0-9a-f]+", "state=" + "0" * 32, callback)
            assert browser.get(forged).status_code == 400
        with httpx.Client() as browser:
            callback = to_github(w, browser)
            kept = dict(browser.cookies)
            # Another browser (a link an attacker sent, with the attacker's code): no state
            # cookie of its own, so nothing signs it in as the attacker.
            with httpx.Client() as victim:
                lured = victim.get(callback)
                assert lured.status_code == 400 and "not started in this browser" in lured.text
            assert browser.get(callback).status_code == 200  # the real one, once
            for name, value in kept.items():
                browser.cookies.set(name, value, path="/ui/oauth/")
            replayed = browser.get(callback)
            assert replayed.status_code == 400 and "used or expired" in replayed.text
        with httpx.Client() as browser:
            callback = to_github(w, browser)
            foreign = browser.get(callback, headers={"host": "evil.example"})
            assert foreign.status_code == 400 and f"Sign in at {w.ui}/ui/" in foreign.text
            # Starting on another host goes to BOT_UI_URL first.
            elsewhere = browser.get(f"{w.ui}/ui/oauth/start", headers={"host": "evil.example"})
            assert elsewhere.headers["location"] == f"{w.ui}/ui/oauth/start"


def test_an_expired_code_and_a_wrong_redirect_are_refused(tmp_path: Path) -> None:
    with world(tmp_path) as w, httpx.Client() as browser:
        w.fake.oauth_code_ttl_s = 0.0
        expired = sign_in(w, browser)
        assert expired.status_code == 400 and "bad_verification_code" in expired.text
        w.fake.oauth_code_ttl_s = 600.0
        # GitHub sends a mismatched redirect back to the registered callback with an error.
        w.fake.oauth_callback_urls = [f"{w.ui}/ui/oauth/callback", "https://other.example/cb"]
        start = browser.get(f"{w.ui}/ui/oauth/start").headers["location"]
        wrong = start.replace(
            urllib.parse.quote(f"{w.ui}/ui/oauth/callback", safe=""),
            urllib.parse.quote("https://other.example/cb/x", safe=""),
        )
        back = httpx.get(wrong)
        assert back.status_code == 302 and "error=redirect_uri_mismatch" in back.headers["location"]
        said = browser.get(back.headers["location"])
        assert said.status_code == 400 and "redirect_uri_mismatch" in said.text
        assert browser.get(f"{w.ui}/ui/").status_code == 303


def test_someone_taken_off_the_team_is_refused_at_the_next_check(tmp_path: Path) -> None:
    with world(tmp_path, recheck="0") as w, httpx.Client() as browser:
        assert sign_in(w, browser).status_code == 200
        assert browser.get(f"{w.ui}/ui/").status_code == 200
        # GitHub failing to answer keeps the session, and says so.
        w.fake.fail_next("GET", "/orgs/acme/teams/ops/memberships/*", 502, times=4)
        unsure = browser.get(f"{w.ui}/ui/")
        assert unsure.status_code == 503 and "did not answer" in unsure.text
        assert browser.get(f"{w.ui}/ui/").status_code == 200
        w.fake.remove_team_member("acme", "ops", "mona")
        out = browser.get(f"{w.ui}/ui/")
        assert out.status_code == 303 and out.headers["location"].endswith("/ui/sign-in")
        assert ("mona", "access withdrawn") in [(a, b) for a, b, _ in audit_rows(w)]
        w.fake.add_team_member("acme", "ops", "mona")  # back on the team: the session is gone
        assert browser.get(f"{w.ui}/ui/").status_code == 303


def test_a_repository_admin_is_let_in_while_they_stay_admin(tmp_path: Path) -> None:
    with world(tmp_path, allow="repo-admins", recheck="0") as w, httpx.Client() as browser:
        w.fake.web_user = "ada"
        w.fake.set_permission("acme", "hello", "ada", "write")
        assert sign_in(w, browser).status_code == 403
        w.fake.set_permission("acme", "hello", "ada", "admin")
        assert sign_in(w, browser).status_code == 200
        assert browser.get(f"{w.ui}/ui/").status_code == 200
        [row] = [s for s in w.store.ui_sessions() if s.login]
        assert row.grant == "repo:acme/hello"
        w.fake.set_permission("acme", "hello", "ada", "write")
        assert browser.get(f"{w.ui}/ui/").status_code == 303


def test_a_revoked_session_signs_no_one_in_and_the_revoke_is_audited(tmp_path: Path) -> None:
    with world(tmp_path) as w, httpx.Client() as mona, httpx.Client() as operator:
        assert sign_in(w, mona).status_code == 200
        signed = operator.post(f"{w.ui}/ui/sign-in", data={"token": TOKEN})
        assert signed.status_code == 303
        listing = operator.get(f"{w.ui}/ui/sessions")
        [row] = [s for s in w.store.ui_sessions() if s.login == "mona"]
        assert row.handle in listing.text and row.id not in listing.text
        no_csrf = operator.post(f"{w.ui}/ui/sessions/{row.handle}/revoke")
        assert no_csrf.status_code == 403
        revoked = operator.post(
            f"{w.ui}/ui/sessions/{row.handle}/revoke", data={"csrf": csrf(listing)}
        )
        assert revoked.status_code == 303
        assert mona.get(f"{w.ui}/ui/").status_code == 303
        assert operator.get(f"{w.ui}/ui/").status_code == 200
        assert audit_rows(w)[-1] == ("(shared token)", "revoke", row.handle)


@pytest.mark.parametrize("text", ["org:", "team:acme", "everyone"])
def test_a_broken_allow_list_stops_the_app_with_the_entry_named(text: str) -> None:
    from bot.settings import SettingsError

    with pytest.raises(SettingsError) as refused:
        load_settings(environ={"BOT_UI_ALLOW": text}, dotenv=None)
    assert "BOT_UI_ALLOW" in str(refused.value) and "org:NAME" in str(refused.value)
